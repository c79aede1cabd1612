"""The nightly loop shown on this machine (not part of CI; `mibench job nightly-scenario` or
`nox -s nightly_scenario`; docs/nightly.md quotes its output).

A scratch clone of the project's engines (harness/ab/scratch.py) gets eight commits on
top of `main` (its commit 0): commit 4 makes every prefill_extend call about 2x as long,
the others add a note (the odd ones inside `engines/`, so bisect has commits to measure
whose code changed but not its speed; the even ones beside it, which bisect knows cannot
matter). `mibench nightly` runs as a user runs it (a subprocess, its exit code shown) on
a small config (`CONFIG`: packed with the segment mask and prefill_extend on the tiny
model, 15 timed calls a run: an `ab` round pairs 15 calls a side), with one history
folder, at a threshold of 10% (`--threshold`):

- at commit 0: the history is empty, the night seeds it (`--seed-runs` runs);
- after commit 2: expected to pass (exit 0) and become the baseline;
- after commit 5: three commits since the last pass; expected to confirm prefill_extend
  with `ab` and bisect to commit 4 (exit 1, a summary of at most 40 lines);
- after commit 8: expected to report it as known with its culprit, no second bisect
  (exit 1); the baseline never moves to commits 4 to 8.

`unseen=True` (`--unseen-noise`): a busy loop on every core runs beside every night, from
the first to the last, and the load measurement is faked quiet
(`MIBENCH_FAKE_OTHER_LOAD=0`): noise that no load measurement sees, as a VM's neighbours
make. The same checks must hold.

Else the noise scenario: a copy of the history as it was after night 2, a clone at commit
2 plus one commit that changes a note, and a night whose run has a busy loop on every
core beside it (started outside mibench's process tree, so it counts as other load;
stopped before `ab`): the run looks slower and busy, `ab` is to settle it, and the night
must not fail (exit 0).

Every night's summary, exit code and time go into OUT/scenario.md and scenario.json, with
the checks above; the job exits 1 when a check fails. The shortened scenarios of several
ranges sharing one seeded history are harness/jobs/nightly_suite.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..ab.scratch import append, commit, copy_project, git, same_scores, slower
from ..host.busy import FAKE_ENV

PROJECT = Path(__file__).resolve().parents[2]
EXTEND = "engines/modes/extend.py"
PACKED = "engines/modes/packed.py"
CONFIG = """\
name: nightly-scenario
description: packed (segment) and prefill_extend on the tiny model, for the nightly scenario
model: {path: "embedded:tiny", dtype: float32}
topology: {tp: 1}
workload:
  query_tokens: 64
  num_items: 16
  item_tokens: {dist: uniform, min: 4, max: 8}
  tokens: random
  label_token_ids: [198, 9834]
  delimiter: 151643
  apply_softmax: true
  seed: 0
runs: {warmup: 1, timed: 15, timeout_s: 120}
parity: {checks: [degenerate]}
cases:
  - {engine: jax, mode: packed, mask: segment}
  - {engine: jax, mode: prefill_extend, extend_batch_size: 4, precompile_bs: [1, 2, 4]}
"""
EXTEND_CASE = "jax/prefill_extend"


def note(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def note_commit(repo: Path, i: int, inside: bool) -> str:
    """A commit that adds a note: inside `engines/` (the measured code changes, its speed
    does not) or beside it."""
    with open(repo / ("engines/NOTES" if inside else "NOTES"), "a") as f:
        f.write(f"note {i}\n")
    return commit(repo, f"commit {i}: a note{' in engines/' if inside else ''}")


def slow_commit(repo: Path, i: int, factor: float) -> str:
    append(repo, EXTEND, slower("score_prefill_extend", factor))
    return commit(repo, f"commit {i}: prefill_extend about {factor:g}x as long")


def degenerate_commit(repo: Path, i: int) -> str:
    append(repo, PACKED, same_scores("score_packed"))
    return commit(repo, f"commit {i}: packed gives every item the first item's scores")


def build(repo: Path, upto: int, start: int, shas: list[str]) -> None:
    """Commits start..upto on top of `repo` (commit 4: prefill_extend 2x as long)."""
    for i in range(start, upto + 1):
        shas.append(slow_commit(repo, i, 2.0) if i == 4 else note_commit(repo, i, i % 2 == 1))


def nightly(out: Path, repo: Path, history: Path, flags: list[str], env: dict | None = None
            ) -> dict:
    """`mibench nightly` as a user runs it: exit code, seconds, its summary."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mibench.harness.cli", "nightly",
                           str(out / "config.yaml"), "--history", str(history), "--repo",
                           str(repo), *flags], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
    (history / "logs").mkdir(parents=True, exist_ok=True)
    log = history / "logs" / f"night-{len(list((history / 'logs').iterdir())) + 1}.log"
    log.write_text(done.stderr)
    return {"exit": done.returncode, "seconds": time.perf_counter() - t0,
            "summary": done.stdout, "log": str(log), "error": done.stderr[-2000:]
            if done.returncode not in (0, 1) else ""}


def index_of(history: Path) -> dict:
    path = history / "index.json"
    return json.loads(path.read_text()) if path.exists() else {}


def noisy_night(out: Path, history: Path, flags: dict, cores: int) -> dict:
    """The noise scenario: its night in-process, the run beside busy loops."""
    from mibench.engines import cache_dir

    from ..config import load_config
    from ..nightly.loop import NightlyOptions
    from ..nightly.loop import nightly as one_night
    from ..nightly.steps import RealSteps
    from .verdicts import busy_loops

    repo = out / "noise-clone"
    shutil.copytree(history, out / "history-noise")
    subprocess.run(["git", "clone", "-q", str(out / "scratch"), str(repo)], check=True)
    git(repo, "checkout", "-q", flags["at"])
    with open(repo / "NOTES", "a") as f:
        f.write("note 3 (noise scenario)\n")
    head = commit(repo, "commit 3': a note")
    config = load_config(out / "config.yaml")

    class BusyRun(RealSteps):
        def run(self, where: Path) -> Path:
            with busy_loops(cores):
                return super().run(where)

    steps = BusyRun(config=config, config_path=str(out / "config.yaml"), repo=repo,
                    cache=cache_dir(), threshold=flags["threshold"])
    options = NightlyOptions(history=out / "history-noise", config=config.name,
                             threshold=flags["threshold"], rounds=flags["rounds"],
                             max_rounds=flags["max_rounds"], budget_s=flags["budget_s"])
    t0 = time.perf_counter()
    result = one_night(options, steps, note=note)
    return {"exit": result.exit_code, "seconds": time.perf_counter() - t0,
            "summary": result.markdown, "head": head,
            "cases": {c.case_id: c.verdict for c in result.summary.cases}}


def checks(nights: dict, shas: list[str], noise: dict | None) -> list[tuple[str, bool]]:
    """The must-show, each a line and whether it held."""
    n2, n5, n8 = nights.get("2", {}), nights.get("5", {}), nights.get("8", {})
    idx5, idx8 = n5.get("index", {}), n8.get("index", {})
    known = [r for r in idx5.get("regressions", []) if r["case_id"].startswith(EXTEND_CASE)
             and r["status"] == "confirmed"]
    confirmed_other = [r["case_id"] for r in idx8.get("regressions", [])
                       if not r["case_id"].startswith(EXTEND_CASE)
                       and r["status"] in ("confirmed", "accepted", "fixed")]
    last8 = (idx8.get("nights") or [{}])[-1]
    bases = [(n.get("index", {}).get("baseline") or {}).get("commit") for n in nights.values()]
    out = [("night 0 seeds the history (exit 0)", nights.get("0", {}).get("exit") == 0),
           ("night 2 passes and becomes the baseline (exit 0)", n2.get("exit") == 0
            and (n2.get("index", {}).get("baseline") or {}).get("commit") == shas[2]),
           ("night 5 confirms prefill_extend and bisect names commit 4 (exit 1)",
            n5.get("exit") == 1 and bool(known) and known[0]["culprit"] == shas[4]),
           ("night 5's summary has at most 40 lines",
            0 < len(n5.get("summary", "").splitlines()) <= 40),
           ("night 8 reports it known with its culprit, not bisected again (exit 1)",
            n8.get("exit") == 1 and shas[4][:12] in n8.get("summary", "")
            and len([r for r in idx8.get("regressions", []) if r["status"] == "confirmed"])
            == len(known) and "known regression" in last8.get("cases", {}).get(
                next(iter(r["case_id"] for r in known), ""), "")),
           ("the baseline never moves to commits 4 to 8",
            not any(b in shas[4:] for b in bases)),
           ("no false suspicion confirmed (no other case confirmed)", not confirmed_other)]
    if noise is not None:
        out.append(("noise scenario: not confirmed, exit 0", noise.get("exit") == 0 and
                    "confirmed regression" not in noise.get("cases", {}).values()))
    return out


def main(out: Path, seed_runs: int = 5, rounds: int = 5, max_rounds: int = 20,
         budget: str = "1h", noise: bool = True, threshold: float = 0.10,
         unseen: bool = False) -> int:
    from ..util import parse_duration
    from .calibrate import _cpu
    from .verdicts import busy_loops

    out = Path(out).resolve()
    if out.exists():
        shutil.rmtree(out)
    os.environ["MIBENCH_CACHE"] = str(out / "cache")  # the scratch commits' worktrees
    repo, history = out / "scratch", out / "history"
    repo.mkdir(parents=True)
    (out / "config.yaml").write_text(CONFIG)
    copy_project(PROJECT, repo)
    shas = [commit(repo, "commit 0: main")]
    flags = ["--seed-runs", str(seed_runs), "--rounds", str(rounds), "--max-rounds",
             str(max_rounds), "--budget", budget, "--threshold", f"{threshold * 100:g}%"]
    cores = os.cpu_count() or 1
    env = {FAKE_ENV: "0"} if unseen else None
    result: dict = {"cpu": _cpu(), "cores": cores, "flags": flags, "nights": {},
                    "unseen": unseen}
    t0 = time.perf_counter()
    with busy_loops(cores if unseen else 0):
        for upto, start in ((0, 1), (2, 1), (5, 3), (8, 6)):
            build(repo, upto, start, shas)
            note(f"scenario: night after commit {upto} ({shas[-1][:12]})")
            night = nightly(out, repo, history, flags, env)
            night["index"] = index_of(history)
            result["nights"][str(upto)] = night
            note(f"scenario: night {upto}: exit {night['exit']} in {night['seconds']:.0f} s")
            if upto == 2 and noise and not unseen:
                shutil.copytree(history, out / "history-after-2")
    result["shas"] = shas
    if noise and not unseen:
        note("scenario: the noise night (busy loops beside the run)")
        shutil.rmtree(out / "history-after-2" / "logs", ignore_errors=True)
        result["noise"] = noisy_night(out, out / "history-after-2", {
            "at": shas[2], "rounds": rounds, "max_rounds": max_rounds,
            "budget_s": parse_duration(budget), "threshold": threshold}, cores)
    result["seconds"] = time.perf_counter() - t0
    result["checks"] = checks(result["nights"], shas, result.get("noise"))
    (out / "scenario.json").write_text(json.dumps(result, indent=1, default=str))
    text = report(result)
    (out / "scenario.md").write_text(text)
    print(text)
    return 0 if all(ok for _, ok in result["checks"]) else 1


def report(result: dict) -> str:
    beside = (f"a busy loop on each of the {result['cores']} cores through every night, the "
              "load measurement faked quiet (`MIBENCH_FAKE_OTHER_LOAD=0`)"
              if result.get("unseen") else "nothing started beside the nights")
    lines = [f"# The nightly scenario ({result['cpu']}, {result['cores']} cores)", "",
             f"`mibench nightly` flags: `{' '.join(result['flags'])}`; {beside}; "
             f"{result['seconds'] / 60:.1f} minutes in all.", "",
             "| night | exit | seconds |", "|---|---:|---:|"]
    lines += [f"| after commit {k} | {n['exit']} | {n['seconds']:.0f} |"
              for k, n in result["nights"].items()]
    if "noise" in result:
        lines.append(f"| noise (busy loops beside the run) | {result['noise']['exit']} | "
                     f"{result['noise']['seconds']:.0f} |")
    lines += ["", "## Checks", ""] + [f"- [{'x' if ok else ' '}] {what}"
                                      for what, ok in result["checks"]]
    for k, n in result["nights"].items():
        lines += ["", f"## Night after commit {k}", "", n["summary"] or n["error"]]
    if "noise" in result:
        lines += ["", "## The noise night", "", result["noise"]["summary"]]
    return "\n".join(lines) + "\n"
