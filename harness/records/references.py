"""Reference figures: published results (the seeds' tables) that a report sets beside a
run, never mixed with measured rows. A set is read from YAML at the edge
(`harness.config.references`), stored in a run artifact as its optional `references`
field (docs/artifacts.md) and matched to measured cases by `harness.report.references`.

Each figure says where it comes from (`source`), where it ran (`hardware`, `tp`), what
(`model`, `dtype`, `workload`), how (`engine`, `mode`, `options`) and its items/s.
`unstated` names the values the source does not state (the file's author filled them in):
a ratio that leans on them says so.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt, field_validator

from mibench.harness.records.base import Record

Finite = Annotated[PositiveFloat, Field(allow_inf_nan=False)]
# what `unstated` may name: the figure's fields a source can leave out
Unstated = Literal["model", "dtype", "engine", "mode", "options", "tp",
                   "workload.query_tokens", "workload.num_items", "workload.item_tokens"]


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


class ReferenceFigure(RefRecord):
    """One published figure: items/s of one mode on one machine."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    source: str  # the report it is quoted from, and where in it
    hardware: RefHardware
    tp: PositiveInt = 1
    model: RefModel
    dtype: Literal["float32", "bfloat16"]
    workload: RefWorkload
    engine: str  # a mibench engine name (jax, torch, http) the figure is matched to
    mode: str
    options: dict[str, int | str | list[int]] = {}  # the mode options the source states
    items_per_s: Finite
    timed_runs: PositiveInt | None = None
    unstated: list[Unstated] = []
    note: str | None = None


class ReferenceSet(RefRecord):
    """A named set of reference figures (e.g. the seeds')."""

    name: str
    description: str | None = None
    figures: Annotated[list[ReferenceFigure], Field(min_length=1)]

    @field_validator("figures")
    @classmethod
    def _unique_ids(cls, figures):
        ids = [f.id for f in figures]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"figure id {twice[0]!r} is used twice")
        return figures
