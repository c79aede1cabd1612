"""How `mibench history` scales with the number of artifacts (`nox -s history_scale`):

    python tests/history_scale.py 50 200 2000    # wall seconds of `mibench history` at each

Each size gets a folder of synthetic run artifacts (tests/data/reports/make_artifacts.py's
demo.yaml: 14 cases, two failed, one skipped) from distinct commits of a real scratch git
repository (one commit an hour, so history asks git for each), written under
`--out` (default: a temporary folder): every 8th commit is run three times (the A/A groups
the noise floor is learnt from), one run in 20 beside a busy machine (1.5x slower), 2%
noise per timed run, now and then a case steps to 2x or back (change points), and one
case run in 100 takes 2x once (suspected steps, there and back).
Then `mibench history FOLDER` (Markdown to stdout, no plots) is timed as a whole process,
and the ratio of the largest size's time to the one before it printed with the CPU's name.

`--nights N`: what a night of `mibench nightly` costs beyond its run, on a history folder
of N nights against a fresh one (seeded, then a night or two): the loop of
harness/nightly/loop.py with tests/nightly_fakes.py's made-up runs (a run costs nothing),
and the real report and history of the night (`RealSteps.reports`, plots included). The
N-night folder is seeded by the loop, then its runs are written as nights that passed
would write them (a run of a new commit each, a night in the index); three nights are
timed on each folder, the median quoted.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mibench.harness.records import CaseLoad, write_artifact

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("make_artifacts",
                                               HERE / "data" / "reports" / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

AA_EVERY, AA_RUNS = 8, 3  # every 8th commit is run 3 times
BUSY_EVERY = 20  # one run in 20 beside a busy machine
STEP_CHANCE = 0.02  # per commit, the chance that one case steps to 2x (or back)
OUTLIER_CHANCE = 0.01  # per case run, the chance of a one-off 2x (a suspected step there and back)
BUSY_SLOWER = 1.5  # a run beside a busy machine takes this much longer
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


def commits_for(artifacts: int) -> int:
    """Commits whose runs (AA_RUNS of every AA_EVERY-th, one of the others) make at least
    `artifacts` artifacts."""
    n = 0
    while sum(AA_RUNS if i % AA_EVERY == 0 else 1 for i in range(n)) < artifacts:
        n += 1
    return n


def scratch_repo(path: Path, n: int) -> list[str]:
    """A git repository of `n` commits on main, one an hour from T0 (git fast-import: a
    few seconds for thousands); their shas, oldest first."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    lines = []
    for i in range(n):
        msg = f"commit {i}"
        lines += ["commit refs/heads/main", f"mark :{i + 1}",
                  f"committer Bench <bench@example.com> {T0 + 3600 * i} +0000",
                  f"data {len(msg)}", msg]
        lines += [f"from :{i}"] if i else []
        lines += ["M 644 inline file.txt", f"data {len(str(i))}", str(i), ""]
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], check=True,
                   input="\n".join(lines) + "\n", text=True)
    log = subprocess.run(["git", "-C", str(path), "rev-list", "--reverse", "main"],
                         check=True, capture_output=True, text=True)
    return log.stdout.split()


def write_folder(out: Path, artifacts: int, seed: int = 0) -> Path:
    """`artifacts` run artifacts under `out/runs` from commits of `out/repo` (module
    docstring); the runs folder."""
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    shas = scratch_repo(out / "repo", commits_for(artifacts))
    template = make.build("demo.yaml", "x", seed, make.demo_time, "2026-01-01T00:00:00Z")
    ok = [c.case_id for c in template.cases if c.status == "ok"]
    rng = np.random.default_rng(seed)
    level = dict.fromkeys(ok, 1.0)
    written = 0
    for i, sha in enumerate(shas):
        if rng.random() < STEP_CHANCE:  # a case steps to 2x, or back
            cid = ok[rng.integers(len(ok))]
            level[cid] = 2.0 if level[cid] == 1.0 else 1.0
        for k in range(AA_RUNS if i % AA_EVERY == 0 else 1):
            if written == artifacts:
                break
            started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + 3600 * i + 60 * k))
            rec = template.model_copy(deep=True)
            rec.run_id = f"scale-{i:05d}-{k}"
            rec.started_at = rec.finished_at = started
            rec.provenance.git.path, rec.provenance.git.commit = str(out / "repo"), sha
            busy = written % BUSY_EVERY == BUSY_EVERY - 1
            for c in rec.cases:
                c.started_at = started
                if c.status != "ok":
                    continue
                noise = 1 + 0.02 * rng.standard_normal(len(c.timed_s))
                once = 2.0 if rng.random() < OUTLIER_CHANCE else 1.0
                factor = level[c.case_id] * once * (BUSY_SLOWER if busy else 1.0)
                make.set_times(c, list(np.asarray(c.timed_s) * factor * noise))
                share = 0.6 if busy else 0.02
                c.load = CaseLoad(window_s=10.0, cpus=2, other_share=share,
                                  other_cpu_s=20 * share, own_cpu_s=10.0, source="fake")
            write_artifact(rec, runs / f"{rec.run_id}.json")
            written += 1
    return runs


def cpu_name() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Model name")), "unknown CPU")


def time_history(runs: Path) -> float:
    """Wall seconds of `mibench history RUNS` (Markdown to stdout, thrown away)."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mibench.harness.cli", "history", str(runs)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"mibench history {runs} exited {done.returncode}: {done.stderr}")
    return took


def night_costs(root: Path, nights: int, timed: int = 3) -> tuple[list[float], list[float]]:
    """Seconds of `timed` nights beyond their run on a fresh folder and on one of `nights`
    nights (module docstring)."""
    sys.path.insert(0, str(HERE))
    from nightly_fakes import FakeSteps

    from mibench.harness.nightly import store
    from mibench.harness.nightly.index import Folder
    from mibench.harness.nightly.loop import NightlyOptions, nightly
    from mibench.harness.nightly.steps import RealSteps
    from mibench.harness.records.nightly import Night

    class Steps(FakeSteps):  # made-up runs; the night's real report and history
        def reports(self, new, baseline, runs, night, evidence="", history=None):
            real = RealSteps(config=self.config, config_path=str(self.config_path),
                             repo=Path("."), cache=root / "cache")
            return real.reports(new, baseline, runs, night, evidence, history)

    def night(steps: Steps, history: Path, at: int) -> float:
        steps.head_i = at
        t0 = time.perf_counter()
        result = nightly(NightlyOptions(history=history, config="nightly-fake"), steps,
                         note=lambda line: None)
        return time.perf_counter() - t0 - result.summary.seconds.get("run", 0.0)

    costs = []
    for n in (6, nights):
        (root / f"nights{n}").mkdir(parents=True)
        steps = Steps(root / f"nights{n}", n=n + timed + 1)
        history = root / f"nights{n}" / "history"
        night(steps, history, 0)  # seeds: SEED_RUNS runs
        folder = Folder(history)
        added = []
        for i in range(1, n - 5):  # the nights between, as passing nights leave them
            steps.head_i = i
            record = steps.record(next(steps.counter))
            write_artifact(record, folder.runs / f"{record.run_id}.json")
            added.append(Night(at=record.started_at, commit=record.provenance
                               .engine_repo.commit, runs=[record.run_id], verdict="pass",
                               exit_code=0, promoted=False))

        def more(index, added=added):
            index.nights += added
            return index, []

        store.save(history, more, "nightly-fake", "engines")
        costs.append([night(steps, history, n - 5 + k) for k in range(timed)])
    return costs[0], costs[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int,
                        help="artifacts of each folder timed (default: 50 200 2000, none "
                             "with --nights)")
    parser.add_argument("--out", type=Path, help="keep the folders here")
    parser.add_argument("--only-write", action="store_true", help="write, do not time")
    parser.add_argument("--nights", type=int, help="also time a night on a folder of this "
                                                   "many nights against a fresh one")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([] if args.nights else [50, 200, 2000])
    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        print(f"`mibench history` wall times on {cpu_name()}")
        times = {}
        for n in sizes:
            runs = write_folder(root / f"n{n}", n)
            if args.only_write:
                print(f"{n:>6} artifacts: {runs}")
                continue
            times[n] = time_history(runs)
            print(f"{n:>6} artifacts: {times[n]:7.1f} s", flush=True)
        if len(times) >= 2:
            (a, ta), (b, tb) = list(times.items())[-2:]
            print(f"t({b}) / t({a}) = {tb / ta:.1f} (linear: {b / a:g})")
        if args.nights:
            fresh, full = night_costs(root, args.nights)
            a, b = statistics.median(fresh), statistics.median(full)
            print(f"a night beyond its run: {a:.2f} s on a fresh folder "
                  f"({', '.join(f'{x:.2f}' for x in fresh)}), {b:.2f} s on {args.nights} "
                  f"nights ({', '.join(f'{x:.2f}' for x in full)}): {b / a - 1:+.0%}")


if __name__ == "__main__":
    main()
