"""`mibench run CONFIG`: every (selected) case, one JSON artifact; exit 0 every case ok, 3
a case or a parity check failed (still recorded), 2 bad input, 4 the environment failed
mid-run (the artifact could not be written: the message names it, what it holds and the
`--resume` command), 130 interrupted."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import EnvironmentFailed, MibenchError

from ..run.progress import STYLES
from .common import (
    CaseGlobs,
    Sets,
    choices,
    folder_out,
    guarded,
    writable_folder,
)


@guarded
def run(config: Path, out: Annotated[Path, typer.Option(help="Artifact folder.",
                                                         callback=folder_out)] =
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
        progress: Annotated[str, typer.Option(metavar=choices(STYLES),
            help="Progress on stderr: auto (a bar on a terminal, else lines), bar, "
                 "lines (one per case: CI logs) or none.")] = "auto",
        case: CaseGlobs = None):
    """Run every case of CONFIG, write one JSON artifact (exit 3: a case or parity failed)."""
    from ..run.plan import RunOptions

    options = RunOptions(out=out, sets=set_ or [], resume=resume, allow_mixed=allow_mixed,
                         engine_repo=engine_repo, argv=sys.argv, progress=progress,
                         cases=case or [],
                         distributed=(coordinator, num_processes, process_id))
    try:
        code = run_config(config, options)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    raise typer.Exit(code)


def run_config(config_path: Path, options) -> int:
    """Load, plan, run, print a summary; returns the exit code (0 ok, 3 failures).
    `options`: the command's RunOptions (harness/run/plan.py)."""
    from mibench.engines import init_distributed, is_writer

    from ..config import load_config
    from ..config.idle import notes
    from ..config.matrix import expand
    from ..report.console import render_summary, untested_line
    from ..run.plan import make_plan
    from ..run.progress import announce
    from ..run.runner import RunInterrupted, artifact_path, exit_code, run

    config = load_config(config_path, options.sets)
    plan = make_plan(config, options, config_path)  # a bad --progress or --case: exit 2 now
    for line in notes(config, expand(config)):  # keys that would do nothing (validate too)
        print(line, file=sys.stderr)
    check_distributed(*options.distributed)
    try:
        multi_process = init_distributed(*options.distributed)
    except (RuntimeError, ValueError) as e:  # jax could not join the run
        if isinstance(e, MibenchError):
            raise
        raise MibenchError(f"cannot join the multi-process run: {e}",
                           field="--coordinator") from None
    writer = is_writer()
    resume = options.resume
    folder = Path(resume).parent if resume else Path(options.out)
    if writer and (resume is None or Path(resume).is_file()):  # else: "no such artifact"
        writable_folder(folder, "--resume" if resume else "--out")
    plan = dataclasses.replace(plan.in_processes(writer=writer, workers=not multi_process),
                               before_cases=lambda todo: print_estimate(
                                   config, todo, config_path, options.progress))
    if writer:
        announce(options.progress, f"{config.name}: {len(plan.cases)} case(s); probing the "
                 "devices, then each engine group's worker loads its model and compiles")
    try:  # a multi-process run's processes score in-process: the mesh spans them
        record = run(plan)
    except RunInterrupted as e:  # what the artifact holds, and how to resume it
        print(e, file=sys.stderr, flush=True)
        raise
    except OSError as e:  # the folder went away or became unwritable mid-run (a server's
        if not _under(e.filename, folder):  # log beside the artifact; the artifact itself
            raise  # is the runner's EnvironmentFailed)
        raise EnvironmentFailed(f"cannot write under {folder} ({e.strerror or e}); the run "
                                "stopped, the cases finished before are in the last artifact "
                                "written", field="--resume" if resume else "--out") from None
    path = Path(resume) if resume else artifact_path(record, options.out)
    if writer:
        print(render_summary(record, path))
        note = untested_line(plan.cases)
        if note:
            print(note)
    return exit_code(record)


def print_estimate(config, cases: list, config_path: Path, progress: str) -> None:
    """Before the first case (every input checked, a resume's artifact too), on stderr: the
    warning when the config is made for another machine (always), then each case still to
    run with its time here at the least, and the total (unless --progress none);
    harness/run/estimate.py."""
    from ..run.estimate import cell, of_config
    from ..run.progress import style

    found, summary, warning = of_config(config, cases, str(config_path))
    lines = [warning] if warning else []
    if style(progress) != "none":
        lines += [f"time here {cell(e):>11}  {e.case_id}" for e in found] + [summary]
    for line in lines:
        print(line, file=sys.stderr, flush=True)


def _under(name, folder: Path) -> bool:
    if name is None:
        return False
    try:
        return Path(os.fsdecode(name)).resolve().is_relative_to(folder.resolve())
    except (OSError, ValueError, TypeError):
        return False


def check_distributed(coordinator: str | None, num_processes: int | None,
                      process_id: int | None) -> None:
    """--coordinator HOST:PORT with --num-processes N and --process-id I in [0, N), or none
    of them; else a MibenchError naming the flag."""
    if coordinator is None:
        for flag, value in (("--num-processes", num_processes), ("--process-id", process_id)):
            if value is not None:
                raise MibenchError("goes with --coordinator HOST:PORT", field=flag)
        return
    host, sep, port = coordinator.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:1234
    if (not sep or not host or any(c.isspace() or c in "/@?#" for c in host)
            or not (port.isascii() and port.isdigit() and len(port) <= 5)
            or not 0 < int(port) < 65536):
        raise MibenchError(f"expected HOST:PORT with a port in 1..65535 (e.g. 10.0.0.1:8476), "
                           f"got {coordinator!r}", field="--coordinator")
    if num_processes is None or num_processes < 1:
        raise MibenchError(f"must be a positive integer with --coordinator, got {num_processes}",
                           field="--num-processes")
    if process_id is None or not 0 <= process_id < num_processes:
        raise MibenchError(f"must be in [0, {num_processes}) with --coordinator, got "
                           f"{process_id}", field="--process-id")
