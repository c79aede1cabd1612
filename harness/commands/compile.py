"""`mibench compile CONFIG --target v6e-4`: every JAX case of CONFIG compiled for a TPU
slice by the real TPU compiler (libtpu), without a TPU and without weights
(harness/run/compile.py); exit 0 every case ok or skipped, 3 a case failed, 2 bad input,
4 the artifact could not be written mid-run (the message names it and what it holds)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from mibench.harness.commands.common import Sets, guarded, writable_folder


@guarded
def compile_(config: Path,
             target: Annotated[str | None, typer.Option(
                 help="TPU slice to compile for, KIND-CHIPS: v6e-1, v6e-4, v6e-8, v5e-4, "
                      "v5p-4, ... (default: the config's topology.target).")] = None,
             out: Annotated[Path, typer.Option(help="Artifact folder.")] = Path("artifacts"),
             set_: Sets = None):
    """Compile every JAX case of CONFIG for a TPU slice without a TPU (libtpu, abstract
    weights): HBM per chip, FLOPs, host traffic, compile time (exit 3: a case failed)."""
    raise typer.Exit(compile_config(config, out, set_ or [], target, sys.argv))


def compile_config(config_path: Path, out: Path, sets: list[str], target_flag: str | None,
                   argv: list[str]) -> int:
    """Load, compile every case, write the artifact, print a table; the exit code."""
    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand
    from mibench.harness.records import Checkpoints, locked
    from mibench.harness.run import libtpu
    from mibench.harness.run.compile import (
        compile_cases,
        header,
        new_record,
        note_device_kind,
        resolve_target,
        row,
    )
    from mibench.harness.util import now

    config = load_config(config_path, sets)
    target = resolve_target(target_flag, config)
    cases = expand(config)
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

    with locked(path):
        saves.save(record, 0)
        compile_cases(cases, target, lib, on_case=done)
        record.finished_at = now()
        saves.save(record, len(record.cases))
    print(f"artifact: {path}")
    return 3 if any(c.status == "failed" for c in record.cases) else 0
