"""What a plot shows, decided before anything is drawn (pure: numbers and labels in, decisions
out; plots.py draws them).

- **Log axis** (`log_scale`): when the plotted values span more than `LOG_SPAN` (30x), a
  linear axis from zero hides the small ones (a 1.5 items/s bar beside 549 is one pixel);
  the axis label then says "log scale".
- **Title** (`subject`): every plot names its config(s) and the short commit(s) measured.
- **Commits, not runs** (`commit_groups`): a history's neighbouring runs of one commit are
  one position on the axis, drawn with their spread: the code did not change between them.
- **Steps** (`drawn_steps`): a history plot draws a step only where harness.judge.steps
  found one with a verdict (a change point, or a suspected step judged a `regression` or
  an `improvement`), and never between two runs of one commit; an `inconclusive` suspected
  step stays in the history's tables, not on the plot.
"""

from __future__ import annotations

import dataclasses

from ..verdicts import CHANGE_POINT, IMPROVEMENT, REGRESSION

LOG_SPAN = 30.0  # largest / smallest plotted value past which the axis is logarithmic


def log_scale(values, span: float = LOG_SPAN) -> bool:
    """True when the positive values (None skipped) span more than `span` times."""
    pos = [v for v in values if v is not None and v > 0]
    return bool(pos) and max(pos) / min(pos) > span


def axis_label(text: str, log: bool) -> str:
    """`items/s (higher is faster)`, with `, log scale` inside its parenthesis (or added)."""
    if not log:
        return text
    return text[:-1] + "; log scale)" if text.endswith(")") else f"{text} (log scale)"


def subject(configs: list[str], commits: list[str]) -> str:
    """`demo @ 11111111 vs 22222222`: the configs and short commits (harness.judge.comparable
    `label`) of a plot, each once, in order."""
    names = ", ".join(dict.fromkeys(c for c in configs if c)) or "?"
    shas = " vs ".join(dict.fromkeys(c for c in commits if c)) or "?"
    return f"{names} @ {shas}"


def count_text(counts) -> str:
    """`n=5`, `n=3-5` over several counts, "" when none is known."""
    known = sorted({n for n in counts if n})
    if not known:
        return ""
    return f"n={known[0]}" if len(known) == 1 else f"n={known[0]}-{known[-1]}"


def commit_groups(commits: list[str]) -> list[int]:
    """Per point its position on a commit axis: neighbouring points of one commit share
    one (`[a, b, b, c]` -> `[0, 1, 1, 2]`)."""
    out: list[int] = []
    for i, c in enumerate(commits):
        out.append(0 if i == 0 else out[-1] + (c != commits[i - 1]))
    return out


@dataclasses.dataclass(frozen=True)
class StepMark:
    """A step as harness.judge.steps found it: before point `index`, its kind (change point
    or suspected step), verdict and change of time (+ = slower)."""

    index: int
    change: float
    kind: str
    verdict: str


def drawn_steps(steps: list[StepMark], commits: list[str], quiet: list[bool]
                ) -> list[StepMark]:
    """The steps (StepMark, or any record with its `index`, `kind` and `verdict`) a plot
    draws: those with a verdict (a change point, or a suspected step
    judged a regression or an improvement) whose point before (the last point measured on
    a quiet machine before it, the one the detection compared) is of another commit."""
    out = []
    for s in steps:
        if s.kind != CHANGE_POINT and s.verdict not in (REGRESSION, IMPROVEMENT):
            continue
        before = [i for i in range(s.index) if quiet[i]]
        if before and commits[before[-1]] == commits[s.index]:
            continue  # two runs of one commit: the same code
        out.append(s)
    return out
