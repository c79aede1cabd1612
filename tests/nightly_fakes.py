"""Made-up artifacts and a fake `steps` for the nightly loop's tests (tests/test_nightly.py):
commits are strings, a run is an artifact built from a table of factors (each commit may
make a case slower for good), `ab` judges made-up rounds with `ab`'s own judge, and
bisect names the first commit whose factor differs from GOOD's. Nothing is measured."""

from __future__ import annotations

import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np

from mibench.harness.ab.rounds import judge, overall
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand
from mibench.harness.judge import paired
from mibench.harness.records import (
    ABCase,
    ABRecord,
    CaseLoad,
    GitInfo,
    RunRecord,
    write_artifact,
)
from mibench.harness.records.ab import RoundSample, Side

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("make_artifacts",
                                               HERE / "data" / "reports" / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

CONFIG = """\
name: nightly-fake
model: {path: embedded:qwen3-0.6b, dtype: bfloat16}
workload: {query_tokens: 2000, num_items: 500, item_tokens: 20, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 1, timed: 5}
cases:
  - {engine: jax, mode: packed, mask: segment}
  - {engine: jax, mode: prefill_extend, extend_batch_size: 12}
"""
PACKED = "jax/packed/mask=segment/tp=1"
EXTEND = "jax/prefill_extend/extend_batch_size=12/tp=1"
SECONDS = {PACKED: 4.76, EXTEND: 0.95}
QUIET, BUSY = 0.02, 0.70


def sha(i: int) -> str:
    return f"{i:02d}" + "c0ffee" * 6 + "ab"


class FakeSteps:
    """Commits 0..n (`sha(i)`); `effects[i]`: {case: factor} that commit i multiplies
    (for good); HEAD is `head`; the next runs' other load is `load`; `ab_says`: a case id
    -> a forced list of round ratios (else the commits' factors, with 1% noise)."""

    def __init__(self, folder: Path, n: int = 8, effects: dict | None = None):
        self.config_path = folder / "nightly.yaml"
        self.config_path.write_text(CONFIG)
        self.config = load_config(self.config_path)
        self.n, self.effects, self.head_i = n, effects or {}, 0
        self.load, self.fail, self.scale, self.score = QUIET, set(), {}, 0.5
        self.ab_says: dict[str, list[float]] = {}
        self.ab_given: dict[str, int] = {}  # rounds of `ab_says` given so far
        self.rewritten = False  # a force-push: HEAD no longer descends from the baseline
        self.spread = 0.0  # noise no load measurement sees: each run's log-sd (VM neighbours)
        self.parity: dict[str, str] = {}  # case id -> the status of its modes parity check
        self.during_run = None  # called after each run (what another process does meanwhile)
        self.calls: list[tuple] = []
        self.counter = itertools.count()

    def factor(self, i: int, case: str) -> float:
        return math.prod(self.effects.get(k, {}).get(case, 1.0) for k in range(i + 1))

    def index(self, commit: str) -> int:
        return next(i for i in range(self.n + 1) if sha(i) == commit)

    # --- the repository --------------------------------------------------------------
    def head(self):
        return sha(self.head_i), self.subject(sha(self.head_i))

    def subject(self, commit):
        return f"commit {self.index(commit)}"

    def reaches(self, commit):
        return any(sha(i) == commit for i in range(self.n + 1))

    def descends(self, ancestor, commit):
        return self.index(ancestor) <= self.index(commit) and not self.rewritten

    def commits(self, good, bad):
        return [sha(i) for i in range(self.index(good) + 1, self.index(bad) + 1)]

    # --- measuring -----------------------------------------------------------------------
    def run(self, out: Path) -> Path:
        k = next(self.counter)
        self.calls.append(("run", self.head_i))
        record = self.record(k)
        path = Path(out) / f"{record.run_id}.json"
        write_artifact(record, path)
        if self.during_run is not None:
            self.during_run()
        return path

    def record(self, k: int) -> RunRecord:
        started = f"2026-05-{1 + k // 24:02d}T{k % 24:02d}:00:00Z"
        rng = np.random.default_rng(k)
        record = make.build("demo.yaml", "1111111", k, make.demo_time, started)
        record.cases = []
        record.config = self.config.resolved()
        record.config_sha256 = self.config.sha256()
        record.run_id = f"nightly-fake-{k:03d}"
        record.provenance.engine_repo = GitInfo(path="/fake", commit=sha(self.head_i),
                                                dirty=False)
        record.parity = None
        for case in expand(self.config):
            seconds = SECONDS[case.case_id] * self.factor(self.head_i, case.case_id)
            seconds *= self.scale.get(case.case_id, 1.0)
            if self.spread:
                seconds *= math.exp(self.spread * rng.standard_normal())
            value = ("RuntimeError", "boom") if case.case_id in self.fail else seconds
            c = make.case_record(case, value, rng, started)
            c.scores = [[[self.score]]] if c.status == "ok" else None
            c.load = CaseLoad(window_s=2.0, cpus=2, other_share=self.load,
                              other_cpu_s=4 * self.load, own_cpu_s=1.0, source="fake")
            record.cases.append(c)
        if self.parity:
            from mibench.harness.records import ParityCheck, ParityRecord

            record.parity = ParityRecord(reference={}, workload={}, checks=[ParityCheck(
                check="modes", case_id=cid, against="jax/single/tp=1", max_log_diff=0.0,
                tolerance=1e-5, status=status) for cid, status in self.parity.items()],
                passed=all(s == "passed" for s in self.parity.values()))
        return record

    def ab(self, base, new, case_ids, rounds, out):
        self.calls.append(("ab", self.index(base), self.index(new), tuple(case_ids), rounds))
        rng = np.random.default_rng(rounds + len(self.calls))
        cases = []
        for cid in case_ids:
            ratio = self.factor(self.index(new), cid) / self.factor(self.index(base), cid)
            if cid in self.ab_says:  # the forced rounds, the next `rounds` of them
                done = self.ab_given.get(cid, 0)
                ratios = self.ab_says[cid][done:done + rounds]
                self.ab_given[cid] = done + rounds
            else:
                ratios = [ratio * (1 + 0.01 * rng.standard_normal()) for _ in range(rounds)]
            cases.append(judged(cid, ratios))
        record = ab_record(base, new, rounds, cases)
        record.run_id += f"-{len(list(Path(out).glob('*.json')))}"  # one file per A/B run
        write_artifact(record, Path(out) / f"{record.run_id}.json")
        return record

    def bisect(self, good, bad, case_ids, *, rounds, max_rounds, afford, bad_rounds):
        """bisect's own search (ab/search.py Searcher) over the commits' factors, each
        round 1% noise; BAD's rounds are the confirmation's."""
        from mibench.harness.ab.search import Searcher, search

        self.calls.append(("bisect", self.index(good), self.index(bad), tuple(case_ids)))
        assert set(bad_rounds) == set(case_ids) and all(bad_rounds.values())
        g = self.index(good)
        rng = np.random.default_rng(g)

        def measure(commit, k):
            i = self.index(commit)
            return ({c: [math.log(self.factor(i, c) / self.factor(g, c))
                         + 0.01 * rng.standard_normal() for _ in range(k)] for c in case_ids},
                    {c: "fake ab" for c in case_ids})

        s = Searcher(good=good, commits=self.commits(good, bad), measure=measure,
                     tree=lambda c: c, subject=self.subject, rounds=rounds,
                     most_rounds=max_rounds, afford=afford)
        return search(s, list(case_ids), bad_rounds)

    # --- commands and reports ------------------------------------------------------------
    def ab_command(self, base, new, case_ids, rounds):
        return f"mibench ab {base[:12]} {new[:12]} nightly.yaml --case {case_ids[0]} " \
               f"--rounds {rounds}"

    def bisect_command(self, good, bad, case_ids, max_rounds):
        return f"mibench bisect {good[:12]} {bad[:12]} nightly.yaml --case {case_ids[0]}"

    def reports(self, new, baseline, runs, night, evidence="", history=None):
        night.mkdir(parents=True, exist_ok=True)
        (night / "report.md").write_text("report\n" + evidence)
        (night / "history.md").write_text("history\n")
        return {"report": str(night / "report.md"), "history": str(night / "history.md")}


def judged(case_id: str, ratios: list[float], mode: str = "packed",
           model: str = "embedded:qwen3-0.6b", dtype: str = "bfloat16") -> ABCase:
    """A case whose rounds have these new / base ratios, judged by `ab`'s own judge
    (tests/test_bisect.py takes it too)."""
    case = ABCase(case_id=case_id, engine="jax", mode=mode, params={}, model=model,
                  dtype=dtype, tp=1, workload={"label_token_ids": [198]})
    for r, ratio in enumerate(ratios):
        case.base.append(RoundSample(round=r, first=True, status="ok", timed_s=[1.0]))
        case.new.append(RoundSample(round=r, first=False, status="ok", timed_s=[ratio]))
    judge(case, {}, paired.ALPHA, paired.MIN_EFFECT, interleaved=True)
    return case


def ab_record(base: str, new: str, rounds: int, cases: list[ABCase]) -> ABRecord:
    run = make.build("demo.yaml", "1111111", 0, make.demo_time, "2026-05-01T00:00:00Z")
    record = ABRecord(run_id=f"ab-{base[:8]}-{new[:8]}-{rounds}", started_at=run.started_at,
                      config=run.config, config_sha256=run.config_sha256,
                      provenance=run.provenance, rounds=rounds,
                      base=Side(rev=base, commit=base, subject="base"),
                      new=Side(rev=new, commit=new, subject="new"), cases=cases)
    record.verdict = overall(record)
    return record


def nights(tmp_path: Path, n: int = 10, effects: dict | None = None, **defaults):
    """A fake repository of `n` commits (`effects`: commit -> {case: factor}; default commit
    4 makes prefill_extend 2x slower), a history folder and `night(at, **options)`, which
    runs the loop at commit `at` with `defaults` and `options` (NightlyOptions)."""
    from mibench.harness.nightly.loop import NightlyOptions, nightly

    steps = FakeSteps(tmp_path, n=n, effects={4: {EXTEND: 2.0}} if effects is None else effects)
    history = tmp_path / "history"

    def night(at: int, **kw):
        steps.head_i = at
        steps.calls.clear()
        options = NightlyOptions(history=history, config="nightly-fake", **{**defaults, **kw})
        return nightly(options, steps, note=lambda line: None)

    return steps, history, night
