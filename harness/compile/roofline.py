"""The roofline bound of one case on a TPU target: one pass's FLOPs and HBM bytes (the
mode's formulas, engines/modes/work.py) spread over the chips at their public peaks. A pass
takes at least max(FLOPs / (chips x peak FLOP/s), bytes / (chips x HBM bandwidth)), so
items / that time is an upper bound on items/s, set by the larger term (Williams, Waterman
and Patterson, "Roofline", CACM 2009). Pure arithmetic."""

from __future__ import annotations

from ..records.compile import CompileTarget, Roofline

METHOD = ("mibench's formulas (engines/modes/work.py): every layer counted, over the padded "
          "shapes the mode runs; XLA's cost analysis counts a scanned layer once")


def shape_of(request, delimiter, semantics: str, model, dtype: str, head_cols):
    """The accounting Shape of one request (its prefix: `query d` delimited, `query` plain)."""
    from mibench.engines import Shape

    lengths = [len(i) for i in request.items]
    prefix = len(request.query) + (1 if semantics == "delimited" else 0)
    return Shape(prefix, len(lengths), sum(lengths) / len(lengths), longest=max(lengths),
                 model=model, dtype=dtype, head_cols=head_cols)


def bound(flops: float, hbm_bytes: float, mask_bytes: float, items: int,
          target: CompileTarget) -> Roofline | None:
    """The bound of a pass of `items` items on `target` (None: the target has no peaks)."""
    peak, bandwidth = target.peak_flops_per_chip, target.hbm_bandwidth_per_chip
    if not peak or not bandwidth or items <= 0 or max(flops, hbm_bytes) <= 0:
        return None
    compute_s = flops / (target.chips * peak)
    memory_s = hbm_bytes / (target.chips * bandwidth)
    slowest = max(compute_s, memory_s)
    return Roofline(method=METHOD, flops_per_pass=flops, hbm_bytes_per_pass=hbm_bytes,
                    mask_bytes_per_pass=mask_bytes, chips=target.chips, compute_s=compute_s,
                    memory_s=memory_s, items=items,
                    items_per_s=items / slowest,
                    bound="compute" if compute_s >= memory_s else "memory")


def case_bound(mode, options: dict, requests: list, workload, model, dtype: str,
               target: CompileTarget) -> Roofline | None:
    """The bound of one case: the mode's work summed over the workload's requests; None
    where the mode (or an older revision's registry) has no formula."""
    per_pass = getattr(mode, "work_per_pass", None)
    if per_pass is None or not requests:
        return None
    semantics = mode.resolve_semantics(getattr(workload, "semantics", None),
                                       workload.delimiter)
    head_cols = len(workload.label_token_ids) if workload.apply_softmax else None
    flops = hbm = mask = 0.0
    for r in requests:
        w = per_pass(shape_of(r, workload.delimiter, semantics, model, dtype, head_cols),
                     options)
        if w is None:
            return None
        flops, hbm, mask = flops + w.flops, hbm + w.hbm_bytes, mask + w.mask_bytes
    return bound(flops, hbm, mask, sum(len(r.items) for r in requests), target)
