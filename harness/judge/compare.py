"""The regression gate: compare two artifacts case by case (pure: records in, a record out).

**Like with like.** A case is compared only with the same measurement: the same case id
AND the same workload (every workload field: shape, token kind, semantics, labels, softmax,
seed, requests file), model, dtype, topology (tp and mesh) and hardware (device platform,
kind and count; on a CPU also the machine, the core count and the CPU model where both
artifacts record it). Anything else is `not comparable`, shown with the fields that
differ.

**From the raw samples.** Every figure is recomputed from `timed_s` (and
`process_timed_s`); `invalid` names what makes an artifact unusable (no cases, duplicate
case ids, a run time that is not finite and > 0, summaries that disagree with the samples).

**Verdicts** of a case that is ok on both sides (the words: harness/verdicts.py):

- `regression`: the time per item grew by more than `threshold` AND the between-run
  interval of the change excludes 0 (harness.stats.significance) AND neither side was
  measured on a busy machine (harness.judge.busy: other processes held more than
  `busy_level` of the CPU), or the interval's low end is slower than the new side's load
  can explain (harness.judge.busy `beyond_load`: 1.25 / (1 - share));
- `scores moved`: its scores moved beyond the modes tolerance as log scores (float32 1e-5,
  bfloat16 1e-1), a regression whatever the times;
- `improvement`: the time per item fell by more than `threshold`, the interval below 0,
  neither side busy (or faster than the base side's load can explain);
- `unchanged`: the whole interval lies within +-`threshold` (the gate could have seen a
  change of that size, and there is none), neither side busy;
- `inconclusive`: anything else: the interval reaches beyond the threshold (a change
  beyond it that the noise could explain, or one within it that the interval cannot
  vouch for), or a side was measured on a busy machine (the reason names the side and
  the share: `new side: other processes held 65% of the CPU; `mibench ab` decides it`).
  Exit 0, not a regression; the reason says what would decide it;
- `untested`: fewer than `MIN_RUNS` timed runs on a side; fails the gate unless allowed;
- `memory regression`: the case's own peak memory grew by more than `memory_threshold`
  (harness.judge.memory: only peaks of one own kind are compared, else the check says
  why), a regression whatever the times;
- `timed compiles`: XLA compiled during the new side's timed runs
  (harness.judge.compile_counts), a regression of any case that ran ok, compared or not;
- `suspicious improvement`: an improvement of 2x or more (time per item at half the base or
  less) for which the new artifact's `modes`/`engines` parity against the reference did
  not run and pass (harness.judge.suspicious: the nightly's rule too); exit 0, named first.

**One convention** for every change (`mibench compare`, `ab`, `report`, `history`): time
new / base - 1, `+` = slower (`CaseChange.latency_change`, `latency_low`,
`latency_high`), with the per-side figures beside it (`base_ms_per_item`,
`new_ms_per_item`) from the same statistic: the geometric mean of the process medians
(the median of the runs with one process a side), so new / base of the two columns is the
change exactly. The same change as items/s (positive: faster) is `items_per_s_change`,
`items_per_s_low`, `items_per_s_high` (`change`, `low`, `high` before mibench.compare/3).

Also a regression: a case ok in the baseline and failed now, a case ok in the baseline and
missing from a new run that did not finish, a parity check that passed (or did not exist)
and does not pass now. The outcome (`Comparison.outcome`) is `regression` or `untested`
(exit 1), `not compared` when no case was measured ok on both sides as the same
measurement (exit 2), else `pass` (exit 0).
"""

from __future__ import annotations

import dataclasses
import statistics

from ..judge.server_compare import capacity_change, capacity_timing, cold_start_changes
from ..records import CaseRecord, RunRecord
from ..records.summaries import items_of, items_per_s, ms_per_item, process_runs
from ..stats.significance import DEFAULT_ALPHA, NoiseFloor, Test, between_runs, default_floor
from ..verdicts import (
    ADDED,
    COLD_START_REGRESSION,
    FAILED,
    FAILING,
    FIXED,
    IMPROVEMENT,
    INCONCLUSIVE,
    MEMORY_REGRESSION,
    MISSING,
    NOT_COMPARABLE,
    REGRESSION,
    REMOVED,
    SCORES_MOVED,
    SKIPPED,
    STILL_FAILING,
    TIMED_COMPILES,
    UNCHANGED,
    UNTESTED,
)
from .busy import BUSY_LEVEL, beyond_load, busy_reason, share, timeout_busy_reason
from .comparable import differences, label, measurement
from .comparison import CaseChange, Comparison
from .compile_counts import timed_compile_fault
from .environment import compare_parity, environment_warnings
from .memory import DEFAULT_MEMORY_THRESHOLD, memory_check
from .scores import score_check
from .suspicious import flagged, run_vouched

DEFAULT_THRESHOLD = 0.05
MIN_RUNS = 3
DECIDE = "`mibench ab`, more `runs.processes` or `--noise-from` would decide it"


# --- one case ---------------------------------------------------------------------------


def timing_verdict(ratio: float, low: float, high: float, significant: bool,
                   threshold: float, level: str) -> tuple[str, str]:
    """(verdict, reason) of a change of time per item `ratio` (new / base) with its interval
    [`low`, `high`] at `level`: regression / improvement beyond `threshold` and
    significant; unchanged when the whole interval lies within +-threshold; else
    inconclusive, saying what would decide it."""
    change, lo, hi = ratio - 1, low - 1, high - 1
    if significant and change > threshold:
        return REGRESSION, f"slower by more than {threshold:.0%}, beyond the noise"
    if significant and change < -threshold:
        return IMPROVEMENT, f"faster by more than {threshold:.0%}, beyond the noise"
    if -threshold <= lo and hi <= threshold:
        return UNCHANGED, f"the {level} interval lies within +-{threshold:.0%}"
    where = ("beyond the threshold, within the noise" if abs(change) > threshold
             else f"within {threshold:.0%}, but its {level} interval reaches beyond")
    return INCONCLUSIVE, f"{where}; {DECIDE}"


def speed_test(first: CaseRecord, second: CaseRecord, floor: float,
               alpha: float = DEFAULT_ALPHA) -> Test | None:
    """Time per item of `second` against `first` (two cases, e.g. the two fastest of a
    report; ratio > 1: `first` is faster) by the between-run test; None without
    `MIN_RUNS` timed runs and an item count on each side."""
    units = []
    for case in (first, second):
        n = items_of(case)
        if not n or len(case.timed_s) < MIN_RUNS or case.status != "ok":
            return None
        units.append([[t / n for t in p] for p in process_runs(case)])
    return between_runs(units[0], units[1], floor, alpha)


@dataclasses.dataclass(frozen=True)
class Gate:
    """What the gate judges a case by: the timing `threshold`, the interval's `alpha`, the
    noise `floor` (relative), the `memory_threshold` and the `busy_level` of other
    processes' share of the CPU past which a side's timing is no evidence."""

    threshold: float = DEFAULT_THRESHOLD
    alpha: float = DEFAULT_ALPHA
    floor: float = 0.10
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD
    busy_level: float = BUSY_LEVEL


def _timing(base: CaseRecord, new: CaseRecord, gate: Gate) -> dict:
    """Change, interval, test, verdict and reason of two ok cases' times."""
    if len(base.timed_s) < MIN_RUNS or len(new.timed_s) < MIN_RUNS:
        ratio = statistics.median(new.timed_s) / statistics.median(base.timed_s) \
            if base.timed_s and new.timed_s else None
        return dict(items_per_s_change=None if ratio is None else 1 / ratio - 1,
                    latency_change=None if ratio is None else ratio - 1,
                    base_ms_per_item=ms_per_item(base), new_ms_per_item=ms_per_item(new),
                    verdict=UNTESTED,
                    reason=f"{len(base.timed_s)}+{len(new.timed_s)} timed runs: at least "
                           f"{MIN_RUNS} on each side are needed for a timing verdict")
    test = between_runs(process_runs(base), process_runs(new), gate.floor, gate.alpha)
    verdict, why = timing_verdict(test.ratio, test.low, test.high, test.significant,
                                  gate.threshold, f"{1 - gate.alpha:.0%}")
    busy = busy_reason({"base": base.load, "new": new.load}, gate.busy_level)
    loud = beyond_load(test.low, test.high, base.load, new.load) if busy else None
    if busy is not None and (loud is None or verdict not in (REGRESSION, IMPROVEMENT)):
        # no evidence of the code either way: say so, whatever it shows
        verdict, why = INCONCLUSIVE, f"{busy} (it shows {test.ratio - 1:+.1%})"
    elif busy is not None:  # more than the load can explain: evidence on a busy machine too
        why = f"{why}; {loud}"
    n_base, n_new = items_of(base), items_of(new)
    return dict(items_per_s_change=1 / test.ratio - 1, items_per_s_low=1 / test.high - 1,
                items_per_s_high=1 / test.low - 1,
                latency_change=test.ratio - 1, latency_low=test.low - 1,
                latency_high=test.high - 1,
                base_ms_per_item=1e3 * test.base_s / n_base if n_base else None,
                new_ms_per_item=1e3 * test.new_s / n_new if n_new else None,
                test=test, verdict=verdict, reason=why)


def case_change(base_rec: RunRecord, base: CaseRecord, new_rec: RunRecord, new: CaseRecord,
                gate: Gate = Gate()) -> CaseChange:
    """The verdict of one case id present in both artifacts."""
    common = dict(case_id=new.case_id, base_status=base.status, new_status=new.status,
                  base_items_per_s=items_per_s(base), new_items_per_s=items_per_s(new),
                  first_call_compiles=new.metrics.first_call_compiles,
                  timed_compiles=new.metrics.timed_compiles,
                  base_other_load=share(base.load), new_other_load=share(new.load))
    apart = differences(measurement(base_rec, base), measurement(new_rec, new))
    if apart:
        return CaseChange(**common, verdict=NOT_COMPARABLE,
                          reason="not the same measurement: " + "; ".join(apart))
    if base.status == "ok" and new.status == "failed":
        first = new.error.message.splitlines()[0] if new.error and new.error.message else ""
        why = f"newly failed: {new.error.type}: {first}" if new.error else "newly failed"
        busy = timeout_busy_reason(first, new.load, [c.load for c in new_rec.cases if c
                                                     is not new], gate.busy_level)
        if busy is not None:  # a deadline on a busy machine: no evidence of the code
            return CaseChange(**common, verdict=INCONCLUSIVE, reason=f"{why}, on a busy "
                              f"machine: {busy}")
        return CaseChange(**common, verdict=FAILED, regression=True, reason=why)
    if base.status != "ok" and new.status == "ok":
        return CaseChange(**common, verdict=FIXED, reason=f"was {base.status}")
    if base.status == new.status == "failed":
        return CaseChange(**common, verdict=STILL_FAILING, reason="failed in both")
    if base.status != "ok" or new.status != "ok":
        return CaseChange(**common, verdict=SKIPPED,
                          reason=f"{base.status} -> {new.status}, nothing to compare")
    scores = score_check(base, new)
    memory = memory_check(base, new, gate.memory_threshold)
    capacity = capacity_change(base, new, gate, timing_verdict)
    timing = _timing(base, new, gate) if capacity is None else capacity_timing(capacity)
    colds = tuple(cold_start_changes(base, new, gate, timing_verdict))
    if timing["verdict"] not in FAILING and any(c.verdict == REGRESSION for c in colds):
        worst = next(c for c in colds if c.verdict == REGRESSION)
        timing |= dict(verdict=COLD_START_REGRESSION, reason=f"{worst.name} "
                       f"{worst.change:+.1%}: {worst.reason}; {timing['reason']}")
    if scores.moved:
        timing |= dict(verdict=SCORES_MOVED, reason=f"{scores.note}; {timing['reason']}")
    if memory.regression:
        slower = timing["verdict"] in (REGRESSION, SCORES_MOVED)
        timing |= dict(verdict=timing["verdict"] if slower else MEMORY_REGRESSION,
                       reason=f"{memory.note}; {timing['reason']}")
    return CaseChange(**common, **timing, scores=scores, memory=memory, capacity=capacity,
                      cold_start=colds, regression=timing["verdict"] in FAILING)


def compiled_in_timed_runs(change: CaseChange, new: CaseRecord) -> CaseChange:
    """`change` failed for XLA compilations during `new`'s timed runs (whatever its
    timing verdict; a case that is not the same measurement keeps that verdict)."""
    fault = timed_compile_fault(new.metrics) if new.status == "ok" else None
    if fault is None:
        return change
    keep = change.verdict == NOT_COMPARABLE
    return dataclasses.replace(change, verdict=change.verdict if keep else TIMED_COMPILES,
                               regression=True, reason=f"{fault}; {change.reason}")


def compare_cases(base: RunRecord, new: RunRecord, gate: Gate = Gate()) -> list[CaseChange]:
    """Every case id of either artifact, in the new artifact's order, then removed ones."""
    old = {c.case_id: c for c in base.cases}
    out = []
    for case in new.cases:
        if case.case_id in old:
            change = case_change(base, old[case.case_id], new, case, gate)
        else:
            change = CaseChange(case_id=case.case_id, base_status=None,
                                new_status=case.status, verdict=ADDED,
                                new_items_per_s=items_per_s(case),
                                first_call_compiles=case.metrics.first_call_compiles,
                                timed_compiles=case.metrics.timed_compiles,
                                new_other_load=share(case.load),
                                reason="not in the baseline")
        change = flagged(change, run_vouched(new, case.case_id), "latency_change")
        out.append(compiled_in_timed_runs(change, case))
    seen = {c.case_id for c in new.cases}
    partial = new.finished_at is None  # a run that died: its missing cases did not run
    out += [CaseChange(case_id=c.case_id, base_status=c.status, new_status=None,
                       base_items_per_s=items_per_s(c), base_other_load=share(c.load),
                       verdict=MISSING if partial else REMOVED,
                       regression=partial and c.status == "ok",
                       reason="not measured: the new run did not finish" if partial
                       else "not in the new artifact")
            for c in base.cases if c.case_id not in seen]
    return out


def compare(base: RunRecord, new: RunRecord, threshold: float = DEFAULT_THRESHOLD,
            alpha: float = DEFAULT_ALPHA, floor: NoiseFloor | None = None,
            allow_untested: bool = False,
            memory_threshold: float = DEFAULT_MEMORY_THRESHOLD,
            busy_level: float = BUSY_LEVEL) -> Comparison:
    """The full verdict of `new` against `base` (see the module docstring). `floor`: the
    noise floor, by default the one of the new artifact's device platform."""
    floor = floor or default_floor(new.provenance.devices.platform)
    gate = Gate(threshold, alpha, floor.value, memory_threshold, busy_level)
    cases = compare_cases(base, new, gate)
    warnings = environment_warnings(base, new)
    warnings += [f"case {c.case_id} is in the baseline but not in the new artifact"
                 for c in cases if c.verdict == REMOVED]
    names = (label(base), label(new))
    if names[0] == names[1]:  # same commit: the run ids tell the two apart
        names = (f"{names[0]} ({base.run_id})", f"{names[1]} ({new.run_id})")
    return Comparison(base=names[0], new=names[1], threshold=threshold, alpha=alpha,
                      floor=floor, cases=cases, parity=compare_parity(base, new),
                      warnings=warnings, allow_untested=allow_untested,
                      memory_threshold=memory_threshold, busy_level=busy_level)
