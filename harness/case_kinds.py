"""Case kinds: what measuring one case means, by engine (as hyperfine's `Executor`), and the
hooks through which the rest of the harness asks a case what only its kind knows.

A kind owns the spec fields of its cases, writes its own section of the case's record, and
answers the hooks below; the runner, the config checks, parity, `ab` and the nightly never
ask which engine a case has, they ask its kind (`kind_of(case.engine)`):

- `ModelCase` (jax, torch; harness/run/case.py): an engine in this process scores the
  workload; the one timing loop (harness/run/measure.py) times its calls. `CaseKind`'s
  defaults are its answers.
- `RequestsCase` (http; harness/under_test/requests_case.py): requests sent to a server
  under test, recorded request by request; the server does the work. The wing
  harness/under_test/ fills every hook for it, and brings the developer jobs that measure
  servers (`jobs`, reached through `kind_job`).

`CASE_KINDS` (a mibench/registry.py `Registry`) is filled here and only here, by lazy
"module:attribute" entries: this module is the one registration point that plugs the
servers-under-test wing into the core (tests/test_layering.py keeps it the only one).

Adding a kind: a `CaseKind` subclass overriding the hooks it answers differently, and its
engines in `_register`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from mibench.registry import Registry

# the hooks take the core's types (a case: config/cases.py `CaseSpec`; a record:
# records/ `CaseRecord`; a problem: config/yamlsource.py `Problem`), named in words only:
# this module sits below them all, so every layer can ask a case's kind


class CaseKind:
    """How the cases of some engines are measured, and what the harness asks of them. The
    defaults answer for an engine in this process (a model case)."""

    name: str = "model"
    fields: frozenset[str] = frozenset()  # the case keys of the config that this kind owns
    # ab: both sides' calls alternate in lockstep within a round (False: each side's case
    # runs in turn, as a server's load does)
    interleaved: bool = True
    # why ab's vouching for a 2x improvement runs no modes/engines parity for its cases
    # (quoted in the case's `why`; "": it does)
    no_engine_parity: str = ""
    # the nightly's interval is over its timed runs (False: one load is one timed run)
    timed_interval: bool = True
    runs_idle: frozenset[str] = frozenset()  # `runs.*` keys that do nothing on its cases
    runs_idle_why: str = ""  # why they do nothing (`mibench validate` says it)
    parity_checks: frozenset[str] = frozenset()  # parity checks that only its cases feed
    sharded: bool = True  # topology.tp shards its engine
    results_note: str = ""  # what the report's results table says of its rows
    # every timed run scores all the workload's items (False: only answered requests count,
    # so its items/s is not num_items / time and a record's summaries are not recomputed so)
    items_every_run: bool = True
    # `mibench ab --server-repo` / `--base-python`: how two versions of the servers its
    # cases launch are judged (`revision_side`, `python_side`, `run_server_ab`); None: its
    # engine is mibench's own, judged by `ab` at two revisions
    server_ab = None
    # its part of the developer jobs (`mibench job NAME`, harness/commands/job.py asks
    # `kind_job`): NAME -> a plain function, a whole job or the rows it adds to a job of
    # harness/jobs/ (that job's `more`); a Registry, for the jobs that measure its servers
    jobs: Mapping[str, Callable] = MappingProxyType({})

    def measure(self, case, pool, peak: Callable[[str], float | None],
                tick: Callable[[str], None], measuring: Callable[[], None]):
        """The case's record (its head from `CaseRecord.started`), its own section filled in; a
        failure makes it `failed` (or `skipped`), never raises."""
        raise NotImplementedError

    def after(self, case, rec, servers) -> None:
        """What the kind measures once the case is recorded, outside its timed work (a
        requests case's cold starts); `servers`: the run's server pool (`open_servers`)."""

    def open_servers(self, folder, artifact_dir):
        """The run's pool of the servers its cases launch (None: its cases launch none);
        their logs go in `folder`, named relative to `artifact_dir` (`open_servers`)."""
        return None

    def problems(self, i: int, case) -> list:
        """The config's problems with this kind's keys on case `i` (`case`: the config's
        `Case`, before expansion), whatever the case's kind: asked of every kind."""
        return []

    def host_problems(self, case) -> list:
        """What this machine lacks to run the expanded case (a launched server's folder)."""
        return []

    def client_memory(self, case) -> dict[str, float]:
        """Host memory this process holds for the case beyond its requests' (bytes, by
        part), counted in `mibench validate`'s estimate."""
        return {}

    def plans(self, config, i: int, case, spec) -> list[tuple[object, tuple[str, ...]]]:
        """(the case's kind section, case-id parts) per value of its own axes (config/
        matrix.py); a model case has no section: one (None, ())."""
        return [(None, ())]

    def runs(self, plan, section):
        """The expanded case's `runs` (records/case.py `RunsRecord`) from the config's `plan`
        and its kind `section` (`plans`)."""
        return plan

    def flops_unknown(self, case) -> str | None:
        """Why a pass's FLOPs cannot be counted for the case (None: they can)."""
        return None

    def tolerance(self, case, apply_softmax: bool) -> float | None:
        """The log tolerance of the case's score checks, when the kind sets it (None: the
        mode's batch invariance and dtype decide)."""
        return None

    def server(self, case):
        """The server its engine key names (config/keys.py `ServerRef`; None: none)."""
        return None

    def options_text(self, case) -> str | None:
        """The report's options cell of the case when its kind says it (None: the mode's
        options with their defaults)."""
        return None

    def label_parts(self, case) -> list[str]:
        """Case-id parts that tell this case's engine apart from others of its key (a
        launched server's name and arguments)."""
        return []

    def bound(self, case, key):
        """The case as an engine worker built for `key` runs it (a launched server's case at
        the address the worker's key was bound to)."""
        return case

    def parity(self, g, cases: list, checks: list[str]) -> list:
        """The ParityChecks of `checks` that only this kind's cases feed (`parity_checks`)."""
        return []

    def report_tables(self, rows, records) -> dict:
        """The report's sections of its cases (name -> `report.fmt.Table` or None), from the
        report's rows (`report.tables.rows_of`) and records."""
        return {}

    def report_charts(self, rows, stem, subject: str) -> dict:
        """The report's plots of its cases (name -> the Path written, or None), each at
        `{stem}-{name}.png`."""
        return {}

    def measured_nothing(self, rec) -> str | None:
        """Why an ok record of this kind measured nothing (None: it measured something)."""
        return None


def _register(kinds: Registry[CaseKind]) -> None:
    """The engines' kinds: the one place the wing of servers under test is plugged in."""
    kinds.add("jax", "mibench.harness.run.case:MODEL_CASE")
    kinds.add("torch", "mibench.harness.run.case:MODEL_CASE")
    kinds.add("http", "mibench.harness.under_test.requests_case:REQUESTS_CASE")


# engine -> kind; filled on first use, lazily: the requests case's module takes names from
# `mibench.engines`, which the worker side may not at import (it runs older revisions'
# engines for `mibench ab`: harness/run/bootstrap.py `check`)
CASE_KINDS: Registry[CaseKind] = Registry("case kind", field="engine", fill=_register)


def all_kinds() -> list[CaseKind]:
    """Every kind once, in the registry's order."""
    return list(dict.fromkeys(CASE_KINDS[name] for name in CASE_KINDS))


def open_servers(folder, artifact_dir=None):
    """The run's pool of launched servers (the first kind that keeps one: `bind`,
    `info`, `release`, `close`); every run has one, used or not."""
    for kind in all_kinds():
        pool = kind.open_servers(folder, artifact_dir)
        if pool is not None:
            return pool
    raise AssertionError("no case kind keeps a server pool")


def server_ab():
    """What judges two versions of a server under test (the kind that has a `server_ab`)."""
    return next(kind.server_ab for kind in all_kinds() if kind.server_ab)


def kind_job(name: str) -> Callable:
    """The plain function a kind brings to `mibench job NAME` (`CaseKind.jobs`): how the jobs
    that measure servers under test are reached from harness/commands/job.py."""
    for kind in all_kinds():
        if name in kind.jobs:
            return kind.jobs[name]
    raise AssertionError(f"no case kind brings the job {name!r}")


def kind_of(engine: str) -> CaseKind:
    """The kind of an engine's cases (an engine the registry lacks: a model case, as an
    older revision's or a test's fake engine is)."""
    return CASE_KINDS.get(engine) or CASE_KINDS["jax"]
