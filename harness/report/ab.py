"""Rendering of an A/B artifact: a console table for `mibench ab`, and the Markdown A/B
section of `mibench report AB.json` (the verdict line first, with the change and its
interval in percent, then every case with the numbers behind its verdict)."""

from __future__ import annotations

import math

from ..judge.busy import BUSY_LEVEL
from ..judge.paired import timing_line
from ..records.ab import ABRecord
from ..verdicts import REGRESSION
from .console import table
from .fmt import Table, share

SUBJECT = 60  # characters of a commit subject shown (a title is no place for 300)
CONVENTION = ("Change: time per call new / base - 1, + = slower, the same convention as "
              "`mibench compare` and `report`.")
COLUMNS = ("base ms and new ms: the median over the rounds of each side's median call. The "
           "change is the paired estimate: the geometric mean of the rounds' new/base ratios "
           "(calls paired within a round), so load that falls on both sides cancels; it can "
           "differ from new ms / base ms when the load moved between rounds, and the "
           "interval is the change's.")
FIGURE_HEAD = ("How the change is computed, where it differs from new ms / base ms (the "
               "paired figure is the verdict's; the ratio of the medians mixes rounds that "
               "ran under different load):")
DIFFERS = 0.01  # the paired change and new ms / base ms - 1 this far apart are explained
SHOWN_RATIOS = 6  # rounds up to this many list every ratio, more their range


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f}"


def _median(samples) -> float | None:
    import statistics

    values = [s.median_s for s in samples if s.median_s]
    return statistics.median(values) if values else None


def figure_line(case, pacing: str) -> str | None:
    """How a case's change was computed, with the numbers: `+145.2% = the geometric mean
    of the 5 per-round ratios new/base (x1.90, ..., x3.10) - 1 (a round's ratio: ...); the
    ratio of the medians, 161.07 / 41.43 ms, would be +288.8%` (judge/paired.py), None
    without a change or its rounds' ratios."""
    t = case.timing
    if t is None or t.change is None or not t.round_log_ratios:
        return None
    ratios = [math.exp(d) for d in t.round_log_ratios]  # in round order
    shown = (", ".join(f"x{r:.2f}" for r in ratios) if len(ratios) <= SHOWN_RATIOS
             else f"x{min(ratios):.2f} to x{max(ratios):.2f}")
    base, new = _median(case.base), _median(case.new)
    medians = (f"; the ratio of the medians, {_ms(new)} / {_ms(base)} ms, would be "
               f"{new / base - 1:+.1%}" if base and new else "")
    return (f"{case.case_id}: {t.change:+.1%} = the geometric mean of the {len(ratios)} "
            f"per-round ratios new/base ({shown}) - 1 ({ROUND_RATIO[pacing]}){medians}")


def figure_lines(record: ABRecord) -> list[str]:
    """`figure_line` of each case whose change and new ms / base ms - 1 differ by
    `DIFFERS` or more."""
    out = []
    for c in record.cases:
        base, new, line = _median(c.base), _median(c.new), figure_line(c, record.pacing)
        if line and base and new and abs(c.timing.change - (new / base - 1)) >= DIFFERS:
            out.append(line)
    return out


def highest_load(case) -> tuple[float, int] | None:
    """(the largest share of the CPU other processes held while a side of the case was
    measured, its round), None where no round recorded it."""
    loads = [(s.load.other_share, s.round) for s in case.base + case.new if s.load]
    return max(loads) if loads else None


def load_note(record: ABRecord) -> str | None:
    """What the A/B says when other processes were busy (past the busy level): it pairs
    the sides of each round, so the load fell on both and the verdict stands."""
    high = [(c.case_id, hl) for c in record.cases
            if (hl := highest_load(c)) is not None and hl[0] > BUSY_LEVEL]
    if not high:
        return None
    case_id, (value, r) = max(high, key=lambda x: x[1][0])
    return (f"The machine was busy: other processes held up to {value:.0%} of the CPU "
            f"({case_id}, round {r + 1}; {len(high)} case(s) past {BUSY_LEVEL:.0%}). An A/B "
            "interleaves both sides, so that load fell on both and its verdict stands (a "
            "`compare` of separate runs would call such a case inconclusive); the "
            "interval is wider for it.")


def rows(record: ABRecord, bold: bool = True) -> list[list[str]]:
    """A row per case; `bold` (Markdown) marks a load past the busy level."""
    out = []
    for c in record.cases:
        t = c.timing
        scores = "-" if c.scores is None else (
            f"{c.scores.max_log_diff:.2g}" if c.scores.max_log_diff is not None else "shape")
        high = highest_load(c)
        out.append([c.case_id, c.verdict or "-", _ms(_median(c.base)), _ms(_median(c.new)),
                    timing_line(t) if t else "-", scores,
                    share(high[0], BUSY_LEVEL if bold else None) if high else "-"])
    return out


PACING = {
    "calls": "Each round starts both revisions in fresh worker processes, alive at once, and "
             "lets them take turns call by call (A B, B A, ...); a round's ratio is the "
             "median of its paired calls' ratios.",
    "sides": "Each round measures both revisions in fresh worker processes, one after the "
             "other in alternating order; a round's ratio is that of the sides' medians.",
}
ROUND_RATIO = {"calls": "a round's ratio: the median of its paired calls' ratios",
               "sides": "a round's ratio: new median / base median"}
HEADER = ["case", "verdict", "base ms", "new ms", "change [CI] (+ = slower)",
          "max |log score diff|", "other load (max)"]


def short_subject(subject: str, limit: int = SUBJECT) -> str:
    """A commit subject cut to `limit` characters at a word, with an ellipsis."""
    subject = " ".join(subject.split())
    if len(subject) <= limit:
        return subject
    cut = subject[:limit - 1].rsplit(" ", 1)[0] if " " in subject[:limit - 1] else \
        subject[:limit - 1]
    return cut.rstrip(" ,;:") + "…"


def title(record: ABRecord) -> str:
    """`A/B: 1a2b3c4d vs 5e6f7a8b` (the subjects go on the next line, shortened)."""
    return f"A/B: {record.base.commit[:8]} vs {record.new.commit[:8]}"


def headline(record: ABRecord) -> str:
    """What was compared and how, in one line: both commits with their (short) subjects,
    the rounds, the pacing and the test."""
    method = record.cases[0].timing if record.cases and record.cases[0].timing else None
    how = (f"{method.method}, alpha {method.alpha:g}, min effect {method.min_effect:.0%}"
           if method else "no timing test")
    pacing = {"calls": "calls interleaved", "sides": "sides in turn"}[record.pacing]
    return (f"base {record.base.commit[:8]} ({short_subject(record.base.subject)}) vs new "
            f"{record.new.commit[:8]} ({short_subject(record.new.subject)}); "
            f"{record.rounds} rounds, {pacing}; {how}")


def _pair(a, b, get, unit: str = "") -> str:
    from ..util import short_number

    return (f"{short_number(get(a) if a else None, unit)} -> "
            f"{short_number(get(b) if b else None, unit)}")


def cost_rows(record: ABRecord) -> list[list[str]]:
    out = []
    for c in record.cases:
        if c.cost is None:
            continue
        a, b = c.cost.base.compile, c.cost.new.compile
        out.append([c.case_id, f"{c.cost.base.status} -> {c.cost.new.status}",
                    _pair(a, b, lambda x: x.hbm_peak_bytes, "B"),
                    _pair(a, b, lambda x: x.bytes_accessed_per_pass, "B"),
                    _pair(a, b, lambda x: x.flops_per_pass),
                    "; ".join(c.cost.regressions) or ("; ".join(c.cost.changes)
                                                      or "unchanged")])
    return out


COST_HEADER = ["case", "status", "peak HBM / chip", "bytes accessed / pass", "FLOPs / pass",
               "verdict (regressions, else changes)"]


def _cost_title(record: ABRecord) -> str:
    t = record.compile_target
    lib = record.libtpu.version if record.libtpu else None
    return f"Compiled cost for {t.name} (libtpu {lib}), base -> new"


def render_text(record: ABRecord, path=None) -> str:
    worst = [c for c in record.cases if c.verdict == REGRESSION]
    costs = cost_rows(record)
    busy = load_note(record)
    figures = figure_lines(record)
    lines = [f"{title(record)}: {headline(record)}", table(HEADER, rows(record, bold=False)),
             CONVENTION,
             *([FIGURE_HEAD, *(f"  {f}" for f in figures)] if figures else []),
             *([busy] if busy else []),
             *([_cost_title(record), table(COST_HEADER, costs)] if costs else []),
             f"verdict: {record.verdict}" + (f" ({len(worst)} of {len(record.cases)} cases: "
                                              + "; ".join(f"{c.case_id} {c.why}"
                                                          for c in worst) + ")" if worst else "")]
    if path is not None:
        lines.append(f"artifact: {path}")
    return "\n".join(lines)


def render_markdown(record: ABRecord) -> str:
    worst = [c for c in record.cases if c.verdict == REGRESSION]
    verdict = f"**Verdict: {record.verdict}**" + (
        ": " + "; ".join(f"`{c.case_id}` {c.why}" for c in worst) if worst else "")
    busy = load_note(record)
    t = Table(HEADER, rows(record), ["l", "l", "r", "r", "l", "r", "r"],
              title="A/B comparison",
              note=f"{CONVENTION} {PACING[record.pacing]} {COLUMNS} Unchanged: the interval "
                   "lies within the minimum effect; inconclusive: it reaches beyond (more "
                   "`--rounds` would decide it). Other load: the largest share of the CPU "
                   "that processes outside mibench held while a side was measured."
                   + (f" {busy}" if busy else ""))
    samples = Table(["case", "side", "round", "first", "status", "median ms", "timed runs",
                     "other load"],
                    [[c.case_id, side, str(s.round + 1), "yes" if s.first else "no",
                      s.status, _ms(s.median_s), str(len(s.timed_s)),
                      share(s.load.other_share if s.load else None, BUSY_LEVEL)]
                     for c in record.cases for side in ("base", "new")
                     for s in getattr(c, side)], ["l", "l", "r", "l", "l", "r", "r", "r"])
    figures = figure_lines(record)
    costs = cost_rows(record)
    cost = Table(COST_HEADER, costs, ["l", "l", "r", "r", "r", "l"], title=_cost_title(record),
                 note="Compiled by the real TPU compiler at each revision (exact, no noise; "
                      "a growth past the cost threshold or a case that stops compiling or "
                      "fitting is a regression).") if costs else None
    return "\n\n".join([f"# {title(record)}", headline(record), verdict, f"## {t.title}",
                        t.note,
                        t.markdown(),
                        *(["\n".join([FIGURE_HEAD, ""] + [f"- {f}" for f in figures])]
                          if figures else []),
                        *([f"## {cost.title}", cost.note, cost.markdown()] if cost else []),
                        "<details><summary>Every round</summary>\n\n" + samples.markdown()
                        + "\n\n</details>"]) + "\n"
