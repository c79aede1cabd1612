"""`mibench nightly`: one night of the loop (docs/nightly.md), through a `steps` object
(harness/nightly/steps.py: the repository, a run, `ab`, bisect, reports) so its
decisions can be tested on made-up artifacts.

1. Hold the folder (nightly/store.py: one night at a time) and read `runs/` (a damaged
   file is left out with a line).
2. No baseline yet (or `reseed`): seed (nightly/seed.py: `seed_runs` runs at HEAD to learn
   its noise; the quietest becomes the baseline, none when a case failed: exit 1).
3. Else run it once at HEAD and judge the run against the history (judge/nightly.py):
   every case `compare` does not show within the threshold goes to `ab`.
4. Confirm with `ab` and bisect (nightly/confirm.py), the budget going where the answer
   is: suspicions, then bisecting the confirmed, then the undecided cases.
5. Record the night (judge/lifecycle.py), merge it into the index as it stands
   (nightly/store.py), then write the summary (<= 40 lines), its JSON twin, the report
   and the history: nothing the summary says is missing from the saved index.

The baseline moves to HEAD only when every case passed (`compare` or `ab` showed it
within the threshold, or `ab` confirmed an improvement that the new run's parity vouches
for), HEAD descends from the baseline commit, and nobody moved the baseline meanwhile.
The rules (a case's word after `ab`, the night's word, the baseline's move, the blind
streak) are harness/judge/settle.py's; this module measures, asks and writes.

Exit 0: every case decided and none failed, or an undecided night (it keeps the
baseline); 1: a confirmed or known regression, or what `compare` fails without timing;
2: nothing could be judged; `BLIND_EXIT` (5): the last `max_undecided` nights each left a
case undecided (the nightly would go blind quietly); 4: the index could not be written;
`store.HELD_EXIT` (6): another night holds the folder.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError

from ..judge.lifecycle import apply_night
from ..judge.nightly import FIX, Evidence, Judgement, judge_night
from ..judge.settle import BLIND_EXIT, Measured, blind_streak, night_word, promotes, settle
from ..judge.suspicious import flagged, run_vouched
from ..records import RunRecord, read_artifact
from ..records.nightly import Baseline, Night, NightSummary
from ..util import now
from ..verdicts import (
    CONFIRMED_REGRESSION,
    UNDECIDED_WORDS,
)
from . import store
from .confirm import Budget, culprits, measure
from .index import Folder, baseline_run
from .lines import blind_note, culprit_lines, evidence_section, left_open, noise_note
from .night import (
    NightlyOptions,
    NightResult,
    Tonight,
    noise_floor,
    summary_case,
    write_night,
)


def nightly(o: NightlyOptions, steps, clock: Callable[[], float] = time.monotonic,
            note: Callable[[str], None] = lambda line: print(line, file=sys.stderr)
            ) -> NightResult:
    """One night (the module docstring)."""
    folder = Folder(Path(o.history))
    with store.night_lock(folder.root):
        started = store.read(folder.root, o.config, o.target)
        head = steps.head()
        runs, damaged = store.runs(folder.runs, note)
        n = Tonight(o, steps, folder, started, head,
                   folder.night(dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ"), head[0]),
                   runs, damaged, clock, note)
        if started.baseline is None or o.reseed:
            note(f"nightly: {'reseeding' if o.reseed else 'no baseline yet'}: {o.seed_runs} "
                 f"runs of {o.config} at {head[0][:12]} to learn its noise")
            from .seed import seed

            return seed(n)
        return judge_and_confirm(n)


def judge_and_confirm(n: Tonight) -> NightResult:
    o, steps, folder, head = n.o, n.steps, n.folder, n.head[0]
    baseline = n.started.baseline
    base = baseline_run(folder, baseline)
    if not steps.reaches(baseline.commit):
        raise MibenchError(f"the last commit that passed, {baseline.commit[:12]}, is not "
                           "in the repository (a shallow clone needs fetch-depth: 0; after a "
                           "rewritten history, --reseed)", field="--repo")
    descends = steps.descends(baseline.commit, head)
    if not descends:
        n.notes.append(f"HEAD {head[:12]} does not descend from the baseline commit "
                       f"{baseline.commit[:12]} (a force-push or a rewritten history): the "
                       "baseline stays where it is, `ab` still compares the two, bisect does "
                       "not run; `mibench nightly --reseed` starts a baseline here")
    t0 = n.clock()
    path = steps.run(folder.runs)
    new, took = read_artifact(path), {"run": n.clock() - t0}
    n.runs = [r for r in n.runs if r.run_id != new.run_id] + [new]
    e = Evidence(new, base, baseline.commit, n.runs, n.started, o.threshold,
                 where=str(folder.runs))
    n.evidence = e
    js, comp = judge_night(e)
    budget = Budget(o.budget_s, 2 * took["run"] / max(1, len(new.cases)), n.clock)
    found, known = Measured(), []
    # the budget where the answer is: suspicions, bisecting them, then the undecided cases
    for which in (lambda j: j.suspected or (j.purpose == FIX and not j.later),
                  lambda j: True):
        t0 = n.clock()
        js = confirm(n, js, found, budget, which)
        took["confirm"] = took.get("confirm", 0.0) + n.clock() - t0
        t0 = n.clock()
        named = {k.case_id for k in known}
        fresh = [j for j in js if j.verdict == CONFIRMED_REGRESSION and j.case_id not in named]
        known += culprits(fresh, found, steps, head, rounds=o.rounds,
                          most_rounds=o.most_rounds, max_commits=o.max_commits, budget=budget,
                          level_run=new.run_id, descends=descends)
        if fresh:
            took["bisect"] = took.get("bisect", 0.0) + n.clock() - t0
    failing = [p for p in comp.parity if p.regression]
    if failing:  # the summary's cases may all pass: say which checks failed the night
        n.notes.insert(0, f"parity: {len(failing)} check(s) newly not passing (the night "
                       "fails): " + "; ".join(f"{p.key}: {p.new_status}"
                                              for p in failing[:3]))
    return finish(n, new, path, js, known, bool(failing), found, took, descends)


def confirm(n: Tonight, js: list[Judgement], found: Measured, budget: Budget, which
            ) -> list[Judgement]:
    """`ab` of the cases `which` picks among those still to confirm, grouped by the commit
    each is judged from; their words settled."""
    todo = [j for j in js if j.confirm is not None and j.case_id not in found.cases
            and j.case_id not in found.stopped and which(j)]
    groups: dict[str, list[str]] = {}
    for j in todo:
        groups.setdefault(j.confirm, []).append(j.case_id)
    for base, ids in groups.items():
        n.note(f"nightly: confirming {len(ids)} case(s) with ab {base[:12]}..{n.head[0][:12]}")
        got = measure(n.steps, base, n.head[0], ids, rounds=n.o.rounds,
                      most_rounds=n.o.most_rounds, budget=budget, out=n.folder.ab,
                      clock=n.clock, min_effect=n.o.threshold)
        found.cases |= got.cases
        found.stopped |= got.stopped
    ids = {j.case_id for j in todo}
    return [settle(j, found) if j.case_id in ids else j for j in js]


def suspicious(js: list[Judgement], new: RunRecord) -> list[Judgement]:
    """A confirmed improvement of 2x or more that the new run's parity does not vouch for
    is a `suspicious improvement` (the one rule: harness/judge/suspicious.py)."""
    return [flagged(j, run_vouched(new, j.case_id)) for j in js]


def finish(n: Tonight, new: RunRecord, path: Path, js: list[Judgement], known: list,
           parity: bool, found: Measured, took: dict, descends: bool) -> NightResult:
    """Record the night in the index (merged as it stands), then write the summary, its
    twin, the report and the history."""
    o, steps, folder = n.o, n.steps, n.folder
    commit, subject = n.head
    js = suspicious(js, new)
    word, code = night_word(js, parity)
    promote = promotes(js, code, descends, lambda case_id: run_vouched(new, case_id))
    undecided = [j.case_id for j in js if j.verdict in UNDECIDED_WORDS]
    previous = n.started.baseline
    mine = n.started.model_copy(deep=True)
    repro = {k.case_id: k_repro(steps, k, o) for k in known}
    repro |= {j.case_id: steps.ab_command(j.confirm, commit, [j.case_id], o.most_rounds * 4)
              for j in js if j.confirm is not None and j.case_id not in repro}
    apply_night(mine, js, known, commit, repro)
    if promote:
        mine.baseline = Baseline(commit=commit, subject=subject, run_id=new.run_id,
                                 artifact=folder.relative(path), since=now(), reason="pass")
    streak = blind_streak(n.started, undecided, code)
    if streak >= o.max_undecided and code == 0:
        code = BLIND_EXIT
        n.notes.insert(0, blind_note(streak, js, found, steps, commit, o.threshold,
                                     o.most_rounds))
    links = steps.reports(path, folder.root / previous.artifact, folder.runs, n.where,
                          evidence_section(js), n.evidence.history)
    reproduce = [repro[k.case_id] for k in known][:1]
    reproduce += [k_repro(steps, k, o) for k in n.started.open_known()
                  if k.case_id not in repro][:1]
    n.notes += noise_note(n.evidence.aa, new, str(folder.runs), o.threshold, found)
    summary = NightSummary(
        config=o.config, commit=commit, subject=subject, baseline=previous.commit,
        verdict=word, exit_code=code, promoted=promote,
        cases=[summary_case(j) for j in js], culprits=culprit_lines(mine, js, known),
        undecided=left_open(steps, js, found, commit, o.threshold, o.most_rounds),
        reproduce=[r for r in reproduce if r],
        notes=n.notes, noise=noise_floor(n.evidence.aa, new, folder), seconds=took)
    night = Night(at=now(), commit=commit, subject=subject, runs=[new.run_id],
                  cases={j.case_id: j.verdict for j in js}, verdict=word, exit_code=code,
                  promoted=promote, undecided=undecided,
                  summary=folder.relative(n.where / "summary.md"))
    return write_night(n, mine, night, summary, links)


def k_repro(steps, k, o: NightlyOptions) -> str:
    """The command that shows a known regression again."""
    if k.culprit is None:
        return steps.bisect_command(k.good, k.bad, [k.case_id], o.most_rounds)
    return steps.ab_command(k.good, k.culprit, [k.case_id], o.most_rounds)


