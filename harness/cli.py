"""The `mibench` command line, assembled: one module per command in harness/commands/,
each parsing its arguments and calling a plain function. Any expected failure is one
`error: ...` line on stderr and exit 2 (harness/commands/common.py).

Exit codes: 0 ok; 1 a regression (compare, ab, nightly); 2 bad input or nothing that could be
judged; 3 a case or a parity check failed (run, compile); 4 the environment failed mid-run
(a full disk, a file-size limit); for `nightly` also 5 a run of undecided nights and 6 another
night holds the history folder; 130 interrupted (Ctrl-C, or SIGTERM: a CI job cancelled or
timed out gets the same clean stop as Ctrl-C: servers and workers stopped, the finished cases
kept).
"""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer

from .commands import (
    ab,
    bisect,
    compare,
    env,
    export,
    history,
    job,
    model,
    nightly,
    report,
    run,
    score,
    serve,
    site,
    validate,
)
from .commands import compile as compile_cmd
from .commands.common import OneLineErrors
from .util import sigterm_as_ctrl_c

app = typer.Typer(add_completion=False, no_args_is_help=True, cls=OneLineErrors,
                  help="Benchmark multi-item scoring engines: run configs, score requests.")


def _version(value: bool) -> None:
    if value:
        from .host.provenance import mibench_version

        print(f"mibench {mibench_version()}")
        raise typer.Exit(0)


@app.callback()
def main_options(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print mibench's version (and its commit when run from a checkout).")] = False):
    """Benchmark multi-item scoring engines: run configs, score requests."""


app.command("run")(run.run)
app.command()(validate.validate)
app.command()(score.score)
app.command()(serve.serve)
app.command("compile")(compile_cmd.compile_)
app.command()(env.env)
app.command()(ab.ab)
app.command()(bisect.bisect)
app.command()(report.report)
app.command()(compare.compare)
app.command()(history.history)
app.command()(nightly.nightly)
app.command()(nightly.accept)
app.command()(nightly.regressions)
app.command()(site.site)
app.command()(export.export)
app.add_typer(model.model_app, name="model")
app.add_typer(job.job_app, name="job")


def main() -> None:
    from mibench.engines import skip_absent_tpu

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:  # an ignored SIGTERM stays so
        sigterm_as_ctrl_c()
    skip_absent_tpu()  # libtpu without a TPU: no start-up noise here or in the workers
    try:
        app()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
