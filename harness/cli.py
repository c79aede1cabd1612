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

from mibench.harness.jobs.cli import job_app
from mibench.harness.run.guard import OneLineErrors, guarded
from mibench.harness.serve_limits import Limits as ServeLimits  # `serve`'s defaults

app = typer.Typer(add_completion=False, no_args_is_help=True, cls=OneLineErrors,
                  help="Benchmark multi-item scoring engines: run configs, score requests.")
model_app = typer.Typer(no_args_is_help=True, help="Model files.")
app.add_typer(model_app, name="model")
app.add_typer(job_app, name="job")

Sets = Annotated[list[str] | None, typer.Option("--set", help="Override a config key: "
                                                "a.b=value (value parsed as YAML).")]


@app.command("run")
@guarded
def run_cmd(config: Path, out: Annotated[Path, typer.Option(help="Artifact folder.")] =
            Path("artifacts"), set_: Sets = None,
            resume: Annotated[Path | None, typer.Option(
                help="Artifact of an interrupted run of the same config: re-run only its "
                     "missing or failed cases.")] = None,
            allow_mixed: Annotated[bool, typer.Option(
                help="Resume even at another commit or with uncommitted changes (the "
                     "report shows each case's commit).")] = False,
            engine_repo: Annotated[Path | None, typer.Option(
                help="Another git checkout to record in the provenance.")] = None,
            coordinator: Annotated[str | None, typer.Option(
                help="host:port of process 0, for a multi-process run (else "
                     "JAX_COORDINATOR_ADDRESS, or MIBENCH_DISTRIBUTED=auto).")] = None,
            num_processes: Annotated[int | None, typer.Option(
                help="Processes in the multi-process run.")] = None,
            process_id: Annotated[int | None, typer.Option(
                help="This process's index; process 0 writes the artifact.")] = None,
            progress: Annotated[str, typer.Option(
                help="Progress on stderr: auto (a bar on a terminal, else lines), bar, "
                     "lines (one per case: CI logs) or none.")] = "auto",
            case: Annotated[str | None, typer.Option(
                help="Run only the cases whose id matches this glob (fnmatch), e.g. "
                     "'jax/packed/*'.")] = None):
    """Run every case of CONFIG, write one JSON artifact (exit 3: a case or parity failed)."""
    from mibench.harness.commands import run_config

    try:
        code = run_config(config, out, set_ or [], resume, engine_repo, sys.argv,
                          (coordinator, num_processes, process_id), allow_mixed,
                          progress, case)
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
    query_ids: Annotated[str | None, typer.Option(help="Query token ids: 1,2,3.")] = None,
    query_text: Annotated[str | None, typer.Option(
        help="Query text (the model's tokenizer).")] = None,
    item_ids: Annotated[list[str] | None, typer.Option(
        help="One item's token ids: 4,5 (repeat per item).")] = None,
    item_text: Annotated[list[str] | None, typer.Option(
        help="One item's text (repeat per item; not mixed with --item-ids).")] = None,
    request: Annotated[Path | None, typer.Option(
        help='JSON file {"query": ..., "items": ...}: query a list of token ids or a string, '
             'items a list of id lists or a list of strings.')] = None,
    labels: Annotated[str, typer.Option(help="Label token ids, e.g. 198,9834.")] = "198",
    model: str = "embedded:tiny", engine: str = "jax", mode: str = "single",
    dtype: str = "float32", tp: int = 1,
    delimiter: Annotated[int | None, typer.Option(help="Delimiter token id.")] = None,
    semantics: Annotated[str | None, typer.Option(
        help="delimited (items after query + delimiter) or plain (after the query); "
             "default: delimited with --delimiter, else plain.")] = None,
    softmax: Annotated[bool, typer.Option(help="Softmax over the labels only.")] = False,
    option: Annotated[list[str] | None, typer.Option(
        help="Mode option key=value, e.g. mask=segment (repeat).")] = None,
):
    """Score one request; JSON scores on stdout."""
    from mibench.harness.commands import score_request

    result = score_request(query_ids=query_ids, query_text=query_text, item_ids=item_ids,
                           item_text=item_text, request=request, labels=labels,
                           model=model, engine=engine, mode=mode, dtype=dtype, tp=tp,
                           delimiter=delimiter, softmax=softmax, options=option or [],
                           semantics=semantics)
    print(json.dumps(result))


@app.command()
@guarded
def serve(
    model: Annotated[str, typer.Option(help="Model: a checkpoint folder or "
                                            "embedded:<preset>; also the served name.")],
    mode: Annotated[str, typer.Option(help="The jax engine's mode.")] = "single",
    delimiter: Annotated[int | None, typer.Option(help="Delimiter token id.")] = None,
    semantics: Annotated[str | None, typer.Option(
        help="delimited or plain; default: delimited with --delimiter, else plain.")] = None,
    dtype: str = "float32", tp: int = 1,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: a free one).")] = 8000,
    option: Annotated[list[str] | None, typer.Option(
        help="Mode option key=value, e.g. mask=segment (repeat).")] = None,
    max_items: Annotated[int, typer.Option(help="Items per request, at most (413 past "
                                                "it).")] = ServeLimits.max_items,
    max_tokens: Annotated[int, typer.Option(help="Tokens a request runs through the model "
                                                 "(usage.prompt_tokens), at most.")] =
        ServeLimits.max_tokens,
    max_request_memory: Annotated[str, typer.Option(
        help="Estimated memory of one request, at most (validate's estimator, device "
             "working set included), e.g. 4GiB; auto: 8GiB or a third of this machine's "
             "memory, whichever is less.")] = "auto",
    max_queue: Annotated[int, typer.Option(help="Requests admitted and not yet answered, "
                                                "at most (503 past it).")] =
        ServeLimits.max_queue,
    max_body: Annotated[str, typer.Option(help="Request body, at most (413 from "
                                               "Content-Length or while it arrives).")] =
        f"{ServeLimits.max_body // 1024**2}MiB",
    max_connections: Annotated[int, typer.Option(help="Open connections, at most (the next "
                                                      "is answered 503 and closed).")] =
        ServeLimits.max_connections,
    header_timeout: Annotated[float, typer.Option(help="Seconds for a request's headers to "
                                                       "arrive (408 past it).")] =
        ServeLimits.header_timeout,
    body_timeout: Annotated[float, typer.Option(help="Seconds for a request's body to "
                                                     "arrive (408 past it).")] =
        ServeLimits.body_timeout,
    keep_alive: Annotated[float, typer.Option(help="Seconds an idle keep-alive connection "
                                                   "is kept.")] = ServeLimits.keep_alive,
    shutdown_timeout: Annotated[float, typer.Option(
        help="Seconds the requests in flight get after SIGTERM/SIGINT; the process is gone "
             "5 s after that whatever clients do.")] = ServeLimits.shutdown_timeout,
):
    """The JAX engine behind an SGLang-compatible POST /v1/score (GET /health, GET
    /v1/models) until Ctrl-C or SIGTERM, within the limits a deployment sets."""
    from mibench.harness.commands import _options
    from mibench.harness.serve import Settings
    from mibench.harness.serve import serve as serve_forever
    from mibench.harness.serve_limits import parse_size

    memory = None if max_request_memory == "auto" else parse_size(max_request_memory,
                                                                  "--max-request-memory")
    limits = ServeLimits(max_items=max_items, max_tokens=max_tokens, max_request_memory=memory,
                         max_queue=max_queue, max_body=parse_size(max_body, "--max-body"),
                         max_connections=max_connections, header_timeout=header_timeout,
                         body_timeout=body_timeout, keep_alive=keep_alive,
                         shutdown_timeout=shutdown_timeout)
    serve_forever(Settings(model=model, mode=mode, delimiter=delimiter, semantics=semantics,
                           dtype=dtype, tp=tp, options=_options(option or [])),
                  host=host, port=port, limits=limits)


@app.command("compile")
@guarded
def compile_cmd(config: Path,
                target: Annotated[str | None, typer.Option(
                    help="TPU slice to compile for, KIND-CHIPS: v6e-1, v6e-4, v6e-8, v5e-4, "
                         "v5p-4, ... (default: the config's topology.target).")] = None,
                out: Annotated[Path, typer.Option(help="Artifact folder.")] = Path("artifacts"),
                set_: Sets = None):
    """Compile every JAX case of CONFIG for a TPU slice without a TPU (libtpu, abstract
    weights): HBM per chip, FLOPs, host traffic, compile time (exit 3: a case failed)."""
    from mibench.harness.run.compile import compile_config

    raise typer.Exit(compile_config(config, out, set_ or [], target, sys.argv))


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
    from mibench.engines import make_model, model_facts
    from mibench.harness.commands import writable_folder

    model_facts(f"embedded:{preset}")  # an unknown preset, before any folder is made
    print(make_model(preset, writable_folder(out, "--out")))


@model_app.command("verify")
@guarded
def model_verify(path: Annotated[str, typer.Argument(help="A checkpoint folder or "
                                                     "embedded:<preset>.")]):
    """Check a model fully: files against the manifest (sha256), config.json, safetensors
    headers and sizes, tensors against the config. Changes nothing; exit 2 names the file."""
    from mibench.engines import verify_model

    print(verify_model(path))


@app.command()
@guarded
def ab(base_rev: Annotated[str, typer.Argument(help="The baseline revision (any git rev).")],
       new_rev: Annotated[str, typer.Argument(help="The revision to judge.")],
       config: Path,
       rounds: Annotated[int, typer.Option(help="Interleaved rounds (fresh workers per "
                                                 "revision per round); 3 or more.")] = 5,
       case: Annotated[str | None, typer.Option(help="Only cases whose id matches this "
                                                     "glob.")] = None,
       out: Annotated[Path, typer.Option(help="Artifact folder.")] = Path("artifacts"),
       target: Annotated[str | None, typer.Option(
           help="Also compile the JAX cases at both revisions for this TPU slice (v6e-1, "
                "v6e-4, ...; default: the config's topology.target) and gate their "
                "compiled cost.")] = None,
       compile_: Annotated[bool, typer.Option(
           "--compile/--no-compile", help="Compile for the target (when one is known).")]
       = True,
       cost_threshold: Annotated[str, typer.Option(
           help="The growth of a case's compiled peak HBM, bytes accessed or FLOPs that "
                "fails the gate.")] = "5%",
       set_: Sets = None):
    """The engines of two git revisions measured in interleaved rounds on this machine:
    exit 0 no regression, 1 a regression (slower, moved scores, failing, compiled cost
    grown), 2 nothing compared."""
    from mibench.harness.ab.commands import ab_command

    raise typer.Exit(ab_command(base_rev, new_rev, config, rounds=rounds, case_glob=case,
                                out=out, sets=set_ or [], argv=sys.argv,
                                target=target, compile_=compile_,
                                cost_threshold=cost_threshold))


@app.command()
@guarded
def bisect(good_rev: Annotated[str, typer.Argument(help="A revision without the regression.")],
           bad_rev: Annotated[str, typer.Argument(help="A revision with it.")],
           config: Path,
           case: Annotated[str, typer.Option(help="The cases (glob on case ids) that "
                                                  "regressed.")],
           rounds: Annotated[int, typer.Option(help="Rounds of each A/B step.")] = 5,
           set_: Sets = None):
    """The first commit on BAD_REV's first-parent line after GOOD_REV whose A/B run against
    GOOD_REV is a regression; prints each step with its evidence."""
    from mibench.harness.ab.commands import bisect_command

    raise typer.Exit(bisect_command(good_rev, bad_rev, config, case_glob=case, rounds=rounds,
                                    sets=set_ or []))


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
