"""The run plan: what one `mibench run` does, decided once before anything runs and passed
down whole: the config, its cases (all, and those `--case` selected), their engine groups,
and the run's options. `make_plan` builds it (every bad option is a MibenchError here, so
`run` is exit 2 before any worker starts); `runner.run(plan)` carries it out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ..config.cases import CaseSpec
from ..config.matrix import expand, select_cases
from ..config.spec import Config
from .progress import style


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What `mibench run` was asked beside the config (docs/cli.md)."""

    out: Path = Path("artifacts")
    sets: tuple[str, ...] = ()  # the --set overrides the config was loaded with
    resume: Path | None = None  # an artifact of the same config to finish
    allow_mixed: bool = False  # resume at another commit or with uncommitted changes
    engine_repo: Path | None = None  # another checkout recorded in the provenance
    argv: tuple[str, ...] = ()
    progress: str = "auto"  # auto, bar, lines or none (harness/run/progress.py)
    cases: tuple[str, ...] = ()  # --case globs (a union); none: every case
    distributed: tuple = (None, None, None)  # coordinator, num_processes, process_id

    def __post_init__(self):
        for name in ("sets", "argv", "cases"):
            value = getattr(self, name) or ()
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        if isinstance(self.progress, bool):  # the Python API's True / False
            object.__setattr__(self, "progress", "auto" if self.progress else "none")


class GroupKey(NamedTuple):
    """The cases parity compares: one model, dtype and tp (`embedded:tiny float32 tp=1`)."""

    model: str
    dtype: str
    tp: int

    def __str__(self) -> str:
        return f"{self.model} {self.dtype} tp={self.tp}"


def group_of(case: CaseSpec) -> GroupKey:
    return GroupKey(case.model, case.dtype, case.tp)


@dataclasses.dataclass(frozen=True)
class Plan:
    """One run, decided: `all_cases` in the artifact's order, `cases` the selected ones (a
    `--case` run keeps the others' finished records), the options, and how cases are
    measured: in worker processes (`workers`), by engines from `engine_factory` (tests'
    fakes; None: the real engines), by process 0 only writing (`writer`)."""

    config: Config
    options: RunOptions
    all_cases: tuple[CaseSpec, ...]
    cases: tuple[CaseSpec, ...]
    config_path: str | None = None
    workers: bool = True
    writer: bool = True
    engine_factory: Callable | None = None
    peak: object | None = None  # a PeakTable to use (tests, the overhead job)
    # each JAX case in a fresh worker (its own device peak); None: on a GPU or TPU
    fresh_workers: bool | None = None
    # the workers' `mibench.engines` from this checkout of another revision (the harness
    # stays this one: harness/run/bootstrap.py); None: this checkout's
    engine_root: str | None = None
    # told the cases still to run once the artifact (a resume's too) is known good, before
    # the first starts: `mibench run` prints their time here (commands/run.py)
    before_cases: Callable[[list[CaseSpec]], None] | None = None

    @property
    def groups(self) -> dict[GroupKey, list[CaseSpec]]:
        """The selected cases by engine group, in order: parity runs after each group."""
        out: dict[GroupKey, list[CaseSpec]] = {}
        for case in self.cases:
            out.setdefault(group_of(case), []).append(case)
        return out

    def in_processes(self, *, writer: bool, workers: bool) -> Plan:
        """The plan for a (possibly multi-process) run: only process 0 writes; its
        processes score in-process when the mesh spans them."""
        return dataclasses.replace(self, writer=writer, workers=workers and self.workers)


def make_plan(config: Config, options: RunOptions | None = None,
              config_path: str | Path | None = None, *, engine_factory: Callable | None = None,
              peak=None, workers: bool | None = None, fresh_workers: bool | None = None,
              engine_root: str | Path | None = None) -> Plan:
    """The plan of `config` with `options`: the cases expanded (once) and selected, the
    progress style checked. `workers` defaults to on, except with an `engine_factory`
    (in-process fakes; a picklable factory may still ask for workers)."""
    options = options or RunOptions()
    style(options.progress)
    every = tuple(expand(config))
    chosen = tuple(select_cases(list(every), list(options.cases)))
    return Plan(config=config, options=options, all_cases=every, cases=chosen,
                config_path=str(config_path) if config_path is not None else None,
                workers=engine_factory is None if workers is None else workers,
                engine_factory=engine_factory, peak=peak, fresh_workers=fresh_workers,
                engine_root=str(engine_root) if engine_root is not None else None)


def plan_of(config: Config, *, engine_factory: Callable | None = None, peak=None,
            workers: bool | None = None, fresh_workers: bool | None = None,
            engine_root: str | Path | None = None, **options) -> Plan:
    """`make_plan` with the options as keywords (`out=`, `resume=`, `progress=`, `cases=`
    ...): the Python API's and the tests' one-liner."""
    return make_plan(config, RunOptions(**options), engine_factory=engine_factory, peak=peak,
                     workers=workers, fresh_workers=fresh_workers, engine_root=engine_root)
