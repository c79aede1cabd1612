"""What a mode costs, as pure arithmetic (no jax): the tokens one request runs through the
model, and the host memory one request needs at least. The registry gives each mode its
two functions (`Mode.tokens`, `Mode.memory`); nothing else branches on a mode's name.

`prefix_len` is what every item follows (`query d` delimited, `query` plain); `options`
are a call's checked options over the mode's defaults.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

# host bytes per token id and per item while a request is scored, measured (tracemalloc)
# on the generated workload: the numpy draw, the Python ints and tuples of the request,
# the lists of the prepared call and the engine's validated request
TOKEN_BYTES, ITEM_BYTES = 56, 160


@dataclasses.dataclass(frozen=True)
class Shape:
    """A request's shape: the prefix, the item count and the mean item length."""

    prefix_len: int
    num_items: int
    item_len: float

    @property
    def tokens(self) -> float:
        return self.prefix_len + self.num_items * self.item_len


def token_list_bytes(shape: Shape) -> float:
    """The request's token lists on the host, whatever the mode."""
    return shape.tokens * TOKEN_BYTES + shape.num_items * ITEM_BYTES


# ---- tokens run through the model (ScoreResult.num_tokens, padding excluded) ------------


def tokens_serial(prefix_len: int, item_lens: Sequence[int], options: dict,
                  semantics: str) -> int:
    """`single`: every `prefix + item`, so the prefix once per item."""
    return len(item_lens) * prefix_len + sum(item_lens)


def tokens_prefix_once(prefix_len: int, item_lens: Sequence[int], options: dict,
                       semantics: str) -> int:
    """`prefill_extend`: the prefix once, then each item."""
    return prefix_len + sum(item_lens)


def tokens_packed(prefix_len: int, item_lens: Sequence[int], options: dict,
                  semantics: str, chunks: int = 1) -> int:
    """`packed`: the prefix once and each item with its delimiter; under plain semantics
    also the delimiter after the query (the packed sequence is `query d item1 d ...`
    either way)."""
    lead = 1 if semantics == "plain" else 0
    return chunks * (prefix_len + lead) + sum(item_lens) + len(item_lens)


def tokens_chunked(prefix_len: int, item_lens: Sequence[int], options: dict,
                   semantics: str) -> int:
    """`chunked`: as `packed`, with one prefix per chunk of `chunk_size` items."""
    chunks = -(-len(item_lens) // options["chunk_size"])
    return tokens_packed(prefix_len, item_lens, options, semantics, chunks)


# ---- host memory of one request ---------------------------------------------------------

# the option that decides each part a mode adds (a config error points at it when set)
PART_OPTION = {"dense mask": "mask", "extend batch": "precompile_bs"}


def memory_none(shape: Shape, options: dict) -> dict[str, float]:
    """Nothing beyond the token lists."""
    return {}


def _dense(t: float, batch: int, mask: str, dense_max_t: int) -> dict[str, float]:
    if mask == "dense" or (mask == "auto" and t <= dense_max_t):
        return {"dense mask": batch * t * t}
    return {}


def memory_packed(shape: Shape, options: dict, dense_max_t: int) -> dict[str, float]:
    """`packed`: the B x T x T boolean mask of one sequence with mask dense (or auto when
    that is dense)."""
    t = shape.prefix_len + shape.num_items * (shape.item_len + 1)
    return _dense(t, 1, options.get("mask", "auto"), dense_max_t)


def memory_chunked(shape: Shape, options: dict, dense_max_t: int) -> dict[str, float]:
    """`chunked`: one mask per chunk, every chunk at once when the schedule is parallel."""
    per = min(options.get("chunk_size") or 1, max(shape.num_items, 1))
    batch = math.ceil(shape.num_items / per) if options.get("schedule") == "parallel" else 1
    t = shape.prefix_len + per * (shape.item_len + 1)
    return _dense(t, batch, options.get("mask", "segment"), dense_max_t)


def memory_extend(shape: Shape, options: dict) -> dict[str, float]:
    """`prefill_extend`: the padded token arrays of one extend batch."""
    b = min(int(options.get("extend_batch_size") or 1), max(shape.num_items, 1))
    sizes = [s for s in (options.get("precompile_bs") or [b]) if s >= b] or [b]
    return {"extend batch": min(sizes) * math.ceil(shape.item_len) * 8}
