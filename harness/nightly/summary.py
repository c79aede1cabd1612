"""A night's summary: at most `MAX_LINES` lines of Markdown, fit for a PR or issue comment
or a job summary (the verdict, the culprit(s) with their subjects, what the night must say
(a run of undecided nights, a rewritten history, a noise floor wider than the threshold,
what another writer kept), each case's word with its change and interval, what was left
open, the command that reproduces it, the noise floor, links to the full report and
history), rendered from its JSON twin
(records/nightly.py `NightSummary`); the cases that need a look come first, and the rows
that do not fit are counted in one line (the JSON lists them all)."""

from __future__ import annotations

from ..judge.nightly import pct
from ..judge.settle import rank
from ..records.nightly import NightSummary, SummaryCase

MAX_LINES = 40
REASON_CHARS = 160


def render(s: NightSummary) -> str:
    """The Markdown summary (at most MAX_LINES lines)."""
    head = [f"### mibench nightly `{s.config}` at `{s.commit[:12]}` {s.subject!r}: "
            f"**{s.verdict.upper()}** (exit {s.exit_code})", "",
            _headline(s)]
    head += [_culprit_line(c) for c in s.culprits]
    head += [f"- {line}" for line in s.notes[:4]]
    tail = [f"- Left open: {u}" for u in s.undecided[:3]]
    tail += [f"- Reproduce: `{cmd}`" for cmd in s.reproduce[:2]]
    if s.noise:
        tail.append(f"- Noise floor: {s.noise}")
    tail.append("- " + " · ".join(f"{name}: {_link(where)}" for name, where in s.links.items()))
    if s.seconds:
        tail.append("- Took " + ", ".join(f"{k} {v:.0f} s" for k, v in s.seconds.items()))
    room = MAX_LINES - len(head) - len(tail) - 4  # blank, table head (2), the "more" line
    rows = sorted(s.cases, key=lambda c: rank(c.verdict))
    shown, rest = rows[:max(room, 1)], rows[max(room, 1):]
    table = ["", "| case | verdict | change | interval | from | why |",
             "|---|---|---:|---|---|---|"] + [_row(c) for c in shown]
    if rest:
        words = sorted({c.verdict for c in rest}, key=rank)
        table.append(f"| ... {len(rest)} more ({', '.join(words)}): summary.json lists them "
                     "| | | | | |")
    lines = head + table + [""] + tail
    return "\n".join(lines[:MAX_LINES]) + "\n"


def _headline(s: NightSummary) -> str:
    counts: dict[str, int] = {}
    for c in s.cases:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    words = ", ".join(f"{n} {w}" for w, n in sorted(counts.items(), key=lambda wn: rank(wn[0])))
    base = f"against the baseline `{s.baseline[:12]}`" if s.baseline else "seeding the history"
    promoted = ("; this commit is the new baseline" if s.promoted else
                "; the baseline stays" if s.baseline else "")
    return f"{len(s.cases)} case(s) judged {base}: {words or 'none'}{promoted}."


def _culprit_line(c) -> str:
    what = ("**Known regression**, still present" if c.known else
            "**Culprit** (part of the change)" if c.partial else "**Culprit**")
    cases = ", ".join(f"`{x}`" for x in c.cases)
    if ".." in c.commit:  # no commit named: the range GOOD..BAD it lies in
        return f"{what}: not named, between `{c.commit}` ({c.bisect}); {cases}"
    return f"{what}: `{c.commit[:12]}` {c.subject!r} ({c.bisect}); {cases}"


def _row(c: SummaryCase) -> str:
    interval = f"[{pct(c.low)}, {pct(c.high)}]" if c.low is not None else "-"
    why = c.reason.replace("|", "/").replace("\n", " ")
    why = why if len(why) <= REASON_CHARS else why[:REASON_CHARS - 3] + "..."
    return (f"| `{c.case_id}` | {c.verdict} | {pct(c.change)} | {interval} | {c.source} "
            f"| {why} |")


def _link(where: str) -> str:
    return where if where.startswith("not written") else f"[{where.rsplit('/', 1)[-1]}]({where})"
