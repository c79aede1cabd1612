"""Formatting for the Markdown exporters: tables as data, numbers and labels as text.

No statistics here: every number arrives computed (harness.stats, significance, compare).
"""

from __future__ import annotations

import dataclasses

from mibench.harness.config.matrix import model_name, short
from mibench.harness.records import CaseRecord, RunRecord
from mibench.harness.stats.significance import BOOTSTRAP, MWU, Test

OOM_MARKERS = ("RESOURCE_EXHAUSTED", "out of memory", "Out of memory", "OOM")


@dataclasses.dataclass
class Table:
    """A Markdown table: `align` holds "l" or "r" per column."""

    header: list[str]
    rows: list[list[str]]
    align: list[str] | None = None
    title: str | None = None
    note: str | None = None

    def markdown(self) -> str:
        align = self.align or ["l"] * len(self.header)
        rule = ["---:" if a == "r" else "---" for a in align]
        lines = [_row(self.header), _row(rule)] + [_row(r) for r in self.rows]
        return "\n".join(lines)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def num(x: float | None, digits: int = 2) -> str:
    """Two decimals like the seeds' tables; three significant digits below 1."""
    if x is None:
        return "-"
    if abs(x) >= 1 or x == 0:
        return f"{x:,.{digits}f}"
    return f"{x:.3g}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def times(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def sci(x: float | None) -> str:
    return "-" if x is None else f"{x:.2g}"


def size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"


def options(case: CaseRecord) -> str:
    """Mode options as `key=value`, values as in case ids (`precompile_bs=1,2,4,8`, `1-4`)."""
    return ", ".join(f"{k}={short(v)}" for k, v in case.params.items()) or "-"


def mode_label(case: CaseRecord) -> str:
    opts = options(case)
    return f"{case.engine}/{case.mode}" + (f" ({opts})" if opts != "-" else "")


def model_label(case: CaseRecord) -> str:
    return model_name(case.model.get("path", "?"))


def hardware(record: RunRecord) -> str:
    d = record.provenance.devices
    if d.platform == "cpu":
        return f"CPU ({record.provenance.host.get('cpus') or '?'} cores)"
    return f"{d.kind or d.platform or '?'} x{d.count or '?'}"


def first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def status(case: CaseRecord) -> str:
    """`ok`, `skipped: why`, `**FAILED** Type: first line`, `**OOM** ...` (seeds' wording)."""
    if case.status == "ok":
        return "ok"
    why = f"{case.error.type}: {first_line(case.error.message)}" if case.error else ""
    if case.status == "skipped":
        return f"skipped{': ' + first_line(case.error.message) if case.error else ''}"
    oom = case.error and any(m in case.error.message or m in case.error.type
                             for m in OOM_MARKERS)
    return f"**{'OOM' if oom else 'FAILED'}** `{why}`"


def significance(test: Test | None) -> str:
    """The method and its evidence: `MWU p=0.008`, `bootstrap 95% CI [0.89, 0.95]`, `n=1`."""
    if test is None:
        return "-"
    if test.method == MWU:
        return f"MWU p={test.p_value:.3g} (n={test.n_base}+{test.n_new})"
    if test.method == BOOTSTRAP:
        level = f"{1 - test.alpha:.0%}"
        return (f"bootstrap {level} CI of time ratio [{test.low:.3f}, {test.high:.3f}] "
                f"(n={test.n_base}+{test.n_new})")
    return "untestable (1+1 runs)"
