"""The mode registry: every engine's modes, each one `Mode` object declared once here.

A mode holds its typed options and defaults, the semantics it scores, its scorer, its
token accounting and host-memory estimate, and the option sets its tests run. The engines
dispatch every call through it (`Mode.score`, `Mode.num_tokens`), the config validator
builds a case's option fields from `OPTIONS` and estimates memory with `Mode.host_bytes`,
the matrix expands and names cases from it, parity and the report read its speedup
baseline, the engines its resolved options, the tests loop over it, and the docs' mode
tables are checked against it (tests/test_docs_modes.py). `MODES` is a registry
(mibench/registry.py) of each engine's registry of modes. Adding a mode: docs/design.md.
Plain data, no jax (scorers load on first use): `mibench validate` stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Sequence

from mibench.errors import MibenchError
from mibench.registry import Registry

from ..request import SEMANTICS, resolve_semantics
from . import accounting
from . import work as costs
from .options import OPTIONS, _short_sizes, batch_sizes


@dataclasses.dataclass(frozen=True)
class Invariance:
    """One measurement of a mode's `batch_invariance` by the invariance job
    (harness/jobs/invariance.py, which score-checks runs too): the mode's options, the
    placements of the target item (items, position of it) that vary the mode's batching,
    that batching in words, and the deliberate leak (engines/leaks.py) whose control must
    be caught."""

    options: dict
    placements: tuple[tuple[int, int], ...]
    batching: str
    leak: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mode:
    """One mode of one engine, everything about it in one place: its options with their
    defaults (None: the mode derives it), the semantics it scores, whether it needs the
    delimiter token between items whatever the semantics (the modes that pack items into
    one sequence), its scorer, its token accounting and host-memory estimate
    (modes/accounting.py), the option sets its tests run (`examples`), and a one-line doc.

    `scorer` is `"module:function"` under `mibench.engines` (imported on the first call, so
    the registry stays free of jax) or the function itself: `scorer(engine, req, **options)`
    with the options checked and complete, returning scores [items, labels]. None: the
    engine scores the mode itself (the http engine sends the request on).
    """

    name: str
    doc: str
    defaults: dict[str, object]
    scorer: str | Callable | None = None
    tokens: Callable[..., int] = accounting.tokens_serial
    memory: Callable[..., dict[str, float]] = accounting.memory_none
    semantics: tuple[str, ...] = SEMANTICS
    needs_delimiter: bool = False
    examples: tuple[dict, ...] = ({},)
    # `"module:function"` timing each of the mode's batches in one synced pass
    # (`batch_times(engine, req, **options) -> list[float]`); None: no batches
    batch_timer: str | None = None
    # FLOPs and HBM bytes of one pass by mibench's formulas (modes/work.py), for the
    # roofline bound; None: no formula
    work: Callable[..., costs.Work | None] = costs.work_none

    resolve_semantics = staticmethod(resolve_semantics)  # for the harness (public: Mode)

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(self.defaults)

    def problems(self, options: dict, semantics=None, delimiter=None) -> list[MibenchError]:
        """Every mode rule a call breaks, each a MibenchError naming its field (an option,
        `semantics` or `delimiter`), semantics first: the rules `check` and
        `check_semantics` raise the first of, and the config reports under its own keys."""
        return self.semantics_problems(semantics, delimiter) + self.option_problems(options)

    def option_problems(self, options: dict) -> list[MibenchError]:
        """The options the mode does not take, the values that are wrong, and a
        `precompile_bs` that cannot hold `extend_batch_size`."""
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            allowed = ", ".join(self.defaults) or "none"
            return [MibenchError(f"mode {self.name!r} does not take option(s) {unknown} "
                                 f"(it takes: {allowed})", field=unknown[0])]
        found = []
        for k, v in options.items():
            try:
                if v is not None:
                    OPTIONS[k].check(v)
            except MibenchError as e:
                found.append(e)
        sizes = options.get("precompile_bs")
        if not found and sizes is not None:
            b = self.with_defaults(options).get("extend_batch_size")
            problem = _short_sizes(b, OPTIONS["precompile_bs"].check(sizes))
            found += [problem] if problem else []
        return found

    def semantics_problems(self, semantics, delimiter) -> list[MibenchError]:
        """Naming `semantics` for one the mode does not score (or delimited without a
        delimiter), naming `delimiter` for a packing mode without its separator token."""
        try:
            semantics = resolve_semantics(semantics, delimiter)
        except MibenchError as e:
            return [e]
        if semantics not in self.semantics:
            return [MibenchError(f"mode {self.name!r} does not score {semantics} semantics "
                                 f"(it scores: {', '.join(self.semantics)})",
                                 field="semantics")]
        if self.needs_delimiter and delimiter is None:
            return [MibenchError(f"mode {self.name!r} packs items into one sequence and "
                                 "needs a delimiter token to separate them, under plain "
                                 "semantics too (where items attend to no delimiter)",
                                 field="delimiter")]
        return []

    def check(self, options: dict) -> dict:
        """The call's options, each valid, over the defaults; a MibenchError naming the
        first option the mode does not take or whose value is wrong (`option_problems`)."""
        problems = self.option_problems(options)
        if problems:
            raise problems[0]
        given = {k: OPTIONS[k].check(v) for k, v in options.items() if v is not None}
        return {**self.defaults, **given}

    def check_semantics(self, semantics, delimiter) -> str:
        """The call's semantics (`resolve_semantics`), or the first of
        `semantics_problems`."""
        problems = self.semantics_problems(semantics, delimiter)
        if problems:
            raise problems[0]
        return resolve_semantics(semantics, delimiter)

    def score(self, engine, req, **options):
        """Scores [items, labels] of a validated request (engines/request.py): the options
        and the request's semantics checked, then the scorer."""
        options = self.check(options)
        self.check_semantics(req.semantics, req.delimiter)
        if self.scorer is None:
            raise MibenchError(f"mode {self.name!r} has no scorer here", field="mode")
        return self._scorer()(engine, req, **options)

    def _scorer(self) -> Callable:
        if callable(self.scorer):
            return self.scorer
        return _load(self.scorer)

    def batch_times(self, engine, req, **options) -> list[float] | None:
        """Seconds of each of the mode's batches in one pass, each synced before the next
        (None: the mode runs no batches); the options and semantics checked as for
        `score`."""
        if self.batch_timer is None:
            return None
        options = self.check(options)
        self.check_semantics(req.semantics, req.delimiter)
        return _load(self.batch_timer)(engine, req, **options)

    def num_tokens(self, prefix_len: int, item_lens: Sequence[int], options: dict,
                   semantics: str) -> int:
        """Tokens one request runs through the model, padding excluded
        (`ScoreResult.num_tokens`, for every engine)."""
        return self.tokens(prefix_len, list(item_lens), self.with_defaults(options),
                           semantics)

    def host_bytes(self, shape: accounting.Shape, options: dict) -> dict[str, float]:
        """Bytes one request of `shape` needs, by part: its token lists, then what the mode
        itself builds on the host (a dense mask, an extend batch) and, when `shape.model` is
        given, its device working set (activations, attention scores, a KV cache, a
        compilation: modes/accounting.py)."""
        return {"token lists": accounting.token_list_bytes(shape),
                **self.memory(shape, self.with_defaults(options))}

    def memory_fit(self, shape: accounting.Shape | None, options: dict, limit: float,
                   extra: dict[str, float] | None = None) -> tuple[dict[str, float], bool]:
        """The one check of the memory estimate (the config's, `mibench score`'s and `mibench
        serve`'s): the parts of `host_bytes` for `shape` (None: none, e.g. a requests
        file's requests) and of `extra` (a requests file's token lists, a load generator's
        bodies), and whether together they fit in `limit` bytes."""
        parts = {**(self.host_bytes(shape, options) if shape is not None else {}),
                 **(extra or {})}
        return parts, sum(parts.values()) <= limit

    def work_per_pass(self, shape: accounting.Shape, options: dict) -> costs.Work | None:
        """FLOPs, HBM bytes and host->device mask bytes of one pass of `shape` (with its
        `model` and `dtype`; modes/work.py), or None where the mode has no formula."""
        return self.work(shape, self.with_defaults(options))

    def with_defaults(self, options: dict) -> dict:
        """The options this mode takes (others ignored), over its defaults."""
        return {**self.defaults, **{k: v for k, v in options.items()
                                    if k in self.defaults and v is not None}}

    # the mode's edges, read by the harness rather than naming modes:
    # `(engine, mode)` whose items/s this mode's speedup is stated against (the report's
    # model matrix); None: the mode is no faster path of another (a baseline itself)
    speedup_baseline: tuple[str, str] | None = None
    # whether parity's `speedup` check judges this mode's items/s over its baseline's (at
    # `parity.min_speedup`): the mode mibench is built to prove fast
    speedup_gated: bool = False
    # how an item's scores are bound to stay the same whatever else the request holds
    # (its neighbours, their order, a twin of it): `bitwise` only where the code makes it so
    # (one forward of the same shape per item), else `tolerance`: the layout around the item
    # changes with its neighbours and XLA's reductions run in another order, within the
    # `modes` tolerance (measured: docs/parity.md, "Batch invariance"). Parity's `order`
    # and `duplicates` checks judge each mode by it.
    batch_invariance: str = "tolerance"
    # how the invariance and score-checks jobs measure `batch_invariance`: one row each
    # (none: the mode is not measured there, as the http engine's)
    invariance: tuple[Invariance, ...] = ()
    # `"module:function"` under `mibench.engines`, or the function: what a call with the
    # options runs on an engine (`resolves(engine, options) -> dict`, the case record's
    # `resolved`: an attention path); None: nothing to say
    resolves: str | Callable | None = None

    def resolved_options(self, engine, options: dict) -> dict:
        """What a call of this mode with `options` (over the defaults) runs on `engine`."""
        if self.resolves is None:
            return {}
        resolve = self.resolves if callable(self.resolves) else _load(self.resolves)
        return resolve(engine, self.with_defaults(options))


def _load(target: str) -> Callable:
    """The function `"module:function"` under `mibench.engines`."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(f"mibench.engines.{module}"), attr)


def resolves_to(**resolved) -> Callable[..., dict]:
    """A `Mode.resolves` that runs the same on every engine and whatever the options."""
    return lambda engine, options: dict(resolved)


# the seeds' tables' chunk size (seeds 001, 004: ~16 parallel chunks of ~32 items at TP 4;
# seed 003 names 2 as a branch's default, and seed 004 labels the 141 items/s peak Chunk=512)
CHUNK_SIZE = 32
EXTEND_BATCH_SIZE = 12  # the seeds' extend batch size on a TPU v6e-1
# mask `auto`: dense for padded sequences this short, else segment (measured:
# modes/packed.py)
AUTO_DENSE_MAX_T = 256
TORCH_EXTEND_BATCH_SIZE = 64
# the target item's placements (items, position) the invariance job varies batching by
NEIGHBOURS = ((5, 0), (5, 4))
PACKED = ((4, 0), (4, 3), (9, 4))
CHUNKS = ((4, 0), (4, 3), (9, 5), (9, 8))
EXTEND = ((4, 0), (4, 3), (9, 4), (9, 8), (13, 12))


# engine -> its modes: a registry of registries, so an unknown engine and an unknown mode
# of a known engine are each the one registry error (`engine_mode`)
MODES: Registry[Registry[Mode]] = Registry("engine", field="engine")


def _modes(engine: str, *modes: Mode) -> None:
    """`engine`'s modes, registered under its name (in the order the docs list them)."""
    registry = MODES.add(engine, Registry("mode", field="mode", where=f"for engine {engine}"))
    for m in modes:
        registry.add(m.name, m)


_modes(
    "jax",
    Mode(name="single", doc="one forward per item, batch 1, in order: the baseline",
         defaults={"attention": "auto"}, scorer="modes.single:score_single",
         memory=accounting.memory_single, work=costs.work_single,
         batch_invariance="bitwise", resolves="jax_engine:resolved_attention",
         invariance=(Invariance({}, NEIGHBOURS, "other items in the request", "scores"),)),
    Mode(name="packed", doc="every item in one sequence after the query, items kept "
         "apart by the mask", defaults={"mask": "auto", "attention": "auto"},
         scorer="modes.packed:score_packed", tokens=accounting.tokens_packed,
         memory=functools.partial(accounting.memory_packed, dense_max_t=AUTO_DENSE_MAX_T),
         work=functools.partial(costs.work_packed, dense_max_t=AUTO_DENSE_MAX_T),
         needs_delimiter=True,
         examples=({"mask": "dense"}, {"mask": "segment"}, {"mask": "auto"}),
         speedup_baseline=("jax", "single"), speedup_gated=True,
         resolves="jax_engine:resolved_attention",
         invariance=tuple(Invariance({"mask": m}, PACKED, "packed with 3 or 8 neighbours, "
                                     "first, middle, last", f"{m} mask")
                          for m in ("dense", "segment"))),
    Mode(name="chunked", doc="items in chunks of chunk_size, each chunk a packed sequence "
         "with its own copy of the query",
         defaults={"chunk_size": CHUNK_SIZE, "mask": "segment", "schedule": "parallel",
                   "attention": "auto"},
         scorer="modes.packed:score_chunked", tokens=accounting.tokens_chunked,
         memory=functools.partial(accounting.memory_chunked,
                                  dense_max_t=AUTO_DENSE_MAX_T),
         work=functools.partial(costs.work_chunked, dense_max_t=AUTO_DENSE_MAX_T),
         needs_delimiter=True,
         examples=({"chunk_size": 3}, {"chunk_size": 4, "mask": "dense"},
                   {"chunk_size": 3, "schedule": "sequential"},
                   {"chunk_size": 2, "mask": "dense", "schedule": "sequential"}),
         speedup_baseline=("jax", "single"), resolves="jax_engine:resolved_attention",
         invariance=(Invariance({"chunk_size": 4, "mask": "segment"}, CHUNKS, "chunks of 4 "
                                "in one batch: first and last in the first chunk, inside a "
                                "middle one, a last chunk alone", "segment mask"),
                     Invariance({"chunk_size": 4, "mask": "dense", "schedule": "sequential"},
                                CHUNKS, "chunks of 4 one after another (padded alike), as "
                                "above", "dense mask"))),
    Mode(name="prefill_extend", doc="the query prefilled once, items extended in batches "
         "against its cached KV (shared, never copied per item)",
         defaults={"extend_batch_size": EXTEND_BATCH_SIZE, "precompile_bs": None,
                   "mask": "segment", "attention": "auto"},
         scorer="modes.extend:score_prefill_extend", tokens=accounting.tokens_prefix_once,
         memory=accounting.memory_extend, batch_timer="modes.extend:extend_batch_times",
         work=lambda shape, options: costs.work_extend(shape, options, batch_sizes),
         examples=({"extend_batch_size": 3},
                   {"extend_batch_size": 4, "precompile_bs": [4]},
                   {"extend_batch_size": 3, "mask": "dense"}),
         speedup_baseline=("jax", "single"), resolves="jax_engine:resolved_attention",
         invariance=(Invariance({"extend_batch_size": 4, "precompile_bs": [1, 2, 4]}, EXTEND,
                                "extend batches of 4: positions 0 and 3, a later batch, a "
                                "last batch padded to bucket 1", "LM head rows"),
                     Invariance({"extend_batch_size": 4, "mask": "dense"}, EXTEND,
                                "as above, the dense extend mask", "LM head rows"),
                     Invariance({"extend_batch_size": 1}, ((4, 0), (9, 8)),
                                "one item per extend batch", "LM head rows"))),
)
_modes(
    "torch",
    Mode(name="single", doc="one transformers forward per item (eager attention): the "
         "oracle", defaults={}, scorer="torch_engine:score_single",
         memory=accounting.memory_single, batch_invariance="bitwise",
         resolves=resolves_to(attention="eager"),
         invariance=(Invariance({}, NEIGHBOURS, "other items in the request", "scores"),)),
    Mode(name="prefill_extend", doc="the query prefilled once, items extended in batches "
         "with a 4D mask over the cached KV (SDPA)",
         defaults={"extend_batch_size": TORCH_EXTEND_BATCH_SIZE},
         scorer="torch_engine:score_prefill_extend", tokens=accounting.tokens_prefix_once,
         memory=accounting.memory_extend, examples=({"extend_batch_size": 3},),
         speedup_baseline=("jax", "single"), resolves=resolves_to(attention="sdpa"),
         invariance=(Invariance({"extend_batch_size": 4}, EXTEND, "extend batches of 4 (the "
                                "reference's prefix-cached batches)", "scores"),)),
)
# a server speaking SGLang's /v1/score (engines/http_engine.py): one request per call;
# how the server scores is its own (mibench serve --mode); `single` so that parity's
# `engines` check, which scores each engine's single mode, reaches it
_modes(
    "http",
    Mode(name="single", doc="one POST /v1/score per request (query and all its items); "
         "the server's own mode scores them", defaults={}),
)


def engine_modes(engine: str) -> Registry[Mode]:
    """The modes of `engine`, or a MibenchError naming `engine` (`engine_mode`'s)."""
    return MODES.lookup(engine)


def engine_mode(engine: str, mode) -> Mode:
    """The mode `mode` of `engine`, or a MibenchError naming `mode` (or `engine`): the one
    place an unknown engine or mode is refused (the config, the CLI and the server re-key
    the error with `MibenchError.under`, same message)."""
    return MODES.lookup(engine).lookup(mode)
