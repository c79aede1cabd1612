"""The label a server's (or an engine's) parity checks are recorded under."""

from __future__ import annotations

from ..case_kinds import kind_of
from ..config.keys import case_id
from ..config.matrix import CaseSpec


def engine_label(case: CaseSpec) -> str:
    """`ENGINE/single/tp=N` (a case id: keys.case_id), and for a launched server its name
    and arguments before tp."""
    return case_id(case.engine_key, "single", kind_of(case.engine).label_parts(case))
