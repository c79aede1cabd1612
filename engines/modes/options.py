"""A mode's options: each typed `Option` (choice, int, ints) with its checks, the option
values every mode shares (masks, schedules, attention kernels, semantics), how a request's
semantics is resolved, and the extend batch sizes with their one rule. Plain data; the
modes that take these options are engines/modes/registry.py's."""

from __future__ import annotations

import dataclasses
import numbers

from mibench.errors import MibenchError

MASKS = ("dense", "segment", "auto")
SCHEDULES = ("parallel", "sequential")
# `auto` picks per backend (engines/attention_paths.py): cudnn on a GPU in bfloat16, pallas
# on a TPU (at any tp: per chip on its own heads), else xla (the tiled kernels)
ATTENTIONS = ("auto", "xla", "pallas", "cudnn")


def positive_int(value, field: str) -> int:
    """A positive integer (not a bool), or a MibenchError naming the field."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise MibenchError(f"must be an integer >= 1, got {value!r}", field=field)
    return int(value)


def choice(value, field: str, allowed: tuple[str, ...]) -> str:
    """One of `allowed`, or a MibenchError naming the field."""
    if not isinstance(value, str) or value not in allowed:
        raise MibenchError(f"must be one of {', '.join(allowed)}, got {value!r}", field=field)
    return value


def positive_ints(value, field: str) -> list[int]:
    """A non-empty list of positive integers, sorted and without repeats."""
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise MibenchError(f"must be a list of integers >= 1, got {value!r}", field=field)
    out = sorted({positive_int(v, field) for v in value})
    if not out:
        raise MibenchError("must hold at least one integer >= 1", field=field)
    return out


@dataclasses.dataclass(frozen=True)
class Option:
    """A mode option. `kind`: `choice` (one of `choices`), `int` (>= 1) or `ints` (a list
    of ints >= 1). A value equal to `id_omits` stays out of case ids (options added after
    case ids were published, so existing ids keep their meaning)."""

    name: str
    kind: str
    doc: str
    choices: tuple[str, ...] = ()
    id_omits: object = None

    def check(self, value):
        if self.kind == "choice":
            return choice(value, self.name, self.choices)
        if self.kind == "int":
            return positive_int(value, self.name)
        return positive_ints(value, self.name)


# every option, in case-id order
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("mask", "choice", "how item rows are kept apart: a host-built boolean mask "
           "(dense: T x T packed, B x L x (P + L) extended), O(T) segment metadata or the "
           "prefix + own-tokens merge (segment), or by shape (auto: dense for short packed "
           "sequences; segment in prefill_extend)", MASKS),
    Option("chunk_size", "int", "items per packed chunk"),
    Option("schedule", "choice", "chunks as one batch (parallel) or one after another "
           "(sequential)", SCHEDULES, id_omits="parallel"),
    Option("extend_batch_size", "int", "items extended against the cached prefix per call"),
    Option("precompile_bs", "ints", "batch sizes a short last batch is padded to, all "
           "compiled on first use (default: powers of two below the batch size, and it)"),
    Option("attention", "choice", "the attention kernels: by backend (auto), the tiled XLA "
           "kernels, Pallas splash (TPU) or cuDNN flash (GPU, bfloat16)", ATTENTIONS,
           id_omits="auto"),
)}


def batch_sizes(extend_batch_size, precompile_bs) -> tuple[int, list[int]]:
    """(B, sorted sizes that batches are padded to). Default sizes: powers of two below B,
    and B itself. The list must hold B (its largest size >= B)."""
    b = positive_int(extend_batch_size, "extend_batch_size")
    if precompile_bs is None:
        return b, [1 << i for i in range(b.bit_length()) if 1 << i < b] + [b]
    sizes = positive_ints(precompile_bs, "precompile_bs")
    problem = _short_sizes(b, sizes)
    if problem:
        raise problem
    return b, sizes


def _short_sizes(extend_batch_size, sizes: list[int]) -> MibenchError | None:
    """The one rule `precompile_bs` holds `extend_batch_size` (its largest size >= it)."""
    b = extend_batch_size
    if b and sizes[-1] < b:
        return MibenchError(f"{sizes} cannot hold extend_batch_size={b}: its largest size "
                            f"must be >= {b}", field="precompile_bs")
    return None
