"""One case's workload, fully expanded (no lists left to expand)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    """Either a generated request (`query_tokens`, `num_items`, `item_tokens`) or the
    requests of a JSONL file (`requests`, an absolute path).

    `item_tokens` is a fixed length or an inclusive (min, max) range drawn uniformly.
    `tokens`: `random` (seeded ids avoiding the delimiter and special ids) or `constant`
    (the seeds' query of 1s and items of 2s). `semantics`: `delimited`, `plain`, or None
    (the engines' default: delimited when a delimiter is given, else plain).
    """

    label_token_ids: tuple[int, ...]
    query_tokens: int | None = None
    num_items: int | None = None
    item_tokens: int | tuple[int, int] | None = None
    tokens: str = "random"
    delimiter: int | None = None
    apply_softmax: bool = False
    semantics: str | None = None
    seed: int = 0
    requests: str | None = None

    def as_dict(self) -> dict:
        """JSON-ready form for artifacts: a range becomes {dist: uniform, min, max}; an unset
        `semantics` stays out (artifacts written before it existed compare equal)."""
        out = dataclasses.asdict(self)
        if self.semantics is None:
            del out["semantics"]
        out["label_token_ids"] = list(self.label_token_ids)
        if isinstance(self.item_tokens, tuple):
            lo, hi = self.item_tokens
            out["item_tokens"] = {"dist": "uniform", "min": lo, "max": hi}
        return out

    def replace(self, **changes) -> WorkloadSpec:
        return dataclasses.replace(self, **changes)
