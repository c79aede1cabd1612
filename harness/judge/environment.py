"""What a comparison says beside its cases (pure: two records in, records and lines out):
the parity checks of the new run against the baseline's (a check that passed, or did not
exist, and does not pass now is a regression), and the warnings the case verdicts do not
show (another host, packages or config, a dirty tree, a partial run, a CPU model or a
machine's load that was not recorded). harness/judge/compare.py gathers them."""

from __future__ import annotations

import dataclasses

from ..records import PASSING, ParityCheck, RunRecord


@dataclasses.dataclass(frozen=True)
class ParityChange:
    key: str  # check/variant: case_id vs against
    base_status: str | None
    new_status: str
    new_max_abs_diff: float | None
    new_max_log_diff: float | None
    tolerance: float
    regression: bool


def parity_key(check: ParityCheck) -> str:
    variant = f"/{check.variant}" if check.variant else ""
    return f"{check.check}{variant}: {check.case_id} vs {check.against}"


def compare_parity(base: RunRecord, new: RunRecord) -> list[ParityChange]:
    old = {parity_key(c): c.status for c in (base.parity.checks if base.parity else [])}
    out = []
    for c in new.parity.checks if new.parity else []:
        was = old.get(parity_key(c))
        out.append(ParityChange(key=parity_key(c), base_status=was, new_status=c.status,
                                new_max_abs_diff=c.max_abs_diff,
                                new_max_log_diff=getattr(c, "max_log_diff", None),
                                tolerance=c.tolerance,
                                regression=not c.passing and (was is None or was in PASSING)))
    return out


def environment_warnings(base: RunRecord, new: RunRecord) -> list[str]:
    """What the case verdicts do not show: another host, packages or config, a dirty tree,
    a partial run, a CPU model that was not recorded."""
    out = []
    if base.provenance.host.get("hostname") != new.provenance.host.get("hostname"):
        out.append(f"host differs: {base.provenance.host.get('hostname')} vs "
                   f"{new.provenance.host.get('hostname')}")
    if "cpu" in {base.provenance.devices.platform, new.provenance.devices.platform}:
        unknown = [name for name, r in (("baseline", base), ("new", new))
                   if not (r.provenance.host.get("cpu_model") or r.provenance.host.get(
                       "processor"))]
        if unknown:
            which = "either artifact" if len(unknown) == 2 else f"the {unknown[0]} artifact"
            out.append(f"the CPU model is not recorded in {which}: CPU cases were matched "
                       "on machine and core count only")
    bp, np_ = base.provenance.packages, new.provenance.packages
    changed = [f"{k} {bp.get(k)} -> {np_.get(k)}" for k in sorted(set(bp) | set(np_))
               if k != "mibench" and bp.get(k) != np_.get(k)]
    if changed:
        out.append("package versions differ: " + ", ".join(changed))
    if base.config_sha256 != new.config_sha256:
        keys = sorted(k for k in set(base.config) | set(new.config)
                      if base.config.get(k) != new.config.get(k))
        out.append("config differs" + (f" in: {', '.join(keys)}" if keys else ""))
    unrecorded = [name for name, rec in (("baseline", base), ("new", new))
                  if any(c.status == "ok" and c.load is None for c in rec.cases)]
    if unrecorded:
        which = "either artifact" if len(unrecorded) == 2 else f"the {unrecorded[0]} artifact"
        out.append(f"the machine's load is not recorded for cases of {which} (an artifact "
                   "before mibench.run/3, or a case shorter than a clock tick): their "
                   "timing verdicts cannot tell a busy machine")
    for name, rec in (("baseline", base), ("new", new)):
        if rec.provenance.git.dirty:
            out.append(f"the {name} checkout had uncommitted changes")
        if rec.finished_at is None:
            out.append(f"the {name} run did not finish (partial artifact)")
    return out


def environment_changes(before: RunRecord, after: RunRecord) -> list[str]:
    """What changed in the environment between two neighbouring runs, one item each
    (`jax 0.4.35 -> 0.5.0`, `device cpu cpu x1 -> tpu v6e x1`, `CPU A -> B`, `python ...`,
    `host a -> b`, `kernel ...`): what a step of a series may owe to the machine rather
    than the code (`mibench site` marks a step that coincides with one). mibench's own
    version is the code measured, not the environment."""
    b, a = before.provenance, after.provenance
    out = [f"{k} {b.packages.get(k)} -> {a.packages.get(k)}"
           for k in sorted(set(b.packages) | set(a.packages))
           if k != "mibench" and b.packages.get(k) != a.packages.get(k)]
    device = [f"{d.platform} {d.kind} x{d.count}" for d in (b.devices, a.devices)]
    cpu = [r.host.get("cpu_model") or r.host.get("processor") for r in (b, a)]
    python = [r.python.split(" ")[0] for r in (b, a)]
    for name, (x, y) in (("device", device), ("CPU", cpu), ("python", python),
                         ("host", [r.host.get("hostname") for r in (b, a)]),
                         ("kernel", [r.host.get("release") for r in (b, a)])):
        if x != y and x is not None and y is not None:
            out.append(f"{name} {x} -> {y}")
    return out
