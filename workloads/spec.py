"""One case's workload, fully expanded (no lists left to expand): what a case's spec holds
and what its record writes (harness/records/case.py names it `WorkloadRecord`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_serializer

# as the artifact records (harness/records/base.py Record), and frozen: a spec is hashable
_CONFIG = dict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)


class ItemRange(BaseModel):
    """Item lengths drawn uniformly from an inclusive range."""

    model_config = ConfigDict(**_CONFIG)

    dist: Literal["uniform"]
    min: int
    max: int


class Sparse(BaseModel):
    """A model whose dump holds only the fields that were set (given, read or assigned):
    the artifact's records (harness/records/case.py) and the workload."""

    @model_serializer(mode="wrap")
    def _only_set(self, handler):
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}

    def as_dict(self) -> dict:
        """The JSON form (what the artifact holds)."""
        return self.model_dump(mode="json")


class WorkloadSpec(Sparse):
    """Either a generated request (`query_tokens`, `num_items`, `item_tokens`) or the
    requests of a JSONL file (`requests`, an absolute path).

    `item_tokens` is a fixed length or an inclusive range (`ItemRange`) drawn uniformly.
    `tokens`: `random` (seeded ids avoiding the delimiter and special ids) or `constant`
    (the seeds' query of 1s and items of 2s). `semantics`: `delimited`, `plain`, or None
    (the engines' default: delimited when a delimiter is given, else plain).

    Sparse: its JSON holds exactly the keys it was given, nulls included, and no other, so
    an artifact written before a key existed (`semantics`) reads and writes back without
    it; the config's expansion (config/spec.py `Workload.expand`) gives every key but an
    unset `semantics`.
    """

    model_config = ConfigDict(**_CONFIG, title="WorkloadRecord", json_schema_extra={
        "description": "The expanded workload (mibench.workloads.WorkloadSpec.as_dict)."})

    label_token_ids: tuple[int, ...]
    query_tokens: int | None = None
    num_items: int | None = None
    item_tokens: int | ItemRange | None = None
    tokens: str = "random"
    delimiter: int | None = None
    apply_softmax: bool = False
    semantics: str | None = None  # absent: the engines' default
    seed: int = 0
    requests: str | None = None  # a JSONL file of requests instead of generated ones

    def replace(self, **changes) -> WorkloadSpec:
        """This spec with `changes` (valid values: a range is an ItemRange)."""
        return self.model_copy(update=changes)
