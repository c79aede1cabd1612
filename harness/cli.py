"""The `mibench` command line. Commands only parse arguments and call plain functions;
any expected failure (MibenchError) is one line on stderr and exit code 2.

Exit codes: 0 ok; 2 bad config or input; 3 (run) some case or parity check failed;
130 interrupted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mibench.harness.run.guard import guarded

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Benchmark multi-item scoring engines: run configs, score requests.")
model_app = typer.Typer(no_args_is_help=True, help="Model files.")
app.add_typer(model_app, name="model")

Sets = Annotated[list[str] | None, typer.Option("--set", help="Override a config key: "
                                                "a.b=value (value parsed as YAML).")]


@app.command("run")
@guarded
def run_cmd(config: Path, out: Annotated[Path, typer.Option(help="Artifact folder.")] =
            Path("artifacts"), set_: Sets = None,
            resume: Annotated[Path | None, typer.Option(
                help="Artifact of an interrupted run of the same config: re-run only its "
                     "missing or failed cases.")] = None,
            engine_repo: Annotated[Path | None, typer.Option(
                help="Another git checkout to record in the provenance.")] = None,
            coordinator: Annotated[str | None, typer.Option(
                help="host:port of process 0, for a multi-process run (else "
                     "JAX_COORDINATOR_ADDRESS, or MIBENCH_DISTRIBUTED=auto).")] = None,
            num_processes: Annotated[int | None, typer.Option(
                help="Processes in the multi-process run.")] = None,
            process_id: Annotated[int | None, typer.Option(
                help="This process's index; process 0 writes the artifact.")] = None):
    """Run every case of CONFIG, write one JSON artifact (exit 3: a case or parity failed)."""
    from mibench.harness.commands import run_config

    try:
        code = run_config(config, out, set_ or [], resume, engine_repo, sys.argv,
                          (coordinator, num_processes, process_id))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    raise typer.Exit(code)


@app.command()
@guarded
def validate(config: Path, set_: Sets = None):
    """Expand and check CONFIG; print its cases; run nothing."""
    from mibench.harness.commands import validate_config

    print(validate_config(config, set_ or []))


@app.command()
@guarded
def score(
    query: Annotated[str | None, typer.Option(help="Token ids (1,2,3) or text.")] = None,
    item: Annotated[list[str] | None, typer.Option(help="An item: ids or text (repeat).")]
    = None,
    request: Annotated[Path | None, typer.Option(
        help='JSON file {"query": ..., "items": [...]}, ids or text.')] = None,
    labels: Annotated[str, typer.Option(help="Label token ids, e.g. 198,9834.")] = "198",
    model: str = "embedded:tiny", engine: str = "jax", mode: str = "single",
    dtype: str = "float32", tp: int = 1,
    delimiter: Annotated[int | None, typer.Option(help="Delimiter token id.")] = None,
    softmax: Annotated[bool, typer.Option(help="Softmax over the labels only.")] = False,
    option: Annotated[list[str] | None, typer.Option(
        help="Mode option key=value, e.g. mask=segment (repeat).")] = None,
):
    """Score one request; JSON scores on stdout."""
    from mibench.harness.commands import score_request

    result = score_request(query=query, items=item, request=request, labels=labels,
                           model=model, engine=engine, mode=mode, dtype=dtype, tp=tp,
                           delimiter=delimiter, softmax=softmax, options=option or [])
    print(json.dumps(result))


@app.command()
@guarded
def env(peak: Annotated[bool, typer.Option(help="Include the peak FLOP/s (measured on "
                                                "CPU).")] = True):
    """Devices, package versions and peak FLOP/s, as JSON."""
    from mibench.harness.commands import environment

    print(json.dumps(environment(peak), indent=1))


@model_app.command("make")
@guarded
def model_make(preset: str, out: Annotated[Path, typer.Option(help="Output folder.")]):
    """Write embedded preset PRESET as a Hugging Face checkpoint folder."""
    from mibench.engines import make_model

    print(make_model(preset, out))


from mibench.harness.report.commands import compare, history, report  # noqa: E402

app.command()(report)
app.command()(compare)
app.command()(history)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
