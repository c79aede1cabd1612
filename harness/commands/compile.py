"""`mibench compile CONFIG... --target v6e-4`: every (selected) JAX case of each CONFIG
compiled for a TPU slice by the real TPU compiler (libtpu), without a TPU and without
weights (harness/compile/runner.py), one artifact per config; exit 0 every case ok or skipped,
3 a case failed, 2 bad input, 4 the artifact could not be written mid-run (the message
names it and what it holds). Each case's start is a line on stderr (`[i/N] compiling CASE
elapsed ... ETA ...`), and a long one says it still compiles every 30 s. Fast by default:
`--unrolled` also compiles every program with its scans unrolled for the FLOPs ratio,
which takes many times as long."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import CaseGlobs, Sets, folder_out, guarded, writable_folder


@guarded
def compile_(configs: Annotated[list[Path], typer.Argument(help="Configs to compile.")],
             target: Annotated[str | None, typer.Option(
                 help="TPU slice to compile for, KIND-CHIPS: v6e-1, v6e-4, v6e-8, v5e-4, "
                      "v5p-4, ... (default: each config's topology.target).")] = None,
             out: Annotated[Path, typer.Option(help="Artifact folder.", callback=folder_out)]
             = Path("artifacts"),
             set_: Sets = None, case: CaseGlobs = None,
             unrolled: Annotated[bool, typer.Option(
                 "--unrolled", help="Also compile every program with its scans unrolled, "
                                    "for the FLOPs ratio against the useful FLOPs (slow: "
                                    "many times the compile time).")] = False):
    """Compile every JAX case of each CONFIG for a TPU slice without a TPU (libtpu, abstract
    weights): HBM per chip, FLOPs, host traffic, compile time (exit 3: a case failed)."""
    raise typer.Exit(compile_configs(configs, out, set_ or [], target, sys.argv, case or [],
                                     unrolled))


def compile_configs(paths: list[Path], out: Path, sets: list[str], target_flag: str | None,
                    argv: list[str], globs: list[str], unrolled: bool = False) -> int:
    """Every config loaded, its target resolved and its cases selected before anything
    compiles (a bad config, a missing target or a `--case` glob that matches no case of
    any config is exit 2 first); then each compiled in turn. The exit code: 3 if a case of
    any config failed, else 0."""
    import fnmatch

    code = 0
    for config, cases in plan_compile(paths, sets, target_flag, globs):
        chosen = [c for c in cases
                  if not globs or any(fnmatch.fnmatchcase(c.case_id, g) for g in globs)]
        if not chosen:
            print(f"{config.name}: no case selected by --case", flush=True)
            continue
        code = max(code, compile_config(config, chosen, out, target_flag, argv, unrolled))
    return code


def plan_compile(paths: list[Path], sets: list[str], target_flag: str | None,
                 globs: list[str]) -> list[tuple]:
    """(config, its cases) of each config, loaded and its target resolved, and the `--case`
    globs checked against them: every input error, nothing compiled (a dry run)."""
    from ..compile.runner import resolve_target
    from ..config import load_config
    from ..config.matrix import expand, select_cases

    loaded = []
    for path in paths:
        config = load_config(path, sets)
        resolve_target(target_flag, config)
        loaded.append((config, expand(config)))
    select_cases([c for _, cases in loaded for c in cases], globs, "these configs")
    return loaded


def compile_config(config, cases: list, out: Path, target_flag: str | None,
                   argv: list[str], unrolled: bool = False) -> int:
    """Compile the config's `cases`, write the artifact, print a table; the exit code."""
    from ..compile import libtpu
    from ..compile.runner import (
        compile_cases,
        header,
        new_record,
        note_device_kind,
        resolve_target,
        row,
    )
    from ..records import Checkpoints, locked
    from ..run.heartbeat import CaseCounter
    from ..util import now

    target = resolve_target(target_flag, config)
    writable_folder(out, "--out")
    jax_cases = [c for c in cases if c.engine == "jax"]
    lib = libtpu.find() if jax_cases else None
    record = new_record(config, target, lib, argv)
    path = Path(out) / f"{record.run_id}.json"
    again = shlex.join(["mibench", *map(str, argv[1:])]) if argv else "the same command"
    saves = Checkpoints(path, len(cases), "case(s)", "free space (or raise the limit) and "
                        f"compile again: {again}")
    print(header(record), flush=True)

    def done(rec) -> None:
        record.cases.append(rec)
        note_device_kind(record, rec)
        saves.save(record, len(record.cases))
        print(row(rec), flush=True)

    counter = CaseCounter(len(cases), "compiling")  # stderr: the table is stdout's
    try:
        with locked(path):
            saves.save(record, 0)
            compile_cases(cases, target, lib, on_case=done, unrolled=unrolled,
                          on_start=lambda i, case: counter.start(i, case.case_id))
            record.finished_at = now()
            saves.save(record, len(record.cases))
    finally:
        counter.close()
    print(f"artifact: {path}")
    return 3 if any(c.status == "failed" for c in record.cases) else 0
