"""Whether two artifacts' cases are the same measurement, and whether an artifact can be
compared at all (pure functions on records; the gate is harness/judge/compare.py).

A case's `measurement` is everything that must agree for a comparison to mean anything:
the workload (every field), model, dtype, topology and hardware (on a CPU also the machine,
core count and CPU model), and for a server its name, arguments (every `server_args`
value, axes or not) and wire. `defect` names what no mibench run writes (a duplicate case
id, a run time that is not finite and > 0, summaries that disagree with the samples, an ok
case with no timed runs or no items): every reader refuses such an artifact
(harness/commands/common.py `load`, a resume). `invalid` adds what makes one unusable for a
comparison: no cases.
"""

from __future__ import annotations

import json
import math

from ..case_kinds import kind_of
from ..records import CaseRecord, RunRecord
from ..records.summaries import summarize
from ..stats.describe import per_unit_ms, rates

SUMMARY_RTOL = 1e-6  # how closely stored summaries must match the recomputed ones


def code_git(record: RunRecord):
    """The checkout whose code a run measured: `provenance.engine_repo` where the run
    recorded one with a commit (its engines, or the server under test, came from there:
    `run --engine-repo`, the nightly's runs of a revision), else the run's own checkout.
    What history, the noise floor and labels call a run's commit."""
    other = record.provenance.engine_repo
    return other if other is not None and other.commit else record.provenance.git


def label(record: RunRecord) -> str:
    """Short commit of the code measured (`code_git`; with `+` when its checkout was
    dirty), else the run id."""
    git = code_git(record)
    if git.commit:
        return git.commit[:8] + ("+" if git.dirty else "")
    return record.run_id


def measurement(record: RunRecord, case: CaseRecord) -> dict[str, object]:
    """Everything that must agree for two cases to be the same measurement, flat:
    `workload.<field>`, model, dtype, tp, mesh, devices, and on a CPU machine, cpus, cpu."""
    out: dict[str, object] = {}
    root = (record.provenance.git.path or "").rstrip("/") + "/"
    for key, value in sorted(case.workload.as_dict().items()):
        if key == "requests" and isinstance(value, str) and value.startswith(root):
            value = value[len(root):]  # the same file in another checkout
        out[f"workload.{key}"] = value
    for key in ("server", "server_args", "wire"):
        if key in case.params:
            out[key] = case.params[key]
    tp = case.topology.tp
    out |= {"model": case.model.path, "dtype": case.model.dtype, "tp": tp,
            "mesh": case.topology.mesh_shape or {"tp": tp}}
    d, host = record.provenance.devices, record.provenance.host
    out["devices"] = f"{d.platform} {d.kind} x{d.count}"
    if d.platform == "cpu":
        out |= {"machine": host.get("machine"), "cpus": host.get("cpus"),
                "cpu": host.get("cpu_model") or host.get("processor")}
    return out


def measurement_id(record: RunRecord, case: CaseRecord) -> str:
    """A short stable key of the case's `measurement` (12 hex digits of its sha256), what
    history, the noise floor and the exports key a series by; a CPU model that is not
    recorded is left out of it (older artifacts lack it, as `differences` allows)."""
    import hashlib

    fields = {k: v for k, v in measurement(record, case).items()
              if not (k == "cpu" and v is None)}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def differences(base: dict[str, object], new: dict[str, object]) -> list[str]:
    """`field base vs new` for every field that differs (a CPU model recorded on one side
    only is not a difference: older artifacts lack it)."""
    out = []
    for key in dict.fromkeys([*base, *new]):
        a, b = base.get(key), new.get(key)
        if a != b and not (key == "cpu" and (a is None or b is None)):
            out.append(f"{key} {_short(a)} vs {_short(b)}")
    return out


def same_measurements(base: RunRecord, new: RunRecord) -> list[str]:
    """The case ids of `new` that `base` holds as the same measurement (those `compare` does
    not call `not comparable`). Two runs are comparable when there is one."""
    old = {c.case_id: c for c in base.cases}
    return [c.case_id for c in new.cases if c.case_id in old
            and not differences(measurement(base, old[c.case_id]), measurement(new, c))]


def _short(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def invalid(record: RunRecord) -> str | None:
    """What makes an artifact unusable for a comparison, naming the case, or None: no
    cases, or a `defect`."""
    return "has no cases" if not record.cases else defect(record)


def defect(record: RunRecord) -> str | None:
    """What no mibench run writes, naming the case, or None: a duplicate case id, a run
    time that is not finite and > 0, process runs that do not pool into `timed_s`, stored
    summaries that disagree with the samples, an ok case with no timed runs or that scored
    no items (one or two timed runs are a real run: `compare` calls them untested)."""
    seen: set[str] = set()
    for c in record.cases:
        if c.case_id in seen:
            return f"case {c.case_id} appears twice (case ids must be unique)"
        seen.add(c.case_id)
        runs = [("timed_s", c.timed_s)] + [(f"process_timed_s[{i}]", p)
                                            for i, p in enumerate(c.process_timed_s)]
        for name, values in runs:
            for j, v in enumerate(values):
                if not (math.isfinite(v) and v > 0):
                    return f"case {c.case_id}: {name}[{j}] = {v!r} is not a run time " \
                           "(a finite number > 0)"
        if c.process_timed_s and [t for p in c.process_timed_s for t in p] != c.timed_s:
            return f"case {c.case_id}: process_timed_s does not pool into timed_s"
        why = _ok_without_work(c) if c.status == "ok" else None
        if why:
            return f"case {c.case_id}: {why}"
        why = _summary_mismatch(c)
        if why:
            return f"case {c.case_id}: {why}"
    return None


def _ok_without_work(case: CaseRecord) -> str | None:
    """Why an `ok` case measured nothing (no timed run, no item), or None."""
    if not case.timed_s:
        return "is ok but has no timed runs (timed_s is empty)"
    n = case.workload.num_items
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n <= 0):
        return f"is ok but scored no items (workload.num_items is {n!r})"
    if case.scores is not None and not any(case.scores):
        return "is ok but scored no items (its scores hold no rows)"
    return kind_of(case.engine).measured_nothing(case)


def _summary_mismatch(case: CaseRecord) -> str | None:
    """The first stored summary that differs from the one recomputed from `timed_s`."""
    n = case.workload.num_items
    expected = {"total_s": summarize(case.timed_s)}
    # a case whose runs do not all score every item (the requests case: answered requests
    # only) keeps the summaries its kind computed
    if isinstance(n, int) and n > 0 and kind_of(case.engine).items_every_run:
        expected |= {"throughput_items_per_s": summarize(rates(case.timed_s, n)),
                     "latency_per_item_ms": summarize(per_unit_ms(case.timed_s, n))}
    for name, want in expected.items():
        have = getattr(case.metrics, name)
        if have is None:
            continue
        if want is None:
            return f"metrics.{name} summarizes {have.n} runs but timed_s is empty"
        for key in ("n", "median", "mean", "min", "max", "stdev"):
            a, b = getattr(have, key), getattr(want, key)
            if not math.isclose(a, b, rel_tol=SUMMARY_RTOL, abs_tol=1e-12):
                return (f"metrics.{name}.{key} is {a:.6g} but timed_s gives {b:.6g} "
                        "(summaries must come from the samples)")
    return None
