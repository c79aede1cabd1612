"""Confirming a night's suspicions with interleaved `ab`, and bisecting the confirmed ones,
within a time budget.

- **Confirm.** The cases to confirm are measured by `ab` between the commit they are judged
  from (the last commit that passed; for a known regression, the night that confirmed it)
  and HEAD, those cases only, at `rounds`; a case `ab` leaves `inconclusive` is measured
  again with twice the rounds while that stays within `max_rounds` (as bisect does).
  `ab`'s word settles the case: `regression` confirms it; `unchanged` or `improvement`
  disproves a suspicion (marked in the index) or passes a busy case; anything else leaves
  it open, not marked.
- **Bisect** (harness/ab/bisect.py, on `ab`'s verdicts) runs when more than one commit lies
  between, at most `max_commits` of them, with the confirmed cases; HEAD's step is the
  confirmation itself, not measured again.
- **Budget.** No A/B starts when its estimated time (seconds per case and round, learnt
  from the A/B runs so far, at first twice the night's run per case) exceeds what is left;
  what is left open is said with the command that decides it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from mibench.errors import MibenchError

from ..ab.bisect import step_verdict
from ..records import ABCase, ABRecord
from ..records.nightly import Known
from ..util import now
from ..verdicts import (
    CONFIRMED_REGRESSION,
    DISPROVED,
    IMPROVEMENT,
    INCONCLUSIVE,
    PASS,
    REGRESSION,
    UNCHANGED,
)
from .judge import CONFIRM, FIX, Judgement


@dataclasses.dataclass
class Budget:
    """Seconds for confirmation and bisection, from `start` on `clock`."""

    seconds: float
    per_case_round: float  # estimated seconds of one case in one A/B round
    clock: Callable[[], float] = time.monotonic
    start: float = dataclasses.field(default=0.0)

    def __post_init__(self):
        self.start = self.start or self.clock()

    def left(self) -> float:
        return self.seconds - (self.clock() - self.start)

    def afford(self, rounds: int, cases: int = 1) -> str | None:
        """Why an A/B of `rounds` rounds of `cases` cases may not start (None: it may)."""
        need, left = rounds * cases * self.per_case_round, self.left()
        if left > 0 and need <= left:
            return None
        return (f"the time budget ({self.seconds:.0f} s) ran out: {max(left, 0):.0f} s left, "
                f"an A/B of {cases} case(s) x {rounds} rounds takes about {need:.0f} s")

    def learn(self, rounds: int, cases: int, seconds: float) -> None:
        self.per_case_round = seconds / max(1, rounds * cases)


@dataclasses.dataclass
class Measured:
    """What `ab` said of each case (its case and the A/B record it came from), and why a
    case was not measured."""

    cases: dict[str, tuple[ABCase, ABRecord]] = dataclasses.field(default_factory=dict)
    stopped: dict[str, str] = dataclasses.field(default_factory=dict)


def measure(steps, base: str, head: str, case_ids: list[str], *, rounds: int,
            most_rounds: int, budget: Budget, out, clock=time.monotonic) -> Measured:
    """`ab` of the cases between `base` and `head`, again with twice the rounds for those
    left inconclusive, within `most_rounds` and the budget."""
    found, todo = Measured(), list(case_ids)
    while todo:
        why = budget.afford(rounds, len(todo))
        if why is not None:
            found.stopped |= {c: why for c in todo}
            break
        t0 = clock()
        record = steps.ab(base, head, todo, rounds, out)
        budget.learn(rounds, len(todo), clock() - t0)
        found.cases |= {c.case_id: (c, record) for c in record.cases}
        undecided = [c.case_id for c in record.cases if c.verdict == INCONCLUSIVE]
        if not undecided or rounds * 2 > most_rounds:
            break
        todo, rounds = undecided, rounds * 2
    return found


def settle(j: Judgement, found: Measured) -> Judgement:
    """The case's word after `ab` (the module docstring)."""
    if j.confirm is None:
        return j
    if j.case_id not in found.cases:
        why = found.stopped.get(j.case_id, "`ab` did not measure it")
        return dataclasses.replace(j, reason=f"{j.reason}; not decided: {why} (left open)")
    case, record = found.cases[j.case_id]
    t = case.timing
    ab = dict(change=t.change if t else None, low=t.low if t else None,
              high=t.high if t else None, source=f"ab, {record.rounds} rounds")
    line = (f"`ab` {record.base.commit[:12]}..{record.new.commit[:12]}: {case.verdict}: "
            f"{case.why}")
    if j.purpose == FIX:
        if case.verdict == IMPROVEMENT:
            return dataclasses.replace(j, **ab, verdict=PASS,
                                       reason=f"fixed: faster than the confirmed-bad commit "
                                              f"{j.confirm[:12]}: {line}")
        return dataclasses.replace(j, **ab, reason=f"{line}; still present ({j.reason})")
    if case.verdict == REGRESSION:
        return dataclasses.replace(j, **ab, verdict=CONFIRMED_REGRESSION, reason=line)
    if case.verdict in (UNCHANGED, IMPROVEMENT):
        return dataclasses.replace(j, **ab, verdict=DISPROVED if j.suspected else PASS,
                                   reason=f"{line} (the run showed {_pct(j.change)})")
    return dataclasses.replace(j, **ab, reason=f"{line}; left open, not marked (the run: "
                                               f"{j.reason})")


def culprits(js: list[Judgement], found: Measured, steps, head: str, *, rounds: int,
             most_rounds: int, max_commits: int, budget: Budget, level_run: str
             ) -> list[Known]:
    """A known regression for every confirmed case, with the first bad commit: HEAD when
    it is the only commit since the base, else bisect's (at most `max_commits`)."""
    groups: dict[str, list[Judgement]] = {}
    for j in js:
        if j.verdict == CONFIRMED_REGRESSION and j.purpose == CONFIRM:
            groups.setdefault(j.confirm, []).append(j)
    out = []
    for base, group in groups.items():
        ids = [j.case_id for j in group]
        culprit, how = first_bad(steps, base, head, ids, found, rounds=rounds,
                                 most_rounds=most_rounds, max_commits=max_commits,
                                 budget=budget)
        subject = steps.subject(culprit) if culprit else None
        out += [Known(case_id=j.case_id, measurement=j.measurement, culprit=culprit,
                      subject=subject, good=base, bad=head, level_run=level_run,
                      change=j.change, low=j.low, high=j.high, confirmed_at=now(),
                      bisect=how) for j in group]
    return out


def first_bad(steps, base: str, head: str, ids: list[str], found: Measured, *, rounds: int,
              most_rounds: int, max_commits: int, budget: Budget) -> tuple[str | None, str]:
    """(the first bad commit or None, how it was found or why not)."""
    commits = steps.commits(base, head)
    if len(commits) <= 1:
        return head, f"the only commit since {base[:12]}"
    command = steps.bisect_command(base, head, ids, most_rounds)
    if len(commits) > max_commits:
        return None, (f"not bisected: {len(commits)} commits since {base[:12]}, more than "
                      f"--max-commits {max_commits}; `{command}`")
    try:
        result = steps.bisect(base, head, ids, rounds=rounds, max_rounds=most_rounds,
                              afford=lambda r: budget.afford(r, len(ids)),
                              bad_step=bad_step(found, ids, head, steps.subject(head)))
    except MibenchError as e:
        return None, f"not bisected: {e}; `{command}`"
    if result["verdict"] == "found":
        return result["first_bad"], (f"bisect: {len(result['steps'])} A/B steps over "
                                     f"{result['candidates']} commits")
    return None, f"bisect left it undecided: {result['stopped'] or result['decide']}"


def bad_step(found: Measured, ids: list[str], head: str, subject: str) -> dict:
    """HEAD's bisect step, from the confirmation's A/B runs of these cases."""
    cases = [found.cases[c] for c in ids]
    return {"commit": head, "subject": subject,
            "verdict": step_verdict([c.verdict for c, _ in cases]),
            "rounds": max(r.rounds for _, r in cases), "stopped": None,
            "evidence": {c.case_id: f"{c.verdict}: {c.why}" for c, _ in cases}}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"
