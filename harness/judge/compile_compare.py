"""`mibench compare BASE.json NEW.json` on two compile artifacts (`mibench.compile/2`, or /1):
compiled costs are deterministic, so there are no noise statistics; every change is reported
exactly and the gate is a plain threshold (rendered: harness/report/compile_changes.py).

Cases are matched by case_id. The artifacts must come from the same compiler: the same
target, libtpu version and jax version, else nothing is compared (exit 2). A case regresses
when it stops compiling (ok -> failed), stops fitting (fits true -> false), its peak HBM
per chip, bytes accessed per pass or FLOPs per pass grow by more than the threshold, or its
roofline bound (the items/s the target's peaks allow, `CaseCompile.roofline`) falls by more
than the threshold: exactly as compiled costs are judged, since the bound is arithmetic
over the compiled case, so a nightly without a TPU sees a change in what the TPU could do.
Compile time and host seconds per pass are shown, never gated (they depend on the machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mibench.errors import MibenchError

from ..records.compile import CompileCase, CompileRecord
from ..util import short_number


def roofline_bound(c: CompileCase) -> float | None:
    r = c.compile.roofline
    return r.items_per_s if r is not None else None


# (label, getter, unit, direction) of the gated quantities: per chip (HBM) or per
# steady-state pass; direction +1: a rise is worse (a cost), -1: a fall is (the bound)
GATED = (
    ("peak HBM", lambda c: c.compile.hbm_peak_bytes, "B", 1),
    ("bytes accessed", lambda c: c.compile.bytes_accessed_per_pass, "B", 1),
    ("FLOPs", lambda c: c.compile.flops_per_pass, "", 1),
    ("roofline items/s", roofline_bound, "", -1),
)


@dataclass
class CaseDiff:
    case_id: str
    base: CompileCase | None
    new: CompileCase | None
    regressions: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)


@dataclass
class CompileComparison:
    base: CompileRecord
    new: CompileRecord
    threshold: float
    cases: list[CaseDiff]

    @property
    def regressions(self) -> list[CaseDiff]:
        return [d for d in self.cases if d.regressions]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0


def same_compiler(base: CompileRecord, new: CompileRecord) -> str | None:
    """Why the two artifacts cannot be compared, or None."""
    pairs = [("target", base.target.name, new.target.name),
             ("libtpu", base.libtpu.version, new.libtpu.version),
             ("jax", base.provenance.packages.get("jax"), new.provenance.packages.get("jax"))]
    for what, a, b in pairs:
        if a != b:
            return f"{what} differs: {a} vs {b}"
    return None


def relative_change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a - 1


def diff_case(case_id: str, a: CompileCase | None, b: CompileCase | None,
              threshold: float) -> CaseDiff:
    d = CaseDiff(case_id, a, b)
    if a is None or b is None:
        d.changes.append("only in BASE" if b is None else "only in NEW")
        return d
    if a.status != b.status:
        d.changes.append(f"status {a.status} -> {b.status}")
        if a.status == "ok" and b.status == "failed":
            why = b.error.message if b.error else ""
            d.regressions.append(f"stopped compiling: {why}"[:300])
    fa = a.compile.fits if a.compile else None
    fb = b.compile.fits if b.compile else None
    if fa != fb:
        d.changes.append(f"fits {fa} -> {fb}")
        if fa is True and fb is False:
            d.regressions.append("stopped fitting in HBM")
    if a.compile is None or b.compile is None:
        return d
    for label, get, unit, direction in GATED:
        va, vb = get(a), get(b)
        if va == vb:
            continue
        rel = relative_change(va, vb)
        text = f"{label} {short_number(va, unit)} -> {short_number(vb, unit)}" + \
            (f" ({rel:+.2%})" if rel is not None else "")
        d.changes.append(text)
        if rel is not None and direction * rel > threshold:
            d.regressions.append(f"{text} {'>' if direction > 0 else '<'} "
                                 f"{'+' if direction > 0 else '-'}{threshold:.0%}")
    na, nb = len(a.compile.programs), len(b.compile.programs)
    if na != nb:
        d.changes.append(f"programs {na} -> {nb}")
    return d


def compare_compile(base: CompileRecord, new: CompileRecord,
                    threshold: float) -> CompileComparison:
    """Raises MibenchError (exit 2) when the artifacts are not comparable."""
    why = same_compiler(base, new)
    if why:
        raise MibenchError(f"compile artifacts not comparable: {why}", field="compare")
    a = {c.case_id: c for c in base.cases}
    b = {c.case_id: c for c in new.cases}
    ids = list(a) + [k for k in b if k not in a]
    return CompileComparison(base, new, threshold,
                             [diff_case(k, a.get(k), b.get(k), threshold) for k in ids])
