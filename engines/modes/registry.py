"""The mode registry: every engine's modes, each declared once with its typed options.

The engines check every call against it (`Mode.check`), the config validator builds a
case's option fields from `OPTIONS`, the matrix expands and names cases from it, the fake
engine and `mibench validate` list modes from it, and the README's mode table is checked
against it. Plain data, no jax: `mibench validate` stays fast.
"""

from __future__ import annotations

import dataclasses
import numbers

from mibench.errors import MibenchError

MASKS = ("dense", "segment", "auto")
SCHEDULES = ("parallel", "sequential")
# `auto` picks per backend (engines/attention_paths.py): cudnn on a GPU in bfloat16, pallas
# on a TPU at tp 1, else xla (the tiled kernels)
ATTENTIONS = ("auto", "xla", "pallas", "cudnn")
SEMANTICS = ("delimited", "plain")


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
    of ints >= 1). A value equal to `quiet` stays out of case ids (options added after case
    ids were published, so existing ids keep their meaning)."""

    name: str
    kind: str
    doc: str
    choices: tuple[str, ...] = ()
    quiet: object = None

    def check(self, value):
        if self.kind == "choice":
            return choice(value, self.name, self.choices)
        if self.kind == "int":
            return positive_int(value, self.name)
        return positive_ints(value, self.name)


# every option, in case-id order
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("mask", "choice", "how packed item rows are kept apart: a host-built T x T mask "
           "(dense), O(T) segment metadata (segment), or dense for short sequences (auto)",
           MASKS),
    Option("chunk_size", "int", "items per packed chunk"),
    Option("schedule", "choice", "chunks as one batch (parallel) or one after another "
           "(sequential)", SCHEDULES, quiet="parallel"),
    Option("extend_batch_size", "int", "items extended against the cached prefix per call"),
    Option("precompile_bs", "ints", "batch sizes a short last batch is padded to, all "
           "compiled on first use (default: powers of two below the batch size, and it)"),
    Option("attention", "choice", "the attention kernels: by backend (auto), the tiled XLA "
           "kernels, Pallas splash (TPU) or cuDNN flash (GPU, bfloat16)", ATTENTIONS,
           quiet="auto"),
)}


def resolve_semantics(semantics, delimiter) -> str:
    """The semantics a request is scored under: `delimited` (each item read after
    `query + [delimiter]`) or `plain` (after `query` alone). None derives it: delimited when
    there is a delimiter, else plain. A MibenchError naming `semantics` for any other value
    and for `delimited` without a delimiter."""
    if semantics is None:
        return "plain" if delimiter is None else "delimited"
    semantics = choice(semantics, "semantics", SEMANTICS)
    if semantics == "delimited" and delimiter is None:
        raise MibenchError("delimited semantics reads each item after `query + [delimiter]` "
                           "and needs a delimiter token; give one, or use semantics plain "
                           "(`query + item`)", field="semantics")
    return semantics


@dataclasses.dataclass(frozen=True)
class Mode:
    """One mode of one engine: its options with their defaults (None: the mode derives
    it), the semantics it scores, whether it needs the delimiter token as a separator
    between items whatever the semantics (the modes that pack items into one sequence),
    and a one-line doc."""

    name: str
    doc: str
    defaults: dict[str, object]
    semantics: tuple[str, ...] = SEMANTICS
    separator: bool = False

    resolve_semantics = staticmethod(resolve_semantics)  # for the harness (public: Mode)

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(self.defaults)

    def check(self, options: dict) -> dict:
        """The call's options, each valid, over the defaults; a MibenchError naming the
        first option the mode does not take or whose value is wrong."""
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            allowed = ", ".join(self.defaults) or "none"
            raise MibenchError(f"mode {self.name!r} does not take option(s) {unknown} "
                               f"(it takes: {allowed})", field=unknown[0])
        given = {k: OPTIONS[k].check(v) for k, v in options.items() if v is not None}
        return {**self.defaults, **given}

    def check_semantics(self, semantics, delimiter) -> str:
        """The call's semantics (`resolve_semantics`), or a MibenchError: naming `semantics`
        for one the mode does not score (or delimited without a delimiter), naming
        `delimiter` for a packing mode without its separator token."""
        semantics = resolve_semantics(semantics, delimiter)
        if semantics not in self.semantics:
            raise MibenchError(f"mode {self.name!r} does not score {semantics} semantics "
                               f"(it scores: {', '.join(self.semantics)})", field="semantics")
        if self.separator and delimiter is None:
            raise MibenchError(f"mode {self.name!r} packs items into one sequence and needs a "
                               "delimiter token to separate them, under plain semantics too "
                               "(where items attend to no delimiter)", field="delimiter")
        return semantics


CHUNK_SIZE = 32  # the seeds' chunk size
EXTEND_BATCH_SIZE = 12  # the seeds' extend batch size on a TPU v6e-1
AUTO_DENSE_MAX_T = 256  # mask `auto`: dense for padded sequences this short, else segment
TORCH_EXTEND_BATCH_SIZE = 64

MODES: dict[str, dict[str, Mode]] = {
    "jax": {m.name: m for m in (
        Mode("single", "one forward per item, batch 1, in order: the baseline",
             {"attention": "auto"}),
        Mode("packed", "every item in one sequence after the query, items kept apart by the "
             "mask", {"mask": "auto", "attention": "auto"}, separator=True),
        Mode("chunked", "items in chunks of chunk_size, each chunk a packed sequence with "
             "its own copy of the query",
             {"chunk_size": CHUNK_SIZE, "mask": "segment", "schedule": "parallel",
              "attention": "auto"}, separator=True),
        Mode("prefill_extend", "the query prefilled once, items extended in batches against "
             "its cached KV (shared, never copied per item)",
             {"extend_batch_size": EXTEND_BATCH_SIZE, "precompile_bs": None,
              "attention": "auto"}),
    )},
    "torch": {m.name: m for m in (
        Mode("single", "one transformers forward per item (eager attention): the oracle", {}),
        Mode("prefill_extend", "the query prefilled once, items extended in batches with a "
             "4D mask over the cached KV (SDPA)",
             {"extend_batch_size": TORCH_EXTEND_BATCH_SIZE}),
    )},
    # a server speaking SGLang's /v1/score (engines/http_engine.py): one request per call;
    # how the server scores is its own (mibench serve --mode); `single` so that parity's
    # `engines` check, which scores each engine's single mode, reaches it
    "http": {m.name: m for m in (
        Mode("single", "one POST /v1/score per request (query and all its items); the "
             "server's own mode scores them", {}),
    )},
}


def engine_modes(engine: str) -> dict[str, Mode]:
    """The modes of `engine`, or a MibenchError naming `engine`."""
    if engine not in MODES:
        raise MibenchError(f"unknown engine {engine!r} (known: {', '.join(MODES)})",
                           field="engine")
    return MODES[engine]


def batch_sizes(extend_batch_size, precompile_bs) -> tuple[int, list[int]]:
    """(B, sorted sizes that batches are padded to). Default sizes: powers of two below B,
    and B itself. The list must hold B (its largest size >= B)."""
    b = positive_int(extend_batch_size, "extend_batch_size")
    if precompile_bs is None:
        return b, [1 << i for i in range(b.bit_length()) if 1 << i < b] + [b]
    sizes = positive_ints(precompile_bs, "precompile_bs")
    if sizes[-1] < b:
        raise MibenchError(f"{sizes} cannot hold extend_batch_size={b}: its largest size "
                           f"must be >= {b}", field="precompile_bs")
    return b, sizes
