"""`mibench report COMPILE.json ...`: the "TPU fit" table of one or more compile artifacts
(`mibench compile`): one row per case, one column per target, each cell the case's peak HBM
per chip over the chip's HBM, and its status; then each artifact's per-case costs."""

from __future__ import annotations

from ..records.compile import CompileCase, CompileRecord
from ..util import GIB, short_number
from .roofline import mask_bytes


def fit_cell(case: CompileCase | None) -> str:
    if case is None:
        return ""
    c = case.compile
    if c is None or c.hbm_peak_bytes is None:
        fits = "out of HBM" if c is not None and c.fits is False else case.status
        return fits
    share = c.hbm_peak_bytes / c.hbm_per_chip_bytes
    mark = {True: "fits", False: "DOES NOT FIT", None: "?"}[c.fits]
    tail = mark if case.status == "ok" else f"{case.status}, {mark}"
    return (f"{short_number(c.hbm_peak_bytes, 'B')} / {c.hbm_per_chip_bytes / GIB:.0f} GiB "
            f"({share:.1%}) {tail}")


def render_fit(records: list[CompileRecord], refs=None) -> str:
    """The fit table, each artifact's costs, the roofline bound and the seeds' figures
    beside it (`refs`, else the artifacts' own reference sets)."""
    from .references import reference_sets
    from .roofline import roofline_table, seeds_table

    out = [_fit(records)]
    for table in (roofline_table(records), seeds_table(records, reference_sets(records, refs))):
        if table is not None:
            out += [f"## {table.title}", "", table.markdown(), "", f"_{table.note}_", ""]
    return "\n".join(out).rstrip() + "\n"


def _fit(records: list[CompileRecord]) -> str:
    targets = list(dict.fromkeys(r.target.name for r in records))
    cells: dict[tuple[str, str], CompileCase] = {}
    rows: list[str] = []
    for r in records:
        for c in r.cases:
            cells[(c.case_id, r.target.name)] = c
            if c.case_id not in rows:
                rows.append(c.case_id)
    out = ["# TPU fit", "",
           "Peak HBM per chip of each case's largest program (XLA's memory analysis, "
           "weights and held results included) over the chip's HBM, compiled by libtpu "
           "for compile-only devices.", "",
           "| case | " + " | ".join(targets) + " |",
           "|---|" + "---|" * len(targets)]
    for case_id in rows:
        out.append(f"| {case_id} | " +
                   " | ".join(fit_cell(cells.get((case_id, t))) for t in targets) + " |")
    for r in records:
        t = r.target
        out += ["", f"## {r.config.get('name')} on {t.name} ({t.topology}, "
                    f"{t.device_kind or t.kind}; libtpu {r.libtpu.version}, jax "
                    f"{r.provenance.packages.get('jax')})", "",
                "| case | status | peak HBM/chip | fits | FLOPs/pass | bytes/pass | "
                "compiled/useful FLOPs | mask host->device/pass | programs | compile s |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for case in r.cases:
            c = case.compile
            if c is None:
                msg = case.error.message if case.error else ""
                out.append(f"| {case.case_id} | {case.status} | - | - | - | - | - | - | - | - |"
                           + (f" {msg[:120]}" if msg else ""))
                continue
            ratio = c.flops_ratio
            out.append(
                f"| {case.case_id} | {case.status} | {short_number(c.hbm_peak_bytes, 'B')} | "
                f"{ {True: 'yes', False: 'NO', None: '-'}[c.fits]} | "
                f"{short_number(c.flops_per_pass)} | "
                f"{short_number(c.bytes_accessed_per_pass, 'B')} | "
                f"{'-' if ratio is None else f'{ratio:.2f}'} | "
                f"{short_number(mask_bytes(case), 'B')} | {len(c.programs)} | {c.compile_s:.1f} |")
        out += ["", f"FLOPs and bytes: {r.cost_loops}. Mask host->device/pass: the bytes of "
                    "the host-built mask (a dense mode's) copied to the chips every pass."]
    return "\n".join(out) + "\n"
