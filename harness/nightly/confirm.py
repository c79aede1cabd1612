"""Confirming a night's cases with interleaved `ab`, and bisecting the confirmed ones,
within a time budget that goes where the answer is.

- **Confirm.** The cases to confirm are measured by `ab` between the commit they are judged
  from (the last commit that passed; for a known regression, the night that confirmed it)
  and HEAD, those cases only, at `rounds`; a case `ab` leaves `inconclusive` gets more
  rounds look by look (2x, 4x ... within `max_rounds`), every look judging all its rounds
  at alpha / (the number of looks) (`measure`). `ab`'s word settles the case
  (harness/judge/settle.py `settle`): `regression` confirms it; `unchanged` passes it
  (disproves a suspicion, marked in the index); `improvement` disproves a suspicion or
  confirms an improvement; anything else leaves it open, not marked.
- **Bisect** (harness/ab/bisect.py, by the level each step sits at) runs when more than one
  commit lies between, at most `max_commits` of them, with the confirmed cases; BAD's
  level is the confirmation's rounds, added to only if they do not settle it.
- **Budget, in order**: suspicions first (a case slower than the threshold, however wide
  its interval; a known regression that may be fixed), then bisecting the confirmed ones,
  then the undecided cases (and bisecting what they confirm). No A/B starts when its
  estimated time (seconds per case and round, learnt from the A/B runs so far, at first
  twice the night's run per case) exceeds what is left; what is left open is said with the
  command that decides it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from mibench.errors import MibenchError

from ..judge.nightly import CONFIRM, Judgement
from ..judge.paired import ALPHA, MIN_EFFECT
from ..judge.settle import Measured, rejudge
from ..records import ABCase
from ..records.nightly import CulpritCommit, Event, Regression, regression_id
from ..stats import sequential as seq
from ..util import now
from ..verdicts import (
    CONFIRMED_REGRESSION,
    INCONCLUSIVE,
    REGRESSION,
)


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


def measure(steps, base: str, head: str, case_ids: list[str], *, rounds: int,
            most_rounds: int, budget: Budget, out, clock=time.monotonic,
            min_effect: float = MIN_EFFECT) -> Measured:
    """`ab` of the cases between `base` and `head` look by look (harness/stats/sequential.py
    `looks`: `rounds`, then 2x, 4x ... within `most_rounds`): the cases left inconclusive get
    the next look's rounds added to theirs, and every look judges all of a case's rounds at
    alpha / (the number of looks), so looking again does not raise the false-alarm rate;
    within the budget."""
    found, todo = Measured(), list(case_ids)
    schedule = seq.looks(rounds, max(rounds, most_rounds))
    alpha, have = ALPHA / len(schedule), 0
    for n in schedule:
        more = n - have
        why = budget.afford(more, len(todo))
        if why is not None:
            found.stopped |= {c: why for c in todo}
            break
        t0 = clock()
        record = steps.ab(base, head, todo, more, out)
        budget.learn(more, len(todo), clock() - t0)
        for case in record.cases:
            before = found.cases.get(case.case_id)
            joined = case if before is None else joined_rounds(before[0], case)
            rejudge(joined, alpha, min_effect)
            found.cases[case.case_id] = (joined, record.model_copy(update={"rounds": n}))
        have = n
        todo = [c for c in todo if c in found.cases and found.cases[c][0].verdict
                == INCONCLUSIVE]
        if not todo:
            break
    return found


def joined_rounds(first: ABCase, more: ABCase) -> ABCase:
    """One case's rounds of two A/B runs of the same commits, as one case."""
    out = first.model_copy(deep=True)
    offset = len(first.base)
    out.base += [s.model_copy(update={"round": s.round + offset}) for s in more.base]
    out.new += [s.model_copy(update={"round": s.round + offset}) for s in more.new]
    d = list(first.timing.round_log_ratios if first.timing else [])
    d += list(more.timing.round_log_ratios if more.timing else [])
    if out.timing is not None:
        out.timing = out.timing.model_copy(update={"round_log_ratios": d})
    if more.verdict == REGRESSION and first.verdict != REGRESSION:  # the new side fails
        out.verdict, out.why = more.verdict, more.why
    return out


def culprits(js: list[Judgement], found: Measured, steps, head: str, *, rounds: int,
             most_rounds: int, max_commits: int, budget: Budget, level_run: str,
             descends: bool = True) -> list[Regression]:
    """A confirmed regression for every confirmed case, with the commit(s) that made it:
    HEAD when it is the only commit since the base, else bisect's (at most `max_commits`;
    none when HEAD does not descend from the base)."""
    groups: dict[str, list[Judgement]] = {}
    for j in js:
        if j.verdict == CONFIRMED_REGRESSION and j.purpose == CONFIRM:
            groups.setdefault(j.confirm, []).append(j)
    out = []
    at = now()
    for base, group in groups.items():
        ids = [j.case_id for j in group]
        named, how = first_bad(steps, base, head, ids, found, rounds=rounds,
                               most_rounds=most_rounds, max_commits=max_commits,
                               budget=budget, descends=descends)
        for j in group:
            first = named[0] if named else None
            out.append(Regression(
                id=regression_id(j.case_id, j.measurement, head), case_id=j.case_id,
                measurement=j.measurement, status="confirmed", good=base, bad=head,
                evidence_run=j.evidence_run, level_run=level_run, change=j.change, low=j.low,
                high=j.high, source=j.source, verdict="regression",
                culprit=first.commit if first else None, subject=first.subject if first
                else None, culprits=named, bisect=how, confirmed_at=at,
                events=[Event(at=at, status="confirmed", commit=head, note=how)]))
    return out


def first_bad(steps, base: str, head: str, ids: list[str], found: Measured, *, rounds: int,
              most_rounds: int, max_commits: int, budget: Budget, descends: bool = True
              ) -> tuple[list[CulpritCommit], str]:
    """(the commits bisect named, first first; empty when none), how they were found or
    why not."""
    if not descends:
        return [], (f"not bisected: HEAD does not descend from {base[:12]} (a rewritten "
                    "history): the commits between them are not a line")
    commits = steps.commits(base, head)
    if len(commits) <= 1:
        return [CulpritCommit(commit=head, subject=steps.subject(head))], \
            f"the only commit since {base[:12]}"
    command = steps.bisect_command(base, head, ids, most_rounds)
    if len(commits) > max_commits:
        return [], (f"not bisected: {len(commits)} commits since {base[:12]}, more than "
                    f"--max-commits {max_commits}; `{command}`")
    bad_rounds = {c: list(found.cases[c][0].timing.round_log_ratios)
                  for c in ids if found.cases[c][0].timing is not None}
    try:
        result = steps.bisect(base, head, ids, rounds=rounds, max_rounds=most_rounds,
                              afford=lambda r: budget.afford(r, len(ids)),
                              bad_rounds=bad_rounds)
    except MibenchError as e:
        return [], f"not bisected: {e}; `{command}`"
    if result["verdict"] == "found":
        named = [CulpritCommit(commit=c["commit"], subject=c["subject"],
                               change=c["change"], partial=c["partial"])
                 for c in result["culprits"]]
        measured = sum(1 for st in result["steps"] if not st.get("same_as"))
        how = result.get("how") or f"{measured} A/B steps over {result['candidates']} commits"
        return named, f"bisect: {how} ({result['skipped']} not measured: the same code)" \
            if result.get("skipped") else f"bisect: {how}"
    return [], f"bisect left it undecided: {result['stopped'] or result['decide']}"
