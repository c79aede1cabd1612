"""A seeding night (docs/nightly.md, "One night", step 1): the config run `seed_runs`
times at HEAD to learn its noise; the quietest run becomes the baseline when every case of
every run is ok and parity passed (else exit 1 and no baseline: the next night seeds
again). A case with fewer than NEED_QUIET runs on a machine that was not busy is
`insufficient data` (an undecided night)."""

from __future__ import annotations

from ..judge.busy import share
from ..judge.comparable import measurement_id
from ..judge.nightly import NEED_QUIET, Judgement, quiet_runs
from ..judge.noise import AAGroups
from ..judge.settle import Measured, night_word
from ..records import RunRecord, read_artifact
from ..records.nightly import Baseline, Night, NightSummary
from ..util import now
from ..verdicts import FAILED, INSUFFICIENT_DATA, PASS
from .lines import noise_note
from .night import NightResult, Tonight, noise_floor, summary_case, write_night


def seed(n: Tonight) -> NightResult:
    """Run the config `seed_runs` times at HEAD: the quietest run becomes the baseline when
    every case of every run is ok and parity passed (else exit 1, no baseline)."""
    o, steps, folder = n.o, n.steps, n.folder
    commit, subject = n.head
    t0 = n.clock()
    paths = [steps.run(folder.runs) for _ in range(o.seed_runs)]
    records = [read_artifact(p) for p in paths]
    took = {"seed": n.clock() - t0}
    quiet = quiet_runs(records, leave_out=set())
    js, undecided = [], []
    for case in records[0].cases:
        runs = [next((c for c in r.cases if c.case_id == case.case_id), None) for r in records]
        failed = [k + 1 for k, c in enumerate(runs) if c is None or c.status == "failed"]
        count = quiet.get((case.case_id, measurement_id(records[0], case)), 0)
        if failed:
            word, why = FAILED, f"failed in seed run(s) {failed}"
        elif case.status != "ok":
            word, why = case.status, case.error.message if case.error else case.status
        else:
            word = PASS if count >= NEED_QUIET else INSUFFICIENT_DATA
            why = (f"seeded: {count} of {o.seed_runs} runs at this commit on a machine that "
                   f"was not busy ({NEED_QUIET} are needed to learn its noise)")
        js.append(Judgement(case_id=case.case_id, measurement="", verdict=word, reason=why,
                            source="seed", other_load=share(case.load)))
        if word == INSUFFICIENT_DATA:
            undecided.append(case.case_id)
    parity = any(r.parity is not None and r.parity.passed is False for r in records)
    word, code = night_word(js, parity)
    chosen = min(zip(records, paths, strict=True), key=lambda rp: _loudest(rp[0]))
    mine = n.started.model_copy(deep=True)
    if code == 0:
        mine.baseline = Baseline(
            commit=commit, subject=subject, run_id=chosen[0].run_id,
            artifact=folder.relative(chosen[1]), since=now(),
            reason=f"{'reseed' if o.reseed else 'seed'}: the quietest of {o.seed_runs} runs")
    links = steps.reports(chosen[1], None, folder.runs, n.where, "")
    aa = AAGroups(records)
    n.notes += noise_note(aa, chosen[0], str(folder.runs), o.threshold, Measured())
    summary = NightSummary(config=o.config, commit=commit, subject=subject, verdict=word,
                           exit_code=code, promoted=code == 0, notes=n.notes,
                           cases=[summary_case(j) for j in js], seconds=took,
                           noise=noise_floor(aa, chosen[0], folder))
    night = Night(at=now(), commit=commit, subject=subject, runs=[r.run_id for r in records],
                  cases={j.case_id: j.verdict for j in js}, verdict=word, exit_code=code,
                  promoted=code == 0, undecided=undecided,
                  summary=folder.relative(n.where / "summary.md"))
    return write_night(n, mine, night, summary, links)


def _loudest(record: RunRecord) -> float:
    """The largest other load over a run's cases (unrecorded: 0)."""
    return max((share(c.load) or 0.0 for c in record.cases), default=0.0)
