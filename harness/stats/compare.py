"""The regression gate: compare two artifacts case by case (pure: records in, a record out).

Cases are matched by case id. Direction-aware: throughput (items/s) down is bad, latency per
item up is bad. A case regressed when

- its throughput fell, or its latency rose, by more than `threshold` (relative change of the
  medians) AND the raw timed samples (as seconds per item) differ significantly
  (`harness.significance`), or
- it was `ok` in the baseline and is `failed` now, whatever the numbers.

A parity check that passed (or did not exist) in the baseline and fails now is a regression,
and so is a case that was `ok` and is missing from a new run that did not finish.
Differences in hardware, package versions or config are warnings: they make the numbers
less comparable but do not fail the gate.
"""

from __future__ import annotations

import dataclasses

from mibench.harness.records import CaseRecord, ParityCheck, RunRecord
from mibench.harness.stats.describe import median
from mibench.harness.stats.significance import Test, compare_samples

DEFAULT_THRESHOLD = 0.05
DEFAULT_ALPHA = 0.05


@dataclasses.dataclass(frozen=True)
class CaseChange:
    """One case id in either artifact. `change`: relative change of the throughput median."""

    case_id: str
    base_status: str | None  # None: not in the baseline
    new_status: str | None  # None: not in the new artifact
    base_items_per_s: float | None = None
    new_items_per_s: float | None = None
    base_latency_ms: float | None = None
    new_latency_ms: float | None = None
    change: float | None = None  # new / base - 1 of items/s
    latency_change: float | None = None
    test: Test | None = None
    # regression|failed|improvement|unchanged|noise|untested|added|removed|missing|fixed|
    # still failing|skipped
    verdict: str = "unchanged"
    regression: bool = False
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class ParityChange:
    key: str  # check/variant: case_id vs against
    base_status: str | None
    new_status: str
    new_max_abs_diff: float | None
    tolerance: float
    regression: bool


@dataclasses.dataclass(frozen=True)
class Comparison:
    base: str  # labels (short commit or run id)
    new: str
    threshold: float
    alpha: float
    cases: list[CaseChange]
    parity: list[ParityChange]
    warnings: list[str]

    @property
    def regression(self) -> bool:
        return any(c.regression for c in self.cases) or any(p.regression for p in self.parity)

    @property
    def methods(self) -> list[str]:
        return sorted({c.test.method for c in self.cases if c.test is not None})


def label(record: RunRecord) -> str:
    """Short commit (with `+` when the checkout was dirty), else the run id."""
    git = record.provenance.git
    if git.commit:
        return git.commit[:8] + ("+" if git.dirty else "")
    return record.run_id


def _case_change(base: CaseRecord, new: CaseRecord, threshold: float,
                 alpha: float) -> CaseChange:
    common = dict(case_id=new.case_id, base_status=base.status, new_status=new.status,
                  base_items_per_s=median(base.metrics.throughput_items_per_s),
                  new_items_per_s=median(new.metrics.throughput_items_per_s),
                  base_latency_ms=median(base.metrics.latency_per_item_ms),
                  new_latency_ms=median(new.metrics.latency_per_item_ms))
    if base.status == "ok" and new.status == "failed":
        first = new.error.message.splitlines()[0] if new.error and new.error.message else ""
        why = f"newly failed: {new.error.type}: {first}" if new.error else "newly failed"
        return CaseChange(**common, verdict="failed", regression=True, reason=why)
    if base.status != "ok" and new.status == "ok":
        return CaseChange(**common, verdict="fixed", reason=f"was {base.status}")
    if base.status == new.status == "failed":
        return CaseChange(**common, verdict="still failing", reason="failed in both")
    if base.status != "ok" or new.status != "ok" or not base.timed_s or not new.timed_s:
        return CaseChange(**common, verdict=new.status if new.status != "ok" else "untested",
                          reason=f"{base.status} -> {new.status}, nothing to compare")
    test = compare_samples(per_item_s(base), per_item_s(new), alpha)
    thr_change = _rel(common["base_items_per_s"], common["new_items_per_s"])
    if thr_change is None:  # no summaries: derive from the times (items/s ~ 1 / time)
        thr_change = 1 / test.ratio - 1
    lat_change = _rel(common["base_latency_ms"], common["new_latency_ms"])
    worse = max(-thr_change, lat_change if lat_change is not None else -thr_change)
    better = max(thr_change, -lat_change if lat_change is not None else thr_change)
    verdict, reason = _verdict(worse, better, test, threshold)
    return CaseChange(**common, change=thr_change, latency_change=lat_change, test=test,
                      verdict=verdict, regression=verdict == "regression", reason=reason)


def per_item_s(case: CaseRecord) -> list[float]:
    """Seconds per item of every timed run: comparable even if the item count changed."""
    n = case.workload.get("num_items")
    thr, total = case.metrics.throughput_items_per_s, case.metrics.total_s
    if not n and thr is not None and total is not None:
        n = thr.median * total.median  # JSONL workloads: the count behind the summaries
    return [t / n for t in case.timed_s] if n else list(case.timed_s)


def _verdict(worse: float, better: float, test: Test, threshold: float) -> tuple[str, str]:
    big = f"more than {threshold:.0%}"
    if worse > threshold:
        if test.significant:
            return "regression", f"slower by {big}, significant"
        if test.n_base == 1 and test.n_new == 1:
            return "untested", f"slower by {big}, one run on each side: not testable"
        return "noise", f"slower by {big}, not significant"
    if better > threshold:
        return ("improvement", f"faster by {big}, significant") if test.significant else (
            "noise", f"faster by {big}, not significant")
    return "unchanged", f"within {threshold:.0%}"


def _rel(base: float | None, new: float | None) -> float | None:
    if base is None or new is None or base == 0:
        return None
    return new / base - 1


def compare_cases(base: RunRecord, new: RunRecord, threshold: float = DEFAULT_THRESHOLD,
                  alpha: float = DEFAULT_ALPHA) -> list[CaseChange]:
    """Every case id of either artifact, in the new artifact's order, then removed ones."""
    old = {c.case_id: c for c in base.cases}
    out = []
    for case in new.cases:
        if case.case_id in old:
            out.append(_case_change(old[case.case_id], case, threshold, alpha))
        else:
            out.append(CaseChange(case_id=case.case_id, base_status=None,
                                  new_status=case.status, verdict="added",
                                  new_items_per_s=median(case.metrics.throughput_items_per_s),
                                  reason="not in the baseline"))
    seen = {c.case_id for c in new.cases}
    partial = new.finished_at is None  # a run that died: its missing cases did not run
    out += [CaseChange(case_id=c.case_id, base_status=c.status, new_status=None,
                       base_items_per_s=median(c.metrics.throughput_items_per_s),
                       verdict="missing" if partial else "removed",
                       regression=partial and c.status == "ok",
                       reason="not measured: the new run did not finish" if partial
                       else "not in the new artifact")
            for c in base.cases if c.case_id not in seen]
    return out


def parity_key(check: ParityCheck) -> str:
    variant = f"/{check.variant}" if check.variant else ""
    return f"{check.check}{variant}: {check.case_id} vs {check.against}"


def compare_parity(base: RunRecord, new: RunRecord) -> list[ParityChange]:
    old = {parity_key(c): c.status for c in (base.parity.checks if base.parity else [])}
    out = []
    for c in new.parity.checks if new.parity else []:
        was = old.get(parity_key(c))
        out.append(ParityChange(key=parity_key(c), base_status=was, new_status=c.status,
                                new_max_abs_diff=c.max_abs_diff, tolerance=c.tolerance,
                                regression=c.status != "passed" and was in (None, "passed")))
    return out


def environment_warnings(base: RunRecord, new: RunRecord) -> list[str]:
    """What makes the two artifacts less comparable: hardware, packages, config, dirty trees."""
    out = []
    bd, nd = base.provenance.devices, new.provenance.devices
    if (bd.platform, bd.kind, bd.count) != (nd.platform, nd.kind, nd.count):
        out.append(f"hardware differs: {bd.kind} x{bd.count} ({bd.platform}) vs "
                   f"{nd.kind} x{nd.count} ({nd.platform})")
    if base.provenance.host.get("hostname") != new.provenance.host.get("hostname"):
        out.append(f"host differs: {base.provenance.host.get('hostname')} vs "
                   f"{new.provenance.host.get('hostname')}")
    bp, np_ = base.provenance.packages, new.provenance.packages
    changed = [f"{k} {bp.get(k)} -> {np_.get(k)}" for k in sorted(set(bp) | set(np_))
               if k != "mibench" and bp.get(k) != np_.get(k)]
    if changed:
        out.append("package versions differ: " + ", ".join(changed))
    if base.config_sha256 != new.config_sha256:
        keys = sorted(k for k in set(base.config) | set(new.config)
                      if base.config.get(k) != new.config.get(k))
        out.append("config differs" + (f" in: {', '.join(keys)}" if keys else ""))
    for name, rec in (("baseline", base), ("new", new)):
        if rec.provenance.git.dirty:
            out.append(f"the {name} checkout had uncommitted changes")
        if rec.finished_at is None:
            out.append(f"the {name} run did not finish (partial artifact)")
    return out


def compare(base: RunRecord, new: RunRecord, threshold: float = DEFAULT_THRESHOLD,
            alpha: float = DEFAULT_ALPHA) -> Comparison:
    """The full verdict of `new` against `base` (see the module docstring)."""
    cases = compare_cases(base, new, threshold, alpha)
    warnings = environment_warnings(base, new)
    warnings += [f"case {c.case_id} is in the baseline but not in the new artifact"
                 for c in cases if c.verdict == "removed"]
    warnings += [f"case {c.case_id}: {c.reason}" for c in cases
                 if c.verdict == "untested" and c.base_status == "ok" and c.new_status == "ok"]
    names = (label(base), label(new))
    if names[0] == names[1]:  # same commit: the run ids tell the two apart
        names = (f"{names[0]} ({base.run_id})", f"{names[1]} ({new.run_id})")
    return Comparison(base=names[0], new=names[1], threshold=threshold, alpha=alpha,
                      cases=cases, parity=compare_parity(base, new), warnings=warnings)
