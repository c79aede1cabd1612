"""What a workload materialises into: requests in token ids."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Request:
    """One scoring request in token ids: a query and its items."""

    query: tuple[int, ...]
    items: tuple[tuple[int, ...], ...]
