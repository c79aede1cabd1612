"""What the nightly decides once it has measured (records and judgements in, words out;
nothing measured, nothing written): a case's rounds re-judged after more looks (`rejudge`),
its word after `ab` (`settle`: `regression` confirms it, `unchanged` passes it or disproves a
suspicion, a speedup disproves a suspicion or confirms an improvement, anything else leaves
it open), the night's word and exit code (`night_word`), whether the baseline moves to HEAD
(`promotes`), and how many nights in a row it has left a case undecided (`blind_streak`).
harness/nightly/ measures and writes; the rules are here, beside judge/nightly.py's
judgement of the night's run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..records import ABCase, ABRecord
from ..records.ab import Timing
from ..records.nightly import NightlyIndex
from ..verdicts import (
    CONFIRMED_REGRESSION,
    DISPROVED,
    IMPROVEMENT,
    KNOWN_REGRESSION,
    NIGHT_ORDER,
    NOT_COMPARED,
    PASS,
    REGRESSION,
    REMOVED,
    SKIPPED,
    SUSPICIOUS_IMPROVEMENT,
    UNCHANGED,
)
from .nightly import FIX, UNTIMED_FAILS, Judgement, pct
from .paired import paired_test

FASTER = (IMPROVEMENT, SUSPICIOUS_IMPROVEMENT)  # `ab`'s words of a confirmed speedup
PROMOTES = (PASS, DISPROVED, SKIPPED, REMOVED)  # every case one of these: a confirmed pass
FAILS = (CONFIRMED_REGRESSION, KNOWN_REGRESSION, *UNTIMED_FAILS)  # words that fail a night
BLIND_EXIT = 5  # the last `max_undecided` nights each left a case undecided


@dataclasses.dataclass
class Measured:
    """What `ab` said of each case (its case and the A/B record it came from), and why a
    case was not measured."""

    cases: dict[str, tuple[ABCase, ABRecord]] = dataclasses.field(default_factory=dict)
    stopped: dict[str, str] = dataclasses.field(default_factory=dict)


def rejudge(case: ABCase, alpha: float, min_effect: float) -> None:
    """The case's timing verdict from all its rounds at `alpha` (a case whose new side
    failed every round, whose base did, or whose scores moved keeps `ab`'s word)."""
    fails = not any(s.status == "ok" for s in case.new)
    unmeasured = not any(s.status == "ok" for s in case.base)
    if case.timing is None or fails or unmeasured or (case.scores and case.scores.moved):
        return
    test = paired_test(list(case.timing.round_log_ratios), alpha, min_effect)
    case.timing = Timing(**test.as_dict(), round_log_ratios=case.timing.round_log_ratios)
    case.verdict, case.why = test.verdict, test.line()


def settle(j: Judgement, found: Measured) -> Judgement:
    """The case's word after `ab` (the module docstring); `compare`'s figure is kept beside
    `ab`'s (`run_change`)."""
    if j.confirm is None:
        return j
    if j.case_id not in found.cases:
        why = found.stopped.get(j.case_id, "`ab` did not measure it")
        return dataclasses.replace(j, reason=f"{j.reason}; not decided: {why} (left open)")
    case, record = found.cases[j.case_id]
    t = case.timing
    ab = dict(change=t.change if t else None, low=t.low if t else None,
              high=t.high if t else None, source=f"ab, {record.rounds} rounds",
              run_change=j.change, run_low=j.low, run_high=j.high, ab_verdict=case.verdict)
    line = (f"`ab` {record.base.commit[:12]}..{record.new.commit[:12]}: {case.verdict}: "
            f"{case.why}")
    if j.purpose == FIX:
        if case.verdict in FASTER:
            return dataclasses.replace(j, **ab, verdict=PASS,
                                       reason=f"fixed: faster than the confirmed-bad commit "
                                              f"{j.confirm[:12]}: {line}")
        return dataclasses.replace(j, **ab, reason=f"{line}; still present ({j.reason})")
    if case.verdict == REGRESSION:
        return dataclasses.replace(j, **ab, verdict=CONFIRMED_REGRESSION, reason=line)
    if case.verdict in (UNCHANGED, *FASTER) and j.suspected:
        return dataclasses.replace(j, **ab, verdict=DISPROVED,
                                   reason=f"{line} (the run showed {pct(j.change)})")
    if case.verdict == UNCHANGED:
        return dataclasses.replace(j, **ab, verdict=PASS, reason=f"{line} (the run showed "
                                                                 f"{pct(j.change)})")
    if case.verdict in FASTER:  # the night's own parity judges whether it is suspicious
        return dataclasses.replace(j, **ab, verdict=IMPROVEMENT, reason=line)
    return dataclasses.replace(j, **ab, reason=f"{line}; left open, not marked (the run: "
                                               f"{j.reason})")


def night_word(js: list[Judgement], parity: bool) -> tuple[str, int]:
    """The night's word (its worst case's) and exit code."""
    words = [j.verdict for j in js]
    if not any(w not in (SKIPPED, REMOVED) for w in words):
        return NOT_COMPARED, 2
    worst = min(words, key=rank)
    if any(w in FAILS for w in words):
        return worst, 1
    return (REGRESSION, 1) if parity else (worst, 0)


def promotes(js: list[Judgement], code: int, descends: bool,
             vouched: Callable[[str], bool]) -> bool:
    """Whether the baseline moves to HEAD: the night passed (exit 0), HEAD descends from the
    baseline commit, and every case is a confirmed pass (PROMOTES) or an improvement the
    run's own parity vouches for (`vouched(case_id)`)."""
    return code == 0 and descends and all(
        j.verdict in PROMOTES or (j.verdict == IMPROVEMENT and vouched(j.case_id)) for j in js)


def blind_streak(started: NightlyIndex, undecided: list[str], code: int) -> int:
    """How many nights in a row, this one included, left a case undecided without failing."""
    if not undecided or code != 0:
        return 0
    streak = 1
    for night in reversed(started.nights):
        if not night.undecided or night.exit_code not in (0, BLIND_EXIT):
            break
        streak += 1
    return streak


def rank(word: str) -> int:
    """Where a night's word stands in NIGHT_ORDER (the one that needs a look first: 0)."""
    return NIGHT_ORDER.index(word) if word in NIGHT_ORDER else len(NIGHT_ORDER)
