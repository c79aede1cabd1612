"""Bisect's search (pure: a way to measure a commit's rounds against GOOD in, the
commit(s) that made the change out), the half of `mibench bisect` that
tests/test_sequential.py drives with thousands of synthetic searches; harness/ab/bisect.py
measures each step with `ab`. The rules are bisect.py's docstring; the test of a step is
harness/stats/sequential.py."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from mibench.errors import MibenchError

from ..judge.paired import ALPHA, MIN_EFFECT
from ..stats import sequential as seq
from ..verdicts import INCONCLUSIVE, REGRESSION

BAD, GOOD, PARTIAL, UNDECIDED = REGRESSION, "no regression", "partial", INCONCLUSIVE
WORDS = {seq.HIGH: BAD, seq.LOW: GOOD, seq.BETWEEN: PARTIAL, seq.UNDECIDED: UNDECIDED}
MEASURED = "engines"  # what a revision's worker takes from its checkout (run/bootstrap.py)

Rounds = dict[str, list[float]]  # case id -> the rounds' log ratios against GOOD


def combine(words: list[str]) -> str:
    """A commit's level from its cases' (stats/sequential.py words): `high` when a case
    sits at BAD's level, else `between` when a case sits between and the others are
    decided, `low` when every case sits at GOOD's, else `undecided`; shown as WORDS says
    (`regression`, `partial`, `no regression`, `inconclusive`)."""
    if seq.HIGH in words:
        return seq.HIGH
    if seq.UNDECIDED not in words and seq.BETWEEN in words:
        return seq.BETWEEN
    if words and all(w == seq.LOW for w in words):
        return seq.LOW
    return seq.UNDECIDED


GOOD_KEY = ""  # the level of GOOD itself: 0 exactly


@dataclasses.dataclass(frozen=True)
class Levels:
    """A range's two ends, per case: the commit whose level (its rounds against GOOD) sits
    before the range's first commit, and the commit at its last (`GOOD_KEY`: GOOD's)."""

    low: dict[str, str]
    high: dict[str, str]


@dataclasses.dataclass
class Searcher:
    """The search of one bisect (the module docstring): `measure(commit, rounds)` runs an
    A/B of that many more rounds of the commit against GOOD ({case: log ratios}, {case:
    `ab`'s line}); `tree(commit)` is its measured code's hash; `afford(rounds)` why that
    many more rounds may not start (None: they may)."""

    good: str
    commits: list[str]
    measure: Callable[[str, int], tuple[Rounds, dict[str, str]]]
    tree: Callable[[str], str]
    subject: Callable[[str], str] = lambda commit: ""
    rounds: int = 5
    most_rounds: int = 20
    threshold: float = MIN_EFFECT
    alpha: float = ALPHA
    afford: Callable[[int], str | None] = lambda rounds: None
    note: Callable[[str], None] = lambda line: None
    top: list[str] = dataclasses.field(default_factory=list)  # the cases BAD regressed
    evidence: dict[str, Rounds] = dataclasses.field(default_factory=dict)  # by tree
    lines: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    steps: list[dict] = dataclasses.field(default_factory=list)
    stopped: str | None = None
    planned: int | None = None  # the steps the search takes at most, once the range is known

    @property
    def margin(self) -> float:
        return math.log1p(self.threshold)

    @property
    def schedule(self) -> list[int]:
        return seq.looks(self.rounds, max(self.rounds, self.most_rounds))

    def level(self, commit: str, case: str) -> seq.Level | None:
        """The level of a commit (GOOD_KEY: GOOD's) for a case, from its rounds so far."""
        if commit == GOOD_KEY:
            return seq.GOOD_LEVEL
        d = self.evidence.get(self.tree(commit), {}).get(case, [])
        return seq.Level.of(d, self.alpha, len(self.schedule))

    def relevant(self, levels: Levels) -> list[str]:
        """The cases that change across the range by more than the threshold."""
        out = []
        for c in levels.high:
            lo, hi = self.level(levels.low.get(c, GOOD_KEY), c), self.level(levels.high[c], c)
            if lo is not None and hi is not None and hi.mean - lo.mean > self.margin:
                out.append(c)
        return out

    # --- measuring one commit, look by look --------------------------------------------
    def top_up(self, commit: str, cases: list[str], n: int) -> bool:
        """At least `n` rounds of `commit` for each case (measuring the rest); False when
        the budget stopped it or the commit gave no rounds (it failed)."""
        have = self.evidence.setdefault(self.tree(commit), {})
        more = n - min((len(have.get(c, [])) for c in cases), default=n)
        if more <= 0:
            return True
        why = self.afford(more)
        if why is not None:
            self.stopped = why
            return False
        self.note(f"  {commit[:12]} {self.subject(commit)!r}: {more} more A/B round(s) "
                  f"against {self.good[:12]} ({n} in all)")
        got, lines = self.measure(commit, more)
        for c, d in got.items():
            have.setdefault(c, []).extend(d)
        self.lines.setdefault(self.tree(commit), {}).update(lines)
        return any(got.get(c) for c in cases)

    def decide(self, commit: str, cases: list[str], judge: Callable[[], str],
               levels: Levels | None = None) -> str:
        """`judge` of `commit`'s rounds look by look: at each look the commit gets that many
        rounds, and when still undecided, so do the commits its levels come from; the
        word once decided, or `undecided` when the looks or the budget ran out."""
        for n in self.schedule:
            if not self.top_up(commit, cases, n):
                return seq.UNDECIDED
            if (word := judge()) != seq.UNDECIDED:
                return word
            if levels is None:
                continue
            ends = {k for c in cases for k in (levels.low.get(c, GOOD_KEY), levels.high[c])
                    if k not in (GOOD_KEY, commit)}
            for k in ends:
                if not self.top_up(k, cases, n):
                    return seq.UNDECIDED
            if (word := judge()) != seq.UNDECIDED:
                return word
        return seq.UNDECIDED

    def evidence_of(self, commit: str, cases: list[str]) -> dict[str, str]:
        d = self.evidence.get(self.tree(commit), {})
        lines = self.lines.get(self.tree(commit), {})
        return {c: seq.describe(d.get(c, []), self.alpha, len(self.schedule))
                + (f"; ab: {lines[c]}" if c in lines else "") for c in cases}

    def record(self, commit: str, verdict: str, cases: list[str], same_as: str | None = None
               ) -> dict:
        d = self.evidence.get(self.tree(commit), {})
        step = {"commit": commit, "subject": self.subject(commit), "verdict": verdict,
                "rounds": min((len(d.get(c, [])) for c in cases), default=0),
                "evidence": self.evidence_of(commit, cases), "stopped": self.stopped,
                "same_as": same_as}
        self.steps.append(step)
        how = f"same measured code as {same_as[:12]}" if same_as else \
            f"{step['rounds']} rounds"
        most = f" of at most {self.planned}" if self.planned and \
            self.planned >= len(self.steps) else ""
        self.note(f"step {len(self.steps)}{most}: {commit[:12]} {step['subject']!r}: "
                  f"{verdict} ({how})")
        for case_id, line in step["evidence"].items():
            self.note(f"    {case_id}: {line}")
        return step

    # --- BAD, then the candidates ------------------------------------------------------
    def bad_cases(self, cases: list[str]) -> list[str] | None:
        """The cases at which BAD is surely slower than the threshold, with a settled level;
        None when undecided (or stopped); a MibenchError when BAD is clearly within the
        threshold of GOOD."""
        bad = self.commits[-1]

        def slower(c: str) -> bool:
            lv = self.level(bad, c)
            return lv is not None and lv.low > self.margin and seq.settled(lv)

        def judge() -> str:
            if any(slower(c) for c in cases):
                return seq.HIGH
            levels = [self.level(bad, c) for c in cases]
            if all(lv is not None and -self.margin <= lv.low and lv.high <= self.margin
                   for lv in levels):
                return seq.LOW
            return seq.UNDECIDED

        word = self.decide(bad, cases, judge)
        self.record(bad, WORDS[word], cases)
        if word == seq.LOW:
            raise MibenchError(f"shows no regression against {self.good} in the selected "
                               "cases: nothing to bisect", field=bad)
        return [c for c in cases if slower(c)] if word == seq.HIGH else None

    def candidates(self) -> list[str]:
        """The commits that change the measured code (each against its parent)."""
        out, before = [], self.tree(self.good)
        for c in self.commits:
            tree = self.tree(c)
            if tree != before:
                out.append(c)
            before = tree
        return out

    def judge_step(self, commit: str, levels: Levels, cases: list[str]) -> str:
        """A candidate's word in a range; a commit whose code is GOOD's takes GOOD's level,
        one whose code was measured before takes its rounds."""
        if self.tree(commit) == self.tree(self.good):
            self.record(commit, GOOD, cases, same_as=self.good)
            return seq.LOW
        same = next((s["commit"] for s in self.steps if s["same_as"] is None
                     and s["commit"] != commit and self.tree(s["commit"]) == self.tree(commit)
                     ), None)
        k = len(self.schedule)

        def judge() -> str:
            d = self.evidence.get(self.tree(commit), {})
            return combine([seq.classify(d.get(c, []), self.level(levels.low.get(c, GOOD_KEY),
                                                                  c),
                                         self.level(levels.high[c], c), self.margin,
                                         self.alpha, k) for c in cases])

        word = self.decide(commit, cases, judge, levels)
        self.record(commit, WORDS[word], cases, same_as=same)
        return word

    def first_above(self, cands: list[str], lo: int, hi: int, low: str) -> str | None:
        """The first commit of cands[lo..hi] above the level of `low` (cands[hi] is above
        it): binary search, each step judged between `low`'s level and the level of the
        range's current last commit; None when a step stays undecided."""
        top = cands[hi]
        while lo < hi:
            mid = (lo + hi) // 2
            levels = Levels({c: low for c in self.top}, {c: top for c in self.top})
            cases = self.relevant(levels)
            if not cases:
                return top  # the rest of the range sits at `low`'s level within the threshold
            word = self.judge_step(cands[mid], levels, cases)
            if word in (seq.HIGH, seq.BETWEEN):
                hi, top = mid, cands[mid]
            elif word == seq.LOW:
                lo = mid + 1
            else:
                return None
        return cands[lo]

    def above(self, low: str, high: str) -> bool:
        """Whether `high` sits surely above `low` by more than the threshold in a case (their
        intervals apart by the margin)."""
        for c in self.top:
            lo, hi = self.level(low, c), self.level(high, c)
            if lo is not None and hi is not None and hi.low > lo.high + self.margin:
                return True
        return False

    def more_after(self, commit: str) -> bool:
        """Whether BAD sits surely above `commit`'s level (a later commit made the rest of
        the change): while their means differ by more than the threshold but their
        intervals overlap, both get the next look's rounds."""
        bad = self.commits[-1]
        for n in self.schedule:
            if self.above(commit, bad):
                return True
            gaps = [self.level(bad, c).mean - self.level(commit, c).mean for c in self.top
                    if self.level(bad, c) is not None and self.level(commit, c) is not None]
            if not any(g > self.margin for g in gaps):
                return False
            if not (self.top_up(commit, self.top, n) and self.top_up(bad, self.top, n)):
                return False
        return self.above(commit, bad)

    def culprit(self, commit: str, low: str) -> dict:
        bad = self.commits[-1]
        change = {c: math.expm1(self.level(commit, c).mean - self.level(low, c).mean)
                  for c in self.top}
        return {"commit": commit, "subject": self.subject(commit), "change": change,
                "partial": low != GOOD_KEY or self.above(commit, bad)}


def search(s: Searcher, cases: list[str], bad_rounds: Rounds | None = None) -> dict:
    """{verdict: found | inconclusive, first_bad, subject, culprits, evidence, steps,
    candidates, undecided, decide, stopped, skipped, method} (see `bisect`)."""
    bad = s.commits[-1]
    if bad_rounds:
        s.evidence[s.tree(bad)] = {c: list(d) for c, d in bad_rounds.items()}
    result = {"verdict": UNDECIDED, "first_bad": None, "subject": None, "culprits": [],
              "evidence": {}, "steps": s.steps, "candidates": len(s.commits),
              "undecided": None, "decide": None, "stopped": None, "skipped": 0,
              "method": seq.METHOD}
    if s.tree(bad) == s.tree(s.good):
        raise MibenchError(f"has the same measured code ({MEASURED}/) as {s.good[:12]}: no "
                           "commit between them can have made the change (the machine or "
                           "the inputs did)", field=bad)
    regressed = s.bad_cases(cases)
    if regressed is None:
        return _undecided(s, result)
    cands = s.candidates()
    result["skipped"] = len(s.commits) - len(cands)
    if result["skipped"]:
        s.note(f"bisect: {len(cands)} of {len(s.commits)} commits change the measured code; "
               "the others sit at their parent's level and are not measured")
    s.top = regressed
    found, low, start = [], GOOD_KEY, 0
    while start < len(cands):
        s.planned = plan_steps(s, len(cands) - start)
        commit = s.first_above(cands, start, len(cands) - 1, low)
        if commit is None:
            return _undecided(s, result)
        found.append(commit)
        start = cands.index(commit) + 1
        if start >= len(cands) or not s.more_after(commit):
            break  # BAD sits at this commit's level: the change is accounted for
        low = commit
    found = [s.culprit(c, before) for c, before in zip(found, [GOOD_KEY, *found], strict=False)]
    first = found[0]
    only = len(cands) == 1
    how = "the only commit that changes the measured code" if only else None
    result.update(verdict="found", first_bad=first["commit"], subject=first["subject"],
                  culprits=found, how=how,
                  evidence={c: how for c in regressed} if only else
                  s.evidence_of(first["commit"], regressed))
    return result


def plan_steps(s: Searcher, commits: int) -> int:
    """The steps taken so far plus the binary search's over `commits` (its last known
    above): ceil(log2(commits)), said once; a change in several parts searches again."""
    more = math.ceil(math.log2(commits)) if commits > 1 else 0
    if more:
        s.note(f"bisect: {commits} commit(s) to search: at most {more} more A/B step(s) to "
               "the first that made the change")
    return len(s.steps) + more


def _undecided(s: Searcher, result: dict) -> dict:
    step = s.steps[-1]
    result.update(undecided=step, stopped=s.stopped)
    return result
