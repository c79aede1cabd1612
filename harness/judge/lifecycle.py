"""What a night does to the regressions of its history (pure: the index the night read, its
judgements and findings in; the index as the night leaves it out, before the store merges
it with the index as it stands at save time).

A regression's life cycle (records/nightly.py `Regression`):

- **suspected**: a suspicion (slower than the threshold, or a change point) that `ab` left
  open (undecided, or the budget ran out): recorded so it can be seen; the next night looks
  again;
- **confirmed**: `ab` between the last passing commit and HEAD confirmed it, with the
  commit(s) bisect named (a suspected record of the same measurement moves on, keeping its
  id); it fails every night until
- **fixed**: a later night's run is faster than its confirmed-bad level and `ab` against
  the confirming commit agrees (not a single noisy run), or
- **accepted** (`mibench accept`: who, why, when);
- **disproved**: `ab` found no regression (or a later night showed the case within the
  threshold), not chased again.

A confirmed improvement (`ab`) is kept as a record of `kind` improvement, status
`confirmed`, flagged for a look (an unexpected speedup is often a bug); `accept` takes it.
"""

from __future__ import annotations

from ..records.nightly import Event, NightlyIndex, Regression, regression_id
from ..util import now
from ..verdicts import DISPROVED, IMPROVEMENT, PASS, SUSPECTED_REGRESSION, SUSPICIOUS_IMPROVEMENT
from .nightly import FIX, Judgement


def open_suspicion(index: NightlyIndex, case_id: str, measurement: str) -> Regression | None:
    return next((r for r in reversed(index.regressions) if r.status == "suspected"
                 and r.case_id == case_id and r.measurement == measurement), None)


def apply_night(index: NightlyIndex, js: list[Judgement], confirmed: list[Regression],
                commit: str, reproduce: dict[str, str]) -> None:
    """Move the index's regressions through the night's findings (the module docstring);
    `reproduce`: the command that shows each case again."""
    at = now()
    for r in confirmed:
        r.reproduce = reproduce.get(r.case_id, "")
        before = open_suspicion(index, r.case_id, r.measurement)
        if before is None:
            index.regressions.append(r)
            continue
        events = before.events + r.events
        index.regressions[index.regressions.index(before)] = r.model_copy(
            update={"id": before.id, "evidence_run": before.evidence_run or r.evidence_run,
                    "events": events})
    for j in js:
        _settle_one(index, j, commit, at, reproduce.get(j.case_id, ""))


def _settle_one(index: NightlyIndex, j: Judgement, commit: str, at: str, repro: str) -> None:
    if j.known is not None and j.purpose == FIX and j.verdict == PASS:
        known = index.find(j.known.id)
        if known is not None and known.status == "confirmed":
            known.fixed_at, known.fix = commit, j.reason
            known.moved("fixed", at, commit, j.reason)
        return
    suspicion = open_suspicion(index, j.case_id, j.measurement)
    if j.verdict == DISPROVED and j.source.startswith("ab"):
        r = suspicion or _new(j, commit, "disproved", at)
        r.change, r.low, r.high, r.source = j.change, j.low, j.high, j.source
        r.verdict = j.ab_verdict
        if suspicion is None:
            index.regressions.append(r)
        r.moved("disproved", at, commit, j.reason)
    elif j.verdict == SUSPECTED_REGRESSION and j.confirm is not None:
        if suspicion is None:
            r = _new(j, commit, "suspected", at)
            r.reproduce = repro
            index.regressions.append(r)
            r.events.append(Event(at=at, status="suspected", commit=commit, note=j.reason))
    elif j.verdict == PASS and suspicion is not None:
        suspicion.moved("disproved", at, commit, f"a later night showed it within the "
                                                 f"threshold: {j.reason}")
    elif j.verdict in (IMPROVEMENT, SUSPICIOUS_IMPROVEMENT):
        r = _new(j, commit, "confirmed", at, kind="improvement")
        r.verdict, r.reproduce = j.verdict, repro
        if index.find(r.id) is None:
            index.regressions.append(r)
            r.events.append(Event(at=at, status="confirmed", commit=commit, note=j.reason))


def _new(j: Judgement, commit: str, status: str, at: str, kind: str = "regression"
         ) -> Regression:
    return Regression(id=regression_id(j.case_id, j.measurement, commit, kind), kind=kind,
                      case_id=j.case_id, measurement=j.measurement, status=status,
                      good=j.confirm or "", bad=commit, evidence_run=j.evidence_run,
                      level_run=j.evidence_run, change=j.change, low=j.low, high=j.high,
                      source=j.source, verdict=j.verdict)
