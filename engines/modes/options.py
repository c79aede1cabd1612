"""Validation of each mode's options: every bad option is a MibenchError naming it."""

from __future__ import annotations

import numbers

from mibench.engines.errors import MibenchError

MASKS = ("dense", "segment", "auto")
SCHEDULES = ("parallel", "sequential")
# `auto` picks per backend (engines/backends.py): cudnn on GPU in bfloat16, pallas on TPU,
# xla (the tiled kernels) on CPU
ATTENTIONS = ("auto", "xla", "pallas", "cudnn")

# engine -> mode -> the options it takes: the one table that the engines check calls
# against and the config matrix expands from (plain data, so `mibench validate` stays fast)
MODE_OPTIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "jax": {"single": ("attention",), "packed": ("mask", "attention"),
            "chunked": ("chunk_size", "mask", "schedule", "attention"),
            "prefill_extend": ("extend_batch_size", "precompile_bs", "attention")},
    "torch": {"single": (), "prefill_extend": ("extend_batch_size",)},
}
# every option, in case-id order
OPTION_NAMES = ("mask", "chunk_size", "schedule", "extend_batch_size", "precompile_bs",
                "attention")
# options whose default is a fixed value: left at it, they stay out of the case id
DEFAULTS = {"schedule": "parallel", "attention": "auto"}


def check_known(engine: str, mode: str, options: dict) -> None:
    """Refuse options the mode does not take."""
    known = MODE_OPTIONS[engine][mode]
    unknown = sorted(set(options) - set(known))
    if unknown:
        allowed = ", ".join(known) if known else "none"
        raise MibenchError(f"mode {mode!r} does not take option(s) {unknown} "
                           f"(it takes: {allowed})", field=unknown[0])


def positive_int(value, field: str) -> int:
    """A positive integer (not a bool), or a MibenchError naming the field."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise MibenchError(f"must be an integer >= 1, got {value!r}", field=field)
    return int(value)


def mask_option(value) -> str:
    return choice(value, "mask", MASKS)


def choice(value, field: str, allowed: tuple[str, ...]) -> str:
    """One of `allowed`, or a MibenchError naming the field."""
    if value not in allowed:
        raise MibenchError(f"must be one of {', '.join(allowed)}, got {value!r}", field=field)
    return value


def require_delimiter(mode: str, delimiter) -> None:
    if delimiter is None:
        raise MibenchError(f"mode {mode!r} packs items into one sequence and needs a "
                           "delimiter token (delimited semantics)", field="delimiter")


def batch_sizes(extend_batch_size, precompile_bs) -> tuple[int, list[int]]:
    """(B, sorted sizes that batches are padded to). Default sizes: powers of two below B,
    and B itself. The list must hold B (its largest size >= B)."""
    b = positive_int(extend_batch_size, "extend_batch_size")
    if precompile_bs is None:
        sizes = [1 << i for i in range(b.bit_length()) if 1 << i < b] + [b]
    else:
        if isinstance(precompile_bs, (str, bytes)) or not hasattr(precompile_bs, "__iter__"):
            raise MibenchError(f"must be a list of batch sizes, got {precompile_bs!r}",
                               field="precompile_bs")
        sizes = sorted({positive_int(s, "precompile_bs") for s in precompile_bs})
        if not sizes or sizes[-1] < b:
            raise MibenchError(f"{sizes} cannot hold extend_batch_size={b}: its largest size "
                               f"must be >= {b}", field="precompile_bs")
    return b, sizes
