"""The run artifact (schema `mibench.run/4`; run/1, run/2 and run/3 artifacts still read): one
typed record per run, its cases and their measurements, and the parity checks
(docs/artifacts.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import Field

from mibench.errors import MibenchError

from ..util import now
from .base import ErrorInfo, Header, Measured, Record
from .busy import CaseLoad
from .case import CaseHead, RunsRecord
from .io import read_json, schema_file
from .references import ReferenceSet
from .servers import ColdStartRecord, ConcurrencyTrial, SloRecord

# run/2 adds, all optional: the run's invocation, a launched server's record, the parity
# check `concurrency` and what it saw move; run/3 adds each case's `load` (how busy the
# machine was while it was measured), and optionally an http case's capacity under a
# latency budget (`slo`), its cold starts (`cold_start`) and the concurrency check's trials;
# run/4 adds the parity checks `order`, `duplicates`, `degenerate` and `prefix_cache`, the
# status `exempt` (a check that cannot judge a case, saying why), a degenerate check's
# `spread`, `permutations`, `exempt` and a prefix_cache check's `control`; run/1 to run/3
# artifacts read as run/4
SCHEMA = "mibench.run/4"
OLDER = ("mibench.run/1", "mibench.run/2", "mibench.run/3")
KINDS = (*OLDER, SCHEMA)  # every version a reader of run artifacts takes
SCHEMA_FILE = schema_file(SCHEMA)


# the `peak_memory_source` values that are a case's own peak (harness/host/memory.py):
# `compare` and `history` judge only these, and only one kind against the same kind
OWN_MEMORY_SOURCES = ("device", "rss-rise")


class Summary(Record):
    """Statistics of one quantity over the timed runs (see harness.stats)."""

    median: float
    mean: float
    min: float
    max: float
    stdev: float  # sample standard deviation; 0 for a single run
    n: int


class Latency(Record):
    """Latencies (nearest-rank percentiles), milliseconds: of an http case's answered
    requests, or of a case's batches in its synced pass (`Metrics.batch_ms`)."""

    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    n: int


class Metrics(Record):
    """Derived from the timed runs of one case."""

    throughput_items_per_s: Summary | None = None
    latency_per_item_ms: Summary | None = None
    total_s: Summary | None = None  # wall time of one run (all items)
    tokens_per_s: Measured = None  # workload tokens (query once + items) / median time
    useful_flops: Measured = None  # minimal work of one run (harness/records/metrics.py)
    peak_flops: Measured = None  # the peak `mfu` divides by (per chip x tp)
    mfu: Measured = None  # useful_flops / (median time x peak_flops)
    # the case's own peak (harness/host/memory.py): on a GPU or TPU the device's peak bytes
    # in use, per chip; on a CPU the rise of the resident set during the case
    peak_memory_bytes: int | None = None
    # "device": the case's own device peak (a fresh worker, or the case raised the peak);
    # "device-bound": an upper bound (an earlier case of the process peaked higher: JAX's
    # peak cannot be reset); "rss-rise": the resident set's rise during the case (CPU);
    # "rss": the process's resident set peak during the case (artifacts before the rise)
    peak_memory_source: str | None = None
    score_digest: str | None = None  # sha256 of the first call's scores (records/metrics.py)
    # the largest rise of the resident set during one timed call, above its level just
    # before the call (what the call itself allocates on the host)
    peak_rss_rise_bytes: int | None = None
    timed_compiles: int | None = None  # XLA compilations during the timed runs (0 expected)
    first_call_compiles: int | None = None  # XLA compilations during the first call
    warmup_compiles: int | None = None  # XLA compilations during the warmup runs
    # `batch_s` (the case's separate synced pass over its batches) in milliseconds
    batch_ms: Latency | None = None


class HttpRequest(Record):
    """One measured request of an http case, in send order."""

    sent_s: float  # when it was sent, seconds after the load started
    latency_s: float  # from sending it to the whole answer (or the failure)
    # the HTTP status, or when no answer came: refused, timeout, connection; invalid: a 200
    # whose body is not the request's scores
    status: int | str
    items: int
    lag_s: float | None = None  # open loop: how long after its Poisson arrival it was sent
    error: str | None = None  # a failure's answer or reason, truncated to 500 characters


class HttpMetrics(Record):
    """What an `engine: http` case measured: the load it sent and what came back."""

    load: Literal["closed", "open"]  # clients in flight, or Poisson arrivals at `rate`
    sent: int  # measured requests sent (warmup excluded)
    ok: int  # answered 200 with scores of the right shape
    duration_s: Measured = None  # first send to last answer
    requests_per_s: Measured = None  # ok requests per second over duration_s
    items_per_s: Measured = None  # items of ok requests per second
    latency: Latency | None = None  # over the ok requests
    errors: dict[str, int] = {}  # failed requests by status
    error_rate: float  # failed / sent
    first_error: str | None = None  # the first failure: `status: answer or reason`
    warmup_errors: dict[str, int] = {}  # failed warmup requests by status
    requests: list[HttpRequest] = []


class ServerInfo(Record):
    """A server mibench launched for a case (harness/under_test/launch.py): how it was started,
    what it says it is, and where its log is."""

    name: str | None = None  # launch.name
    command: list[str]  # the exact command, placeholders filled
    args: dict = {}  # its server_args (one matrix combination)
    env: dict[str, str] = {}  # the variables the launch set
    startup_s: float  # from start to its ready probe's 200
    log: str  # the server's output, beside the artifact
    reported: dict = {}  # what it says of itself (GET /get_server_info: version, settings)
    package: str | None = None  # launch.package, and its version in the server's interpreter
    package_version: str | None = None
    source: dict | None = None  # git path, commit and dirty flag of launch.source

    @classmethod
    def of(cls, launch, started, **found) -> ServerInfo:
        """The record of a server started from `launch` (config/server.py ServerLaunch), as
        `started` says (under_test/launch.py Started), with what was `found` of it: its log,
        reported info, package version and source."""
        return cls(name=launch.name, command=started.command, args=dict(launch.args),
                   env=started.env, startup_s=started.startup_s, package=launch.package,
                   **found)


class CaseRecord(CaseHead):
    """One expanded case and everything measured for it."""

    runs: RunsRecord
    status: Literal["ok", "failed", "skipped"]
    error: ErrorInfo | None = None
    started_at: str
    # the harness checkout's commit and dirty flag when the case was measured (a resumed
    # run may mix commits only with --allow-mixed)
    commit: str | None = None
    dirty: bool | None = None
    compile_s: float | None = None  # the first call: compilation plus one run
    warmup_s: list[float] = []
    timed_s: list[float] = []  # every timed run, in order
    # after the timed runs, one more pass with a sync point after every batch of the mode
    # (prefill_extend's extend batches, request by request): each batch's wall seconds, so a
    # tail pause of one batch is a number; null where the mode runs no batches
    batch_s: list[float] | None = None
    # the first call's scores: per request, one row per item, one column per label
    scores: list[list[list[float]]] | None = None
    # with runs.processes > 1: each worker process's timed runs (timed_s pools them)
    process_timed_s: list[list[float]] = []
    metrics: Metrics = Metrics()
    http: HttpMetrics | None = None  # an `engine: http` case's load and latencies
    server: ServerInfo | None = None  # the server mibench launched for an http case
    load: CaseLoad | None = None  # how busy the machine was (None: not recorded, before run/3)
    # an http case with `slo:`: its capacity search (records/servers.py)
    slo: SloRecord | None = None
    # an http case with `cold_start:`: its fresh launches
    cold_start: ColdStartRecord | None = None

    @classmethod
    def started(cls, case) -> CaseRecord:
        """A case's record as it starts: its head (`head_of`), its runs, `ok`, now."""
        return cls(**cls.head_of(case), runs=case.runs.model_copy(), status="ok",
                   started_at=now())

CHECKS = ("isolation", "modes", "engines", "topologies", "speedup", "concurrency", "order",
          "duplicates", "degenerate", "prefix_cache")
# a check's statuses that do not fail a run: `exempt` is a check that cannot judge the case
# (a single label under softmax, items that are all the same) and says why in `exempt`
PASSING = ("passed", "exempt")


class PrefixCacheControl(Record):
    """The control of a `prefix_cache` check: the same server launched with its cache off
    (`server_args` over the case's), cold against warm the same way, trial for trial."""

    server_args: dict
    trials: list[ConcurrencyTrial] = []
    fails: int | None = None
    fail_rate: Measured = None
    fail_low: Measured = None
    fail_high: Measured = None
    max_log_diff: Measured = None
    # the largest |d ln score| between the cache-on and the cache-off launch's first answers
    # of each trial (recorded, not judged): what the cache changes before anything is warm
    on_vs_off_max_log_diff: Measured = None


class ParityCheck(Record):
    """One comparison: `case_id`'s scores against `against`'s on the parity workload; for
    `speedup`, `case_id`'s median items/s over `against`'s, measured by the cases; for
    `degenerate` (variant `scores`), the case's own scores against themselves."""

    check: Literal[CHECKS]
    # isolation: same_length / changed_length; duplicates: twin / alone; degenerate:
    # scores (the case's own scores) / query (the parity workload with another query)
    variant: str | None = None
    case_id: str
    against: str
    # max |ln a - ln b|: what every score check judges against `tolerance`
    max_log_diff: Measured = None
    max_abs_diff: Measured = None
    mean_abs_diff: Measured = None
    # max |a - b| / |b|; recorded, not gated
    max_rel_diff: Measured = None
    # on max_log_diff; speedup: the minimum ratio (parity.min_speedup)
    tolerance: float
    # on max_abs_diff, judged too where set (bfloat16 with apply_softmax true)
    abs_tolerance: float | None = None
    # speedup: the two cases' median items/s and their ratio (case over against)
    throughput_items_per_s: Measured = None
    against_throughput_items_per_s: Measured = None
    speedup: Measured = None
    status: Literal["passed", "failed", "error", "exempt"]
    error: str | None = None
    exempt: str | None = None  # why the check could not judge the case (status exempt)
    # order: how many seeded permutations of each request's items were scored
    permutations: int | None = None
    # degenerate, scores: the smallest spread (max - min of a label's log scores) over the
    # requests' items with distinct tokens; at or below `tolerance` the scores are all one
    spread: Measured = None
    # prefix_cache: the same check on the same server with its cache off
    control: PrefixCacheControl | None = None
    # concurrency: the requests' items whose scores moved under load, largest first
    moved: list[str] = []
    # concurrency (prefix_cache: cold against warm) with trials: each trial (a fresh
    # launch), the fails out of them, the observed fail rate with its 95% interval
    # (`interval`: its method) and the bound
    trials: list[ConcurrencyTrial] = []
    fails: int | None = None
    fail_rate: Measured = None
    fail_low: Measured = None
    fail_high: Measured = None
    interval: str | None = None
    max_fail_rate: Measured = None

    @property
    def passing(self) -> bool:
        """Whether the check does not fail the run (passed, or exempt saying why)."""
        return self.status in PASSING


class ParityRecord(Record):
    reference: dict  # {engine, mode, dtype}
    workload: dict  # the parity workload (a small sub-workload when the main one is big)
    checks: list[ParityCheck] = []
    passed: bool


class RunRecord(Header):
    """A whole run: written after every case, so a partial one has `finished_at` null."""

    schema_: Literal["mibench.run/4"] = Field(default=SCHEMA, alias="schema")
    resumed_at: list[str] = []
    cases: list[CaseRecord] = []
    parity: ParityRecord | None = None
    # the config's reference figures (`references:`), shown beside the run by `report`
    references: ReferenceSet | None = None


def read_artifact(path: str | Path) -> RunRecord:
    """Read and validate a run artifact; every unreadable input is one MibenchError."""
    record = read_json(path, RunRecord, SCHEMA, f"; this mibench reads {SCHEMA} and "
                       f"{', '.join(OLDER)} artifacts (re-run the config with this version)",
                       older=OLDER)
    problem = _measurement_problem(record)
    if problem:
        raise MibenchError(f"invalid {SCHEMA} artifact at {problem}", field=str(path))
    return record


def _measurement_problem(record: RunRecord) -> str | None:
    """`where: why` of the first measurement no run can produce (a throughput of 0 or a
    negative time: reports divide by them), or None."""
    for i, case in enumerate(record.cases):
        for name in ("compile_s", "warmup_s", "timed_s"):
            values = getattr(case, name)
            for j, v in enumerate(values if isinstance(values, list) else [values]):
                if v is not None and not (math.isfinite(v) and v >= 0):
                    at = f"{name}.{j}" if isinstance(values, list) else name
                    return f"cases.{i}.{at}: {v!r} is not a time (a finite number >= 0)"
        for name in ("throughput_items_per_s", "latency_per_item_ms", "total_s"):
            summary = getattr(case.metrics, name)
            if summary is None:
                continue
            for key in ("median", "mean", "min", "max"):
                v = getattr(summary, key)
                if not (math.isfinite(v) and v > 0):
                    return (f"cases.{i}.metrics.{name}.{key}: {v!r} is not a measurement "
                            "(a finite number > 0)")
    return None


