"""Reference figures: published results (the seeds' tables) that a report sets beside a
run, never mixed with measured rows. A set is read from YAML at the edge
(`harness.config.references`), stored in a run or compile artifact as its optional
`references` field (docs/artifacts.md) and matched to measured cases by
`harness.report.references`.

A set holds three kinds of entry, each quoted from its seed (`seed`, `section`, `quoted`:
the text exactly as the seed prints it) with the engine that produced it and the statistic
in the seed's own words (`source_engine`, `statistic`):
- `figures`: items/s of one mode on one machine (`hardware`, `tp`, `model`, `dtype`,
  `workload`, matched to mibench by `engine`, `mode`, `options`), or a run the seed reports
  without a figure (`outcome`: FAILED, OOM);
- `speedups`: a ratio the seed states between two of its runs (`of` over `over`), each side
  a figure of the set or a mode described inline;
- `parity`: a largest score difference the seed states for one check and model.

`unstated` names the values the source does not state (the file's author filled them in):
a ratio that leans on them says so. Fields added after run/2 artifacts first carried a set
(`seed`, `section`, `quoted`, `source_engine`, `statistic`, ...) are optional in the record,
so those artifacts still read; a reference file must give them (`load_references`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .base import Record

Finite = Annotated[PositiveFloat, Field(allow_inf_nan=False)]
# what `unstated` may name: the figure's fields a source can leave out
Unstated = Literal["model", "dtype", "engine", "mode", "options", "tp",
                   "workload.query_tokens", "workload.num_items", "workload.item_tokens"]
# the context `load_references` validates a hand-written file with: its entries must say
# where they come from, in the seed's words
FILE_CONTEXT = {"reference_file": True}
QUOTED_FIELDS = ("seed", "section", "quoted", "source_engine", "statistic")


class RefRecord(Record):
    """Strict: a reference file is hand-written, so `items_per_s: "10"` is an error."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False,
                              strict=True, frozen=True)


class RefHardware(RefRecord):
    """`label` as the source names it (TPU v6e-1); `platform` (tpu, gpu, cpu) and `kinds`,
    substrings of the device kind JAX or torch reports (`TPU v6 lite`), matched without
    case; `chips`: the devices of the machine the figure ran on."""

    label: str
    platform: Literal["tpu", "gpu", "cpu"]
    kinds: Annotated[list[str], Field(min_length=1)]
    chips: PositiveInt


class RefModel(RefRecord):
    """`name` as the source gives it (Qwen/Qwen3-0.6B); `shape`: the mibench preset of the
    same architecture and size (random weights cost what trained ones do)."""

    name: str
    shape: str


class RefWorkload(RefRecord):
    query_tokens: PositiveInt
    num_items: PositiveInt
    item_tokens: PositiveInt


class RefStatistic(RefRecord):
    """What the figure is over its runs: `said`, the seed's own words ("Peak Throughput",
    "Previous Peak (Turn 105)"; null: the seed names none), and `read_as`, how a report sets
    a measurement beside it: `best` (a peak: mibench's best timed run; a peak may be the
    best over several sessions, not one run), `unstated` (mibench's median and its best,
    both), `max` (a parity maximum)."""

    said: str | None
    read_as: Literal["best", "unstated", "max"]


class Quoted(RefRecord):
    """Where an entry comes from: the seed report, the section (table, row, turn) and the
    text exactly as printed there, the engine that produced it and its statistic, each in
    the seed's own words. Optional here (run/2 artifacts wrote sets without them); a
    reference file must give them."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    seed: str | None = None  # "000" ... "004"
    section: str | None = None
    quoted: str | None = None
    source_engine: str | None = None  # e.g. "PyTorch (Reference)", "feat/multi-item-scoring"
    statistic: RefStatistic | None = None
    source: str | None = None  # free text (sets written before `seed` and `section`)
    note: str | None = None

    @model_validator(mode="after")
    def _file_says_where(self, info: ValidationInfo):
        if info.context and info.context.get("reference_file"):
            missing = [k for k in QUOTED_FIELDS if getattr(self, k) is None]
            if missing:
                raise ValueError(f"{self.id}: a reference file states {', '.join(missing)} "
                                 "(the seed's own words; statistic.said may be null)")
        return self

    @property
    def where(self) -> str:
        """`seed 001, Results Matrix` (or the older free-text source)."""
        if self.seed is None:
            return self.source or "-"
        return f"seed {self.seed}, {self.section}"


class Situated(Quoted):
    """An entry measured on one machine, model and workload."""

    hardware: RefHardware
    tp: PositiveInt = 1
    model: RefModel
    dtype: Literal["float32", "bfloat16"]
    workload: RefWorkload
    unstated: list[Unstated] = []


class ReferenceFigure(Situated):
    """One published run: its items/s, or (`outcome`) what became of it without one."""

    engine: str  # a mibench engine name (jax, torch, http) the figure is matched to
    mode: str
    options: dict[str, int | str | list[int]] = {}  # the mode options the source states
    items_per_s: Finite | None = None  # None: the seed gives no figure (see `outcome`)
    approximate: bool = False  # the seed writes it with `~`
    latency_ms: Finite | None = None  # latency per item, as the seed states it
    time_s: Finite | None = None  # time for `workload.num_items` items, as stated
    timed_runs: PositiveInt | None = None
    outcome: str | None = None  # the seed's status words: FAILED ..., OOM ...

    @model_validator(mode="after")
    def _a_figure_or_an_outcome(self):
        if self.items_per_s is None and self.outcome is None:
            raise ValueError(f"{self.id}: give items_per_s, or the outcome the seed reports "
                             "without one")
        return self


class RefSide(RefRecord):
    """One side of a seed's speedup: a figure of the set (`figure`), or a mode described
    inline (`engine`, `mode`, `options`) on the speedup's own machine and workload."""

    figure: str | None = None
    engine: str | None = None
    mode: str | None = None
    options: dict[str, int | str | list[int]] = {}

    @model_validator(mode="after")
    def _one_way(self):
        if (self.figure is None) == (self.mode is None or self.engine is None):
            raise ValueError("name a figure, or an engine and mode (not both)")
        return self


class SpeedupFigure(Quoted):
    """A ratio the seed states: `of`'s items/s over `over`'s (a stated change of -1.02% is
    the ratio 0.9898). Inline sides run on the speedup's `hardware`, `tp`, `model`, `dtype`
    and `workload`, which it must then give."""

    ratio: Finite
    of: RefSide
    over: RefSide
    hardware: RefHardware | None = None
    tp: PositiveInt = 1
    model: RefModel | None = None
    dtype: Literal["float32", "bfloat16"] | None = None
    workload: RefWorkload | None = None
    unstated: list[Unstated] = []

    @model_validator(mode="after")
    def _inline_needs_context(self):
        inline = self.of.figure is None or self.over.figure is None
        if inline and None in (self.hardware, self.model, self.dtype, self.workload):
            raise ValueError(f"{self.id}: an inline side runs on the speedup's hardware, "
                             "model, dtype and workload: give them")
        return self


class ParityFigure(Situated):
    """A largest score difference the seed states (`max_diff`) for one check on one model;
    `check` and `variant` name the mibench check it corresponds to, `measures` what the
    seed's column says it is."""

    check: Literal["isolation", "modes", "engines"]
    variant: str | None = None
    measures: str  # the seed's column, e.g. "JAX serial vs torch serial max"
    max_diff: NonNegativeFloat


class ReferenceSet(RefRecord):
    """A named set of reference figures (e.g. the seeds'), their stated speedups and
    parity maxima."""

    name: str
    description: str | None = None
    figures: Annotated[list[ReferenceFigure], Field(min_length=1)]
    speedups: list[SpeedupFigure] = []
    parity: list[ParityFigure] = []

    @field_validator("figures", "speedups", "parity")
    @classmethod
    def _unique_ids(cls, entries):
        ids = [f.id for f in entries]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"id {twice[0]!r} is used twice")
        return entries

    @model_validator(mode="after")
    def _sides_name_figures(self):
        ids = {f.id for f in self.figures}
        for s in self.speedups:
            for side in (s.of, s.over):
                if side.figure is not None and side.figure not in ids:
                    raise ValueError(f"speedup {s.id}: no figure {side.figure!r} in the set")
        return self

    def figure(self, fig_id: str) -> ReferenceFigure:
        return next(f for f in self.figures if f.id == fig_id)
