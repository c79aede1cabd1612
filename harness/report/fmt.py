"""Formatting for the Markdown exporters: tables as data, numbers and labels as text.

No statistics here: every number arrives computed (harness.stats, significance, compare).
"""

from __future__ import annotations

import dataclasses

from ..config.keys import model_name, short
from ..judge.busy import DECIDER
from ..judge.compare import DECIDE, MIN_RUNS
from ..records import CaseRecord, RunRecord
from ..stats.significance import Test
from ..util import REPORTS, byte_size
from ..verdicts import (
    CANNOT_TELL,
    IMPROVEMENT,
    INCONCLUSIVE,
    MEMORY_REGRESSION,
    NOT_COMPARED,
    REGRESSION,
    SCORES_MOVED,
    SUSPICIOUS_IMPROVEMENT,
    TIMED_COMPILES,
    UNCHANGED,
    UNTESTED,
)

OOM_MARKERS = ("RESOURCE_EXHAUSTED", "out of memory", "Out of memory", "OOM")
# the one convention for change, said under every table that shows one
CONVENTION = ("Change: time per item, new / base - 1, + = slower, with its interval; the "
              "ms/item columns are the same statistic (the median run, or the geometric "
              "mean of the worker processes' medians), so new / base of them is the change.")


@dataclasses.dataclass
class Table:
    """A Markdown table: `align` holds "l" or "r" per column."""

    header: list[str]
    rows: list[list[str]]
    align: list[str] | None = None
    title: str | None = None
    note: str | None = None
    facts: list[str] = dataclasses.field(default_factory=list)  # said once, above the table

    def lift_constant(self, columns: list[str]) -> Table:
        """The table without those of `columns` whose cells are one value on every row (of
        two or more rows): each such value goes into `facts` (`Hardware: CPU (2 cores)`),
        or nowhere when it is `-`."""
        if len(self.rows) < 2:
            return self
        drop = [i for i, h in enumerate(self.header) if h in columns
                and len({r[i] for r in self.rows}) == 1]
        facts = [f"{self.header[i]}: {self.rows[0][i]}" for i in drop
                 if self.rows[0][i] not in ("-", "")]
        keep = [i for i in range(len(self.header)) if i not in drop]
        align = self.align or ["l"] * len(self.header)
        return dataclasses.replace(
            self, header=[self.header[i] for i in keep], rows=[[r[i] for i in keep]
                                                               for r in self.rows],
            align=[align[i] for i in keep], facts=self.facts + facts)

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


def flops(x: float | None) -> str:
    """`210 GFLOP/s`, `918 TFLOP/s`."""
    if x is None:
        return "-"
    for unit, scale in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} FLOP/s"


def mfu(x: float | None) -> str:
    """MFU with one decimal, `<0.1%` below it (`-`: unknown, e.g. no quiet calibration of a
    CPU's peak)."""
    if x is None:
        return "-"
    return "<0.1%" if 0 < x < 0.0005 else f"{x:.1%}"


def times(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def sci(x: float | None) -> str:
    return "-" if x is None else f"{x:.2g}"


def size(n: int | None) -> str:
    """A report cell's bytes: 512 B, 12.0 KiB ... 1.5 GiB (never TiB); `-` for None."""
    return byte_size(n, REPORTS)


def peak(n: int | None, source: str | None) -> str:
    """A case's peak memory as its source allows: `1.2 GiB`, `<= 1.2 GiB` for an upper
    bound (`device-bound`), `-` where none was recorded."""
    if n is None:
        return "-"
    return f"<= {size(n)}" if source == "device-bound" else size(n)


def memory_change(check) -> str:
    """A MemoryCheck as a cell: `2.3 GiB -> 2.8 GiB (+20.0%, 1.20x)` (bold past the
    threshold), or `not compared: why`."""
    if check is None:
        return "-"
    if check.ratio is None:
        return check.note.removeprefix("memory ")
    text = (f"{size(check.base_bytes)} -> {size(check.new_bytes)} ({check.change:+.1%}, "
            f"{check.ratio:.2f}x)")
    return f"**{text}**" if check.regression else text


def share(x: float | None, level: float | None = None) -> str:
    """Other processes' share of the CPU: `65%` (bold past `level`), `-` unrecorded."""
    if x is None:
        return "-"
    return f"**{x:.0%}**" if level is not None and x > level else f"{x:.0%}"


def load_pair(c, level: float) -> str:
    """`3%, **65%**`: both sides' other load of a CaseChange."""
    if c.base_other_load is None and c.new_other_load is None:
        return "-"
    return f"{share(c.base_other_load, level)}, {share(c.new_other_load, level)}"


def options(case: CaseRecord) -> str:
    """Mode options as `key=value`, values as in case ids (`precompile_bs=1,2,4,8`, `1-4`)."""
    return ", ".join(f"{k}={short(v)}" for k, v in case.params.items()) or "-"


def mode_label(case: CaseRecord) -> str:
    opts = options(case)
    return f"{case.engine}/{case.mode}" + (f" ({opts})" if opts != "-" else "")


def model_label(case: CaseRecord) -> str:
    return model_name(case.model.path)


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
    """What the interval stands on: `99% CI, floor 10%, 1+1 proc, 3+3 runs`."""
    if test is None:
        return "-"
    return (f"{1 - test.alpha:.0%} CI, floor {test.floor:.0%}, {test.k_base}+{test.k_new} "
            f"proc, {test.n_base}+{test.n_new} runs")


def interval(c) -> str:
    """`time +50.0% [+40.0%, +58.3%]` of a CaseChange: time per item new / base - 1,
    + = slower (the change alone when untested)."""
    if c.latency_change is None:
        return "-"
    if c.latency_low is None:
        return f"time {c.latency_change:+.1%} (untested)"
    return f"time {c.latency_change:+.1%} [{c.latency_low:+.1%}, {c.latency_high:+.1%}]"


def score_notes(comp) -> list[str]:
    """`Scores not compared (N case(s)): why` for compared cases whose scores were not."""
    counts: dict[str, int] = {}
    for c in comp.compared:
        if c.scores is not None and c.scores.max_log_diff is None and not c.scores.moved:
            why = c.scores.note.removeprefix("scores not compared: ")
            counts[why] = counts.get(why, 0) + 1
    return [f"Scores not compared ({n} case(s)): {why}" for why, n in counts.items()]


# the order the headline counts the compared cases in (harness/verdicts.py's words)
TALLY = (SUSPICIOUS_IMPROVEMENT, REGRESSION, SCORES_MOVED, MEMORY_REGRESSION, TIMED_COMPILES,
         IMPROVEMENT,
         UNCHANGED, INCONCLUSIVE, UNTESTED)


def tally(comp) -> str:
    """What the compared cases came to, every verdict counted, improvements named and
    inconclusive ones explained: `2 improvement (a time -65.0% [...], b ...), 3 unchanged,
    1 inconclusive (an interval reaches beyond 5%: ...), 2 inconclusive on a busy machine
    (new side: other processes held up to 65% of the CPU; `mibench ab` decides it)`."""
    parts = []
    for word in TALLY:
        cases = [c for c in comp.compared if c.verdict == word]
        if word == INCONCLUSIVE:
            vague = [c for c in cases if c not in comp.busy]
            if vague:
                parts.append(f"{len(vague)} inconclusive (an interval reaches beyond "
                             f"{comp.threshold:.0%}: {DECIDE})")
            if len(vague) < len(cases):
                parts.append(f"{len(cases) - len(vague)} inconclusive on a busy machine "
                             f"({comp.busy_line()})")
            continue
        if not cases:
            continue
        named = ""
        if word in (IMPROVEMENT, SUSPICIOUS_IMPROVEMENT):
            named = " (" + ", ".join(f"{c.case_id} {interval(c)}" for c in cases[:3]) + (
                ", ..." if len(cases) > 3 else "") + ")"
        parts.append(f"{len(cases)} {word}{named}")
    return ", ".join(parts) or "nothing"


def cut_short(comp) -> str:
    """`; 1 case cut short by its deadline on a busy machine (inconclusive: ...)`: newly
    failed cases that compare calls no evidence (judge/busy.timeout_busy_reason)."""
    compared = comp.compared
    cut = [c for c in comp.cases if c.verdict == INCONCLUSIVE and c not in compared]
    if not cut:
        return ""
    names = ", ".join(c.case_id for c in cut[:3]) + (", ..." if len(cut) > 3 else "")
    return (f"; {len(cut)} case(s) cut short by their deadline on a busy machine "
            f"(inconclusive: {names}; {DECIDER})")


def verdict_line(comp) -> str:
    """The gate's outcome in one line: what was compared and what it came to (every
    verdict counted, improvements named, the sides measured on a busy machine), the
    regressed cases with their change and interval (time per item, + = slower) or the
    worst change among the cases with a timing verdict."""
    how = (f"{1 - comp.alpha:.0%} interval, noise floor {comp.floor.value:.0%} "
           f"({comp.floor.source})")
    compared = comp.compared
    if comp.outcome == REGRESSION:
        return _regression_line(comp, how)
    if comp.outcome == NOT_COMPARED:
        return f"**NOT COMPARED** with {comp.base}: {comp.not_compared_reason()}"
    quiet = [c for c in compared if c.latency_low is not None and c not in comp.busy]
    worst = max(quiet, key=lambda c: c.latency_change, default=None)
    largest = (f"; worst change {worst.case_id}: {interval(worst)} ({how})" if worst
               else "")
    untested = comp.untested
    counted = f"{len(compared)} case(s) compared: {tally(comp)}" + cut_short(comp)
    if comp.outcome == UNTESTED:
        names = ", ".join(c.case_id for c in untested[:3]) + (", ..." if len(untested) > 3
                                                              else "")
        return (f"**UNTESTED** against {comp.base}: {len(untested)} of {len(compared)} "
                f"compared case(s) have fewer than {MIN_RUNS} timed runs on a side ({names}); "
                f"no regression in the others; {counted}{largest}. "
                "`--allow-untested` accepts them")
    note = " (allowed by --allow-untested)" if untested else ""
    odd = [c for c in compared if c.verdict == SUSPICIOUS_IMPROVEMENT]
    if odd:  # exit 0, named first: a mode that scores nothing is fast
        names = ", ".join(f"{c.case_id} {interval(c)}" for c in odd[:3]) + (
            ", ..." if len(odd) > 3 else "")
        return (f"**SUSPICIOUS IMPROVEMENT** against {comp.base}: {len(odd)} of "
                f"{len(compared)} compared case(s) 2x or more faster without the new side's "
                f"`modes`/`engines` parity against the reference having run and passed "
                f"({names}); none failed the gate: {counted}{note}{largest}")
    undecided = [c for c in compared if c.verdict in CANNOT_TELL]
    if undecided:  # no case failed the gate, but "no regression" is not known
        return (f"Undecided against {comp.base}: {len(undecided)} of {len(compared)} "
                f"compared case(s) neither regressed nor shown within "
                f"{comp.threshold:.0%}, none failed the gate: {counted}{note}{largest}")
    return f"No regression against {comp.base}: {counted}{note}{largest}"


def _regression_line(comp, how: str) -> str:
    """`**REGRESSION** against B: 2 case(s) failed the gate (1 regression, 1 failed): a:
    time +50.0% [...]; b: newly failed: ... (99% interval, ...). 12 case(s) compared:
    1 regression, 11 unchanged`."""
    bad = [c for c in comp.cases if c.regression]
    parts = [f"{c.case_id}: " + (interval(c) if c.verdict == REGRESSION else
                                 c.reason.split("; ")[0]) for c in bad[:3]]
    parts += [f"and {len(bad) - 3} more case(s)"] if len(bad) > 3 else []
    parity = sum(p.regression for p in comp.parity)
    parts += [f"{parity} parity check(s) newly not passing"] if parity else []
    timing = f" ({how})" if any(c.verdict == REGRESSION for c in bad) else ""
    words = {w: sum(c.verdict == w for c in bad) for w in dict.fromkeys(c.verdict for c in bad)}
    kinds = ", ".join(f"{n} {w}" for w, n in words.items())
    head = f"{len(bad)} case(s) failed the gate ({kinds})" if bad else "no case failed"
    return (f"**REGRESSION** against {comp.base}: {head}: {'; '.join(parts)}{timing}. "
            f"{len(comp.compared)} case(s) compared: {tally(comp)}{cut_short(comp)}")
