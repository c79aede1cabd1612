"""The roofline section of a compile report (`mibench report COMPILE.json...`): per case and
target the bound a pass's FLOPs and HBM bytes allow at the chips' public peaks
(`CaseCompile.roofline`, harness/compile/roofline.py), the resource that sets it, and the
host->device bytes of a host-built mask; then each seed figure beside the bound of the
case that matches it (report/ref_match.py) on that target, as a share of the bound.

A run report given `--compile` sets the bound beside the measured items/s (the resources
table, report/resources.py)."""

from __future__ import annotations

from ..config.matrix import model_name
from ..records import ReferenceSet
from ..records.compile import CompileCase, CompileRecord
from ..util import short_number
from . import fmt
from .fmt import Table
from .ref_match import Seen, mismatches, pick
from .references import figure_value, statistic


def mask_bytes(case: CompileCase) -> float | None:
    """Host->device bytes per pass of the arguments named like a mask (the compile's own
    count at the program boundary), or None when the case copies none."""
    host = case.compile.host if case.compile else None
    if host is None:
        return None
    found = [n for k, n in host.to_device_by_argument.items() if "mask" in k]
    return float(sum(found)) if found else None


def seen_compile(case: CompileCase, record: CompileRecord) -> Seen:
    """A compiled case as reference matching sees it: the target's chips, no measurement."""
    t = record.target
    kind = (t.device_kind or f"TPU {t.kind}").lower()
    return Seen(case.case_id, case.engine, case.mode, dict(case.params), case.topology.tp,
                case.workload.num_items, "tpu", kind, t.chips,
                f"{t.device_kind or t.kind} x{t.chips} ({t.name})",
                model_name(case.model.path), case.model.dtype, case.workload.as_dict(),
                case.status, run=record.target.name)


def roofline_table(records: list[CompileRecord]) -> Table | None:
    body = []
    for r in records:
        for case in r.cases:
            b = case.compile.roofline if case.compile else None
            if b is None:
                continue
            body.append([case.case_id, r.target.name, short_number(b.flops_per_pass),
                         short_number(b.hbm_bytes_per_pass, "B"),
                         short_number(mask_bytes(case), "B"),
                         fmt.num(1e3 * b.compute_s, 3), fmt.num(1e3 * b.memory_s, 3),
                         str(b.items), fmt.num(b.items_per_s), b.bound])
    if not body:
        return None
    t = records[0].target
    sources = "; ".join(dict.fromkeys(
        f"{r.target.kind}: {fmt.flops(r.target.peak_flops_per_chip)} bf16 and "
        f"{r.target.hbm_bandwidth_per_chip / 1e9:,.0f} GB/s per chip ({r.target.peak_flops_source})"
        for r in records if r.target.peak_flops_per_chip))
    method = next(c.compile.roofline.method for r in records for c in r.cases
                  if c.compile and c.compile.roofline)
    return Table(["Case", "Target", "FLOPs/pass", "HBM bytes/pass", "Mask host->device/pass",
                  "Compute (ms)", "Memory (ms)", "Items", "Bound items/s", "Bounded by"],
                 body, ["l", "l"] + ["r"] * 7 + ["l"], title="Roofline: what the chips allow",
                 note=f"A pass takes at least the larger of FLOPs / (chips x peak FLOP/s) "
                      f"(compute) and HBM bytes / (chips x bandwidth) (memory); items over it "
                      f"is an upper bound on items/s, set by the resource named. FLOPs and "
                      f"bytes: {method}; both spread evenly over the chips, nothing counted "
                      f"for communication or the host link (the mask column is what a dense "
                      f"mode copies to the chips every pass, from the compile's own count). "
                      f"Peaks: {sources or t.name}.")


def seeds_table(records: list[CompileRecord], sets: list[ReferenceSet]) -> Table | None:
    """Each seed figure (with items/s) beside the bound of its matching case on each
    target: figure / bound is the share of what the chips allow that the seed reached."""
    body = []
    for s in sets:
        for f in s.figures:
            if f.items_per_s is None:
                continue
            for r in records:
                seen = [seen_compile(c, r) for c in r.cases]
                found = pick(f, seen)
                if found is None:
                    continue
                case = next(c for c in r.cases if c.case_id == found.case_id)
                b = case.compile.roofline if case.compile else None
                why = mismatches(f, found)
                share = f"{f.items_per_s / b.items_per_s:.1%}" if b and not why else "-"
                if share != "-" and found.items != f.workload.num_items:
                    share += f" (N {found.items} / {f.workload.num_items})"
                if share != "-" and f.unstated:
                    share += f", leans on {', '.join(f.unstated)}"
                body.append([f.id, figure_value(f), statistic(f), f.source_engine or "-",
                             f.hardware.label, r.target.name, found.case_id,
                             fmt.num(b.items_per_s) if b else "-", b.bound if b else "-",
                             share, "; ".join(why) or "-"])
    if not body:
        return None
    return Table(["Reference", "Seed items/s", "Statistic", "Engine (the seed's words)",
                  "Seed hardware", "Target", "Case compiled (mibench's engine)",
                  "Bound items/s", "Bounded by", "Seed / bound", "Not the seed's setting because"],
                 body, ["l", "r", "l", "l", "l", "l", "l", "r", "l", "r", "l"],
                 title="The seeds' figures beside the bound",
                 note="Seed / bound: the share of what the target's chips allow that the "
                      "seed's figure reached, given only where target, model, dtype and "
                      "lengths are the seed's; (N a / b) where the case compiled a items "
                      "and the seed ran b (a bound of items/s on other N); 'leans on' names "
                      "what the seed does not state. The bound is of "
                      "mibench's mode as it runs (its padding, its dense mask's materialised "
                      "scores); the seeds' engines are other engines. Figures without an "
                      "items/s (failures) and figures whose mode no compiled case runs are "
                      "left out.")
