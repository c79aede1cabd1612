"""What a mode costs, as pure arithmetic (no jax): the tokens one request runs through the
model, and the memory one request needs. The registry gives each mode its two functions
(`Mode.tokens`, `Mode.memory`); nothing else branches on a mode's name.

`prefix_len` is what every item follows (`query d` delimited, `query` plain); `options`
are a call's checked options over the mode's defaults.

Memory comes in two kinds of part. Host parts (the token lists, a dense mask built with
numpy) are always counted. With the model's facts (`Shape.model`, a ModelConfig, and
`Shape.dtype`) the device working set is counted too: the activations of the rows one
program runs, the attention scores of a dense mask or of a segment band, a prefix KV cache,
and the compilation of a new shape. On a CPU the device is the host, so `mibench serve` and
`mibench score` count both; `mibench validate` counts the host parts (a config may be
meant for an accelerator, whose memory `mibench compile` measures). The constants are
measured on the 2-core CPU with JAX 0.10.2 (XLA's `memory_analysis()` of each program
and the process's peak RSS); docs/cli.md has the estimate against measured peaks.
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
    """A request's shape: the prefix, the item count, the mean item length and the longest
    item (None: the mean); `model` (a ModelConfig: widths, heads, vocabulary) and `dtype`
    when the device working set is to be counted too (module docstring); `head_cols` for
    the work of the LM head (modes/work.py)."""

    prefix_len: int
    num_items: int
    item_len: float
    longest: float | None = None
    model: object | None = None
    dtype: str = "float32"
    head_cols: int | None = None  # LM-head columns per scored row (None: the vocabulary)

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


# ---- memory of one request -------------------------------------------------------------

# the option that decides each part a mode adds (a config error points at it when set)
PART_OPTION = {"dense mask": "mask", "attention scores": "mask", "band scores": "mask",
               "extend batch": "precompile_bs"}
F32 = 4
# dense_mask() holds its [B, T, T] result and two boolean temporaries at its peak (VmHWM:
# 3.02 T^2 bytes at T = 6656); the device copy of the mask is counted with the scores
MASK_HOST_COPIES = 3
# masked_attention: XLA plans three float32 [B, N, T, T] temporaries (scores, exponentials,
# probabilities; memory_analysis: 3.01-3.03 of them at T = 5120-12800 on tiny), and the
# probabilities' matmul packs a fourth (peak RSS at T = 9728: 4.1 of them with the mask)
SCORE_COPIES = 4
# ExtendBatch.dense_mask(): its result is the one full-size array (the prefix part is a
# broadcast view; the own-token part is [B, L, L])
EXTEND_MASK_HOST_COPIES = 1
# prefix_masked_attention: float32 [B, N, L, P + L] scores; XLA fuses the mask and the
# exponentials into them (memory_analysis on tiny, B 256, L 20, P 1024: temporaries 186 MiB
# dense against 53 MiB for the segment merge, 1.6 copies of the 81.6 MiB scores more; peak
# RSS rise 221 MiB, the estimate 1.37 times that)
EXTEND_SCORE_COPIES = 2
# segment packing: each item row's scores against its band window [B, N, rows, 2 * band],
# float32, and their exponentials (memory_analysis: 1.1-1.3 copies at band 256)
BAND_COPIES = 2
# a new shape's compilation on the host (peak RSS: 21-31 MiB once XLA is warm)
COMPILE_BYTES = 64 * 1024**2


def bucket_length(n: int) -> int:
    """Padded length for n tokens: powers of two (>= 16) up to 512, then multiples of 512
    (the one rule: modes/layout.py pads with it, the estimates here count with it)."""
    if n <= 512:
        return max(16, 1 << (max(n, 1) - 1).bit_length())
    return -(-n // 512) * 512


def item_bucket(n: int) -> int:
    """Padded item length: multiples of 4 up to 64 (little waste on short items), then
    `bucket_length`."""
    return -(-n // 4) * 4 if n <= 64 else bucket_length(n)


def row_bytes(model, dtype: str) -> float:
    """Device bytes one token row needs while a layer runs: the MLP's gate and product
    [F], q and the attention output in float32 [N * H] twice each, k and v [K * H], the
    residual [D] (2F + 4NH + 2KH + D floats; memory_analysis per row: tiny 2711 floats,
    small 5318, qwen3-0.6b 16040, this formula 3072, 6144, 17408). bfloat16 on the CPU
    takes twice the float32 bytes (XLA converts to float32 and keeps both: 22.0 KB a row
    on tiny against 10.8 KB)."""
    floats = (2 * model.intermediate_size + 4 * model.num_heads * model.head_dim
              + 2 * model.num_kv_heads * model.head_dim + model.hidden_size)
    return floats * F32 * (1 if dtype == "float32" else 2)


def _working_set(shape: Shape, rows: float) -> dict[str, float]:
    """Activations of `rows` token rows, a compilation, and for 16-bit weights on the CPU
    the float32 copy of the vocabulary matrix (memory_analysis: 143 MiB for tiny, V x D x
    4 = 148 MiB)."""
    model = shape.model
    parts = {"activations": rows * row_bytes(model, shape.dtype), "compile": COMPILE_BYTES}
    if shape.dtype != "float32":
        parts["weight copies"] = model.vocab_size * model.hidden_size * F32
    return parts


def _longest(shape: Shape) -> int:
    return math.ceil(shape.longest if shape.longest is not None else shape.item_len)


def packed_tokens(shape: Shape, items: int) -> tuple[int, int, int]:
    """(padded tokens T, padded prefix, band) of one packed sequence of `items` items, as
    modes/layout.py pads them."""
    band = item_bucket(max(_longest(shape), 1))
    prefix = bucket_length(shape.prefix_len)
    region = bucket_length(math.ceil(items * (shape.item_len + 1)) + 1)
    return prefix + -(-region // band) * band, prefix, band


def _packed_parts(shape: Shape, batch: int, items: int, mask: str,
                  dense_max_t: int) -> dict[str, float]:
    """B packed sequences of `items` items each: the dense mask on the host; with the
    model, the activations and the dense or band attention scores."""
    t, prefix, band = packed_tokens(shape, items)
    dense = mask == "dense" or (mask == "auto" and t <= dense_max_t)
    parts = {"dense mask": MASK_HOST_COPIES * batch * t * t} if dense else {}
    if shape.model is None:
        return parts
    heads = shape.model.num_heads
    if dense:
        scores = batch * t * t * (SCORE_COPIES * heads * F32 + 1)  # + the mask's device copy
        parts["attention scores"] = scores
    else:
        parts["band scores"] = BAND_COPIES * batch * heads * (t - prefix) * 2 * band * F32
    return {**parts, **_working_set(shape, batch * t)}


def memory_none(shape: Shape, options: dict) -> dict[str, float]:
    """Nothing beyond the token lists (a server's memory is its own)."""
    return {}


def memory_single(shape: Shape, options: dict) -> dict[str, float]:
    """`single`: one sequence at a time, `prefix + item` padded (device parts only)."""
    if shape.model is None:
        return {}
    return _working_set(shape, bucket_length(shape.prefix_len + _longest(shape)))


def memory_packed(shape: Shape, options: dict, dense_max_t: int) -> dict[str, float]:
    """`packed`: one sequence of every item; with mask dense (or auto when that is dense)
    the B x T x T mask on the host and the T x T scores of every head on the device."""
    return _packed_parts(shape, 1, shape.num_items, options.get("mask", "auto"), dense_max_t)


def memory_chunked(shape: Shape, options: dict, dense_max_t: int) -> dict[str, float]:
    """`chunked`: one packed sequence per chunk, every chunk at once when the schedule is
    parallel."""
    per = min(options.get("chunk_size") or 1, max(shape.num_items, 1))
    batch = math.ceil(shape.num_items / per) if options.get("schedule") == "parallel" else 1
    return _packed_parts(shape, batch, per, options.get("mask", "segment"), dense_max_t)


def memory_extend(shape: Shape, options: dict) -> dict[str, float]:
    """`prefill_extend`: the padded token arrays of one extend batch (and with mask dense
    the largest batch's [B, L, P + L] mask); with the model, the prefix KV cache, the
    activations of the prefill or of the largest batch that is run (every `precompile_bs`
    size runs once on zeros), whichever is larger, and with mask dense that batch's scores
    of every head against [prefix | own tokens]."""
    b = min(int(options.get("extend_batch_size") or 1), max(shape.num_items, 1))
    sizes = [s for s in (options.get("precompile_bs") or [b]) if s >= b] or [b]
    parts = {"extend batch": min(sizes) * math.ceil(shape.item_len) * 8}
    prefix = bucket_length(shape.prefix_len)
    length = item_bucket(max(_longest(shape), 1))
    dense = options.get("mask") == "dense"
    extend_rows = max(sizes) * length
    if dense:
        parts["dense mask"] = EXTEND_MASK_HOST_COPIES * extend_rows * (prefix + length)
    model = shape.model
    if model is None:
        return parts
    if dense:  # + the mask's device copy
        parts["attention scores"] = extend_rows * (prefix + length) * (
            EXTEND_SCORE_COPIES * model.num_heads * F32 + 1)
    width = 2 if shape.dtype != "float32" else F32
    cache = 2 * model.num_layers * prefix * model.num_kv_heads * model.head_dim * width
    return {**parts, "kv cache": cache, **_working_set(shape, max(prefix, extend_rows))}
