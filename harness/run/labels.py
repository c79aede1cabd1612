"""The label a server's (or an engine's) parity checks are recorded under."""

from __future__ import annotations

from ..config.keys import case_id, id_part
from ..config.matrix import CaseSpec


def engine_label(case: CaseSpec) -> str:
    """`ENGINE/single/tp=N` (a case id: keys.case_id), and for a launched server its name
    and arguments before tp."""
    parts = []
    launch = case.http.launch if case.http is not None else None
    if launch is not None:
        parts += ([id_part("server", launch.name)] if launch.name else []) + [
            id_part(k, v) for k, v in launch.args]
    return case_id(case.engine_key, "single", parts)
