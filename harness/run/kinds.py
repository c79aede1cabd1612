"""Case kinds: what measuring one case means, by engine (as hyperfine's `Executor`).

A kind owns the spec fields of its cases and writes its own section of the case's record;
the runner and the engine workers never ask which kind a case is, they ask its kind
(`kind_of(case.engine)`):

- `ModelCase` (jax, torch; harness/run/case.py): an engine in this process scores the
  workload; the one timing loop (harness/run/measure.py) times its calls.
- `LoadCase` (http; harness/servers/load_case.py): a load of requests against a server,
  recorded request by request; the server does the work.

Adding a kind: a class with the members of `CaseKind`, and its engines in `KINDS`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..config.cases import CaseSpec
from ..records import CaseRecord
from .case import ModelCase
from .pool import EnginePool


class CaseKind(Protocol):
    """How the cases of some engines are measured."""

    name: str
    fields: frozenset[str]  # the case keys of the config that this kind owns

    def measure(self, case: CaseSpec, pool, peak: Callable[[str], float | None],
                tick: Callable[[str], None], measuring: Callable[[], None]) -> CaseRecord:
        """The case's record (its head from `CaseRecord.started`), its own section filled in; a
        failure makes it `failed` (or `skipped`), never raises."""
        ...

    def after(self, case: CaseSpec, rec: CaseRecord, servers) -> None:
        """What the kind measures once the case is recorded, outside its timed work (a
        load case's cold starts); `servers`: the run's ServerPool."""
        ...


KINDS: dict[str, CaseKind] = {}  # engine -> kind, filled by `kinds()`


def kinds() -> dict[str, CaseKind]:
    """Engine name -> the kind of its cases. Filled on first use: the load case's module
    takes names from `mibench.engines`, which the worker side may not at import (it runs
    older revisions' engines for `mibench ab`: harness/run/bootstrap.py `check`)."""
    if not KINDS:
        from ..servers.load_case import LoadCase

        KINDS.update(jax=ModelCase(), torch=ModelCase(), http=LoadCase())
    return KINDS


def kind_of(engine: str) -> CaseKind:
    """The kind of an engine's cases (an engine the registry lacks: a model case, as an
    older revision's or a test's fake engine is)."""
    return kinds().get(engine) or kinds()["jax"]


def run_case(case: CaseSpec, pool: EnginePool, peak: Callable[[str], float | None],
             tick: Callable[[str], None], measuring: Callable[[], None] = lambda: None
             ) -> CaseRecord:
    """Measure one case in this process (the runner's, or an engine worker's) as its kind
    does; a failure makes it `failed` or `skipped`. `measuring()` is called as the timed
    work starts."""
    return kind_of(case.engine).measure(case, pool, peak, tick, measuring)
