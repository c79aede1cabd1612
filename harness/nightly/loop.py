"""`mibench nightly`: one night of the loop (docs/nightly.md), through a `steps` object
(harness/nightly/steps.py: the repository, a run, `ab`, bisect, reports) so its
decisions can be tested on made-up artifacts.

1. No baseline yet (or `reseed`): run the config `seed_runs` times at HEAD to learn its
   noise; the quietest run becomes the baseline (none when a case failed: exit 1).
2. Else run it once at HEAD and judge the run against the history (nightly/judge.py).
3. Confirm every suspicion and every case left inconclusive by a busy machine with `ab`,
   and bisect the confirmed ones (nightly/confirm.py), within the time budget.
4. Write the summary (<= 40 lines) and its JSON twin, the report and the history, and the
   index: the night, the regressions confirmed (known from now on), the suspicions
   disproved; the baseline moves to HEAD only on a confirmed pass.

Exit 0: pass, insufficient data, inconclusive or open suspicions; 1: a confirmed or known
regression, or what `compare` fails without timing (a failed or missing case, moved
scores, memory, timed compiles, parity); 2: nothing could be judged (every case skipped).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..records import RunRecord, read_artifact
from ..records.io import write_artifact, write_output
from ..records.nightly import (
    Baseline,
    Culprit,
    Disproved,
    Night,
    NightlyIndex,
    NightSummary,
    SummaryCase,
)
from ..stats.comparable import measurement_id
from ..stats.load import share
from ..util import now
from ..verdicts import (
    CONFIRMED_REGRESSION,
    DISPROVED,
    FAILED,
    INCONCLUSIVE,
    INSUFFICIENT_DATA,
    KNOWN_REGRESSION,
    NOT_COMPARED,
    PASS,
    REGRESSION,
    REMOVED,
    SKIPPED,
    SUSPECTED_REGRESSION,
)
from .confirm import Budget, Measured, culprits, measure, settle
from .index import Folder, baseline_run, load_index, save_index
from .judge import (
    NEED_QUIET,
    SEED_RUNS,
    UNTIMED_FAILS,
    Evidence,
    Judgement,
    judge_night,
    quiet_runs,
)
from .summary import rank, render

FAILS = (CONFIRMED_REGRESSION, KNOWN_REGRESSION, *UNTIMED_FAILS)
PROMOTES = (PASS, DISPROVED, SKIPPED, REMOVED)  # every case one of these: a confirmed pass
OPEN = (SUSPECTED_REGRESSION, INCONCLUSIVE, KNOWN_REGRESSION)  # words `ab` may leave open


@dataclasses.dataclass(frozen=True)
class NightlyOptions:
    """How a night judges and what it may spend (docs/cli.md `nightly`)."""

    history: Path
    config: str  # the config's name
    target: str = "engines"  # or "server" (--server-repo)
    threshold: float = 0.05
    rounds: int = 5
    max_rounds: int | None = None  # default 4 x rounds
    max_commits: int = 32
    budget_s: float = 3600.0
    seed_runs: int = SEED_RUNS
    reseed: bool = False
    link_base: str = ""  # prefix of the summary's links (e.g. the CI run's artifacts page)

    @property
    def most_rounds(self) -> int:
        return max(self.rounds, self.max_rounds if self.max_rounds is not None
                   else 4 * self.rounds)


@dataclasses.dataclass(frozen=True)
class NightResult:
    summary: NightSummary
    markdown: str
    folder: Path  # the night's folder

    @property
    def exit_code(self) -> int:
        return self.summary.exit_code


def nightly(o: NightlyOptions, steps, clock: Callable[[], float] = time.monotonic,
            note: Callable[[str], None] = lambda line: print(line, file=sys.stderr)
            ) -> NightResult:
    """One night (the module docstring)."""
    folder = Folder(Path(o.history))
    index = load_index(folder, o.config, o.target)
    head, subject = steps.head()
    night = folder.night(dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ"), head)
    if index.baseline is None or o.reseed:
        note(f"nightly: {'reseeding' if o.reseed else 'no baseline yet'}: {o.seed_runs} runs "
             f"of {o.config} at {head[:12]} to learn its noise")
        return seed(o, steps, folder, index, (head, subject), night, clock)
    base = baseline_run(folder, index.baseline)
    if not steps.reaches(index.baseline.commit):
        from mibench.errors import MibenchError

        raise MibenchError(f"the last commit that passed, {index.baseline.commit[:12]}, is not "
                           "in the repository (a shallow clone needs fetch-depth: 0; after a "
                           "rewritten history, --reseed)", field="--repo")
    t0 = clock()
    path = steps.run(folder.runs)
    new, took = read_artifact(path), {"run": clock() - t0}
    runs = _runs(folder)
    js, comp = judge_night(Evidence(new, base, index.baseline.commit, runs, index,
                                    o.threshold, where=str(folder.runs)))
    budget = Budget(o.budget_s, 2 * took["run"] / max(1, len(new.cases)), clock)
    t0 = clock()
    found = Measured()
    for confirm_base, ids in _to_confirm(js).items():
        note(f"nightly: confirming {len(ids)} case(s) with ab {confirm_base[:12]}..{head[:12]}")
        got = measure(steps, confirm_base, head, ids, rounds=o.rounds,
                      most_rounds=o.most_rounds, budget=budget, out=folder.ab, clock=clock)
        found.cases |= got.cases
        found.stopped |= got.stopped
    js = [settle(j, found) for j in js]
    took["confirm"] = clock() - t0
    t0 = clock()
    known = culprits(js, found, steps, head, rounds=o.rounds, most_rounds=o.most_rounds,
                     max_commits=o.max_commits, budget=budget, level_run=new.run_id)
    if known:
        took["bisect"] = clock() - t0
    parity = any(p.regression for p in comp.parity)
    return finish(o, steps, folder, index, night, (head, subject), new, path, js, known,
                  parity, found, took)


def _runs(folder: Folder) -> list[RunRecord]:
    """Every run of the history (other kinds of file there are skipped)."""
    from ..stats.history import load_dir

    return load_dir(folder.runs).records


def _to_confirm(js: list[Judgement]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for j in js:
        if j.confirm is not None:
            groups.setdefault(j.confirm, []).append(j.case_id)
    return groups


def night_word(js: list[Judgement], parity: bool) -> tuple[str, int]:
    """The night's word (its worst case's) and exit code."""
    words = [j.verdict for j in js]
    if not any(w not in (SKIPPED, REMOVED) for w in words):
        return NOT_COMPARED, 2
    worst = min(words, key=rank)
    if any(w in FAILS for w in words):
        return worst, 1
    return (REGRESSION, 1) if parity else (worst, 0)


def finish(o: NightlyOptions, steps, folder: Folder, index: NightlyIndex, night: Path,
           head: tuple[str, str], new: RunRecord, path: Path, js: list[Judgement],
           known: list, parity: bool, found: Measured, took: dict) -> NightResult:
    """Update the index (known, fixed, disproved, the baseline on a confirmed pass), write
    the summary, its twin, the report and the history."""
    commit, subject = head
    word, code = night_word(js, parity)
    promote = code == 0 and all(j.verdict in PROMOTES for j in js)
    previous = index.baseline
    index.known += known
    for j in js:
        if j.known is not None and j.purpose == "fix" and j.verdict == PASS:
            j.known.status, j.known.fixed_at = "fixed", commit
        if j.verdict == DISPROVED and j.source.startswith("ab"):
            index.disproved.append(Disproved(
                case_id=j.case_id, measurement=j.measurement, commit=commit,
                evidence_run=j.evidence_run, base=j.confirm or "", change=j.change,
                low=j.low, high=j.high, verdict=found.cases[j.case_id][0].verdict or "",
                at=now()))
    if promote:
        index.baseline = Baseline(commit=commit, subject=subject, run_id=new.run_id,
                                  artifact=folder.relative(path), since=now(), reason="pass")
    links = steps.reports(path, folder.root / previous.artifact, folder.runs, night)
    reproduce = [k_repro(steps, k, o) for k in known][:1]
    reproduce += [k_repro(steps, k, o) for k in index.open_known() if k not in known][:1]
    summary = NightSummary(
        config=o.config, commit=commit, subject=subject, baseline=previous.commit,
        verdict=word, exit_code=code, promoted=promote,
        cases=[_summary_case(j) for j in js], culprits=_culprits(index, js, known),
        undecided=left_open(steps, js, found, commit, o), reproduce=[r for r in reproduce if r],
        noise=_noise(_runs(folder), new, folder), seconds=took)
    return write_night(o, folder, index, night, summary, [new.run_id], links)


def left_open(steps, js: list[Judgement], found: Measured, commit: str,
              o: NightlyOptions) -> list[str]:
    """A line for each case `ab` was to decide and did not: why, and the command that
    decides it (more rounds, on a quiet machine)."""
    out = []
    for j in js:
        measured = j.case_id in found.cases
        if j.confirm is None or j.verdict not in OPEN or (measured and j.purpose == "fix"):
            continue
        if measured:
            rounds = found.cases[j.case_id][1].rounds
            why = f"`ab` left it {found.cases[j.case_id][0].verdict} at {rounds} rounds"
        else:
            rounds, why = o.most_rounds, found.stopped.get(j.case_id, "not measured")
        out.append(f"`{j.case_id}`: {why}; decide with "
                   f"`{steps.ab_command(j.confirm, commit, [j.case_id], rounds * 4)}`")
    return out


def k_repro(steps, k, o: NightlyOptions) -> str:
    """The command that shows a known regression again."""
    if k.culprit is None:
        return steps.bisect_command(k.good, k.bad, [k.case_id], o.most_rounds)
    return steps.ab_command(k.good, k.culprit, [k.case_id], o.most_rounds)


def _culprits(index: NightlyIndex, js: list[Judgement], known: list) -> list[Culprit]:
    """The new culprits, then the known regressions still present (one line a commit)."""
    out: dict[tuple, Culprit] = {}
    present = {j.case_id for j in js if j.verdict == KNOWN_REGRESSION}
    entries = [(k, False) for k in known] + [(k, True) for k in index.open_known()
                                             if k not in known and k.case_id in present]
    for k, old in entries:
        commit = k.culprit or f"{k.good[:12]}..{k.bad[:12]}"
        key = (commit, old)
        if key not in out:
            out[key] = Culprit(commit=commit, subject=k.subject or "no first bad commit named",
                               known=old, bisect=k.bisect if not old else
                               f"confirmed {k.confirmed_at[:10]}; not bisected again")
        out[key].cases.append(k.case_id)
    return list(out.values())


def _summary_case(j: Judgement) -> SummaryCase:
    return SummaryCase(case_id=j.case_id, verdict=j.verdict, change=j.change, low=j.low,
                       high=j.high, source=j.source, reason=j.reason, other_load=j.other_load)


def _noise(runs: list[RunRecord], new: RunRecord, folder: Folder) -> str:
    """The noise floor the night's run is judged at (leaving it out) and its source."""
    from ..stats.noise import floor_for

    floor = floor_for(runs, str(folder.runs), frozenset({new.run_id}),
                      new.provenance.devices.platform)
    return f"{floor.value:.1%} ({floor.source})"


def write_night(o: NightlyOptions, folder: Folder, index: NightlyIndex, night: Path,
                summary: NightSummary, runs: list[str], links: dict) -> NightResult:
    """The summary and its twin in the night's folder, then the index (atomically)."""
    summary.links = {name: o.link_base + folder.relative(where)
                     if not where.startswith("not written") else where
                     for name, where in {**links, "summary": str(night / "summary.json"),
                                         "index": str(folder.index)}.items()}
    text = render(summary)
    write_output(night / "summary.md", text, "the summary")
    write_artifact(summary, night / "summary.json")
    index.nights.append(Night(
        at=now(), commit=summary.commit, subject=summary.subject, runs=runs,
        cases={c.case_id: c.verdict for c in summary.cases}, verdict=summary.verdict,
        exit_code=summary.exit_code, promoted=summary.promoted,
        summary=folder.relative(night / "summary.md")))
    save_index(folder, index)
    return NightResult(summary, text, night)


def seed(o: NightlyOptions, steps, folder: Folder, index: NightlyIndex, head: tuple[str, str],
         night: Path, clock) -> NightResult:
    """Run the config `seed_runs` times at HEAD: the quietest run becomes the baseline when
    every case of every run is ok and parity passed (else exit 1, no baseline)."""
    commit, subject = head
    t0 = clock()
    paths = [steps.run(folder.runs) for _ in range(o.seed_runs)]
    records = [read_artifact(p) for p in paths]
    took = {"seed": clock() - t0}
    quiet = quiet_runs(records, leave_out=set())
    js, bad = [], []
    for case in records[0].cases:
        runs = [next((c for c in r.cases if c.case_id == case.case_id), None) for r in records]
        failed = [k + 1 for k, c in enumerate(runs) if c is None or c.status == "failed"]
        n = quiet.get((case.case_id, measurement_id(records[0], case)), 0)
        if failed:
            bad.append(case.case_id)
            word, why = FAILED, f"failed in seed run(s) {failed}"
        elif case.status != "ok":
            word, why = case.status, case.error.message if case.error else case.status
        else:
            word = PASS if n >= NEED_QUIET else INSUFFICIENT_DATA
            why = (f"seeded: {n} of {o.seed_runs} runs at this commit on a machine that was "
                   f"not busy ({NEED_QUIET} are needed to learn its noise)")
        js.append(Judgement(case_id=case.case_id, measurement="", verdict=word, reason=why,
                            source="seed", other_load=share(case.load)))
    parity = any(r.parity is not None and r.parity.passed is False for r in records)
    word, code = night_word(js, parity)
    chosen = min(zip(records, paths, strict=True), key=lambda rp: _loudest(rp[0]))
    if code == 0:
        index.baseline = Baseline(
            commit=commit, subject=subject, run_id=chosen[0].run_id,
            artifact=folder.relative(chosen[1]), since=now(),
            reason=f"{'reseed' if o.reseed else 'seed'}: the quietest of {o.seed_runs} runs")
    links = steps.reports(chosen[1], None, folder.runs, night)
    summary = NightSummary(config=o.config, commit=commit, subject=subject, verdict=word,
                           exit_code=code, promoted=code == 0,
                           cases=[_summary_case(j) for j in js], seconds=took,
                           noise=_noise(records, chosen[0], folder))
    return write_night(o, folder, index, night, summary, [r.run_id for r in records], links)


def _loudest(record: RunRecord) -> float:
    """The largest other load over a run's cases (unrecorded: 0)."""
    return max((share(c.load) or 0.0 for c in record.cases), default=0.0)

