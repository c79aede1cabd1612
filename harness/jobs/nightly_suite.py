"""Short nightly scenarios sharing one seeded history, under noise no load measurement sees
(`mibench job nightly-suite`, `nox -s nightly_suite`; not part of CI).

One scratch clone of the engines is seeded once at its commit 0 (`--seed-runs` runs).
Each scenario then gets four commits of its own on top of commit 0, a copy of the seeded
history, and one night at its fourth commit, beside a busy loop on every core with the
load measurement faked quiet (`MIBENCH_FAKE_OTHER_LOAD=0`), as in
harness/jobs/nightly_scenario.py `--unseen-noise`:

- `first`: commit 1 makes prefill_extend about 2x as long (the culprit first in its range);
- `last`: commit 4 does (the culprit last);
- `partial`: commits 2 and 4 each make it about 1.6x as long (two culprits, each part);
- `none`, `none-beside`: four notes, no regression (inside `engines/`, or two inside and
  two beside it): the night must not fail and must confirm nothing;
- `degenerate`: commit 2 makes packed give every item the first item's scores (a mode that
  scores nothing, flashinfer#3434; its speed unchanged): parity's `degenerate` check must
  fail the night (exit 1), the summary must name it, and the baseline must stay.

Each scenario's commits in between add notes inside `engines/` (bisect must measure them).
Reported: each night's exit, wall time and words, the culprits named against the ones
expected, wrong culprits, false confirmations, failed jobs in the no-regression runs and
undecided nights; OUT/suite.md and suite.json; exit 1 when a check fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from ..ab.scratch import commit, copy_project, git
from ..host.busy import FAKE_ENV
from .nightly_scenario import (
    CONFIG,
    EXTEND_CASE,
    PROJECT,
    degenerate_commit,
    index_of,
    nightly,
    note,
    note_commit,
    slow_commit,
)

# scenario -> {commit: factor (a slow commit) | "in" / "out" (a note inside / beside engines/)
# | "same" (packed's items all score the same)}
SCENARIOS = {
    "first": {1: 2.0, 2: "in", 3: "in", 4: "in"},
    "last": {1: "in", 2: "in", 3: "in", 4: 2.0},
    "partial": {1: "in", 2: 1.6, 3: "in", 4: 1.6},
    "none": {1: "in", 2: "in", 3: "in", 4: "in"},
    "none-beside": {1: "in", 2: "out", 3: "in", 4: "out"},
    "degenerate": {1: "in", 2: "same", 3: "in", 4: "in"},
}


def build(repo: Path, plan: dict) -> list[str]:
    shas = []
    for i, what in sorted(plan.items()):
        shas.append(slow_commit(repo, i, what) if isinstance(what, float)
                    else degenerate_commit(repo, i) if what == "same"
                    else note_commit(repo, i, what == "in"))
    return shas


def run_one(out: Path, name: str, plan: dict, seeded: Path, flags: list[str]) -> dict:
    """One scenario: its commits, a copy of the seeded history, one night at its HEAD."""
    repo, history = out / name / "repo", out / name / "history"
    subprocess.run(["git", "clone", "-q", str(out / "scratch"), str(repo)], check=True)
    git(repo, "checkout", "-q", "-B", "main")
    shas = build(repo, plan)
    shutil.copytree(seeded, history)
    note(f"suite: {name}: a night at {shas[-1][:12]}")
    night = nightly(out, repo, history, flags, {FAKE_ENV: "0"})
    idx = index_of(history)
    confirmed = [r for r in idx.get("regressions", []) if r["status"] == "confirmed"]
    named = sorted({c["commit"] for r in confirmed for c in r.get("culprits", [])})
    expected = sorted(shas[i - 1] for i, what in plan.items() if isinstance(what, float))
    last = (idx.get("nights") or [{}])[-1]
    base = (idx.get("baseline") or {}).get("commit")
    return {"degenerate": "same" in plan.values(), "baseline_kept": base not in shas,
            "names_degenerate": "degenerate/scores" in night["summary"],
            "exit": night["exit"], "seconds": night["seconds"], "summary": night["summary"],
            "error": night["error"], "words": last.get("cases", {}),
            "undecided": bool(last.get("undecided")), "named": named, "expected": expected,
            "wrong": [c for c in named if c not in expected],
            "false": [r["case_id"] for r in confirmed if not expected
                      or not r["case_id"].startswith(EXTEND_CASE)],
            "subjects": {c: git(repo, "log", "-1", "--format=%s", c) for c in named}}


def main(out: Path, seed_runs: int = 5, rounds: int = 5, max_rounds: int = 20,
         budget: str = "1h", threshold: float = 0.10, only: list[str] | None = None) -> int:
    from .calibrate import _cpu
    from .verdicts import busy_loops

    out = Path(out).resolve()
    if out.exists():
        shutil.rmtree(out)
    os.environ["MIBENCH_CACHE"] = str(out / "cache")
    repo = out / "scratch"
    repo.mkdir(parents=True)
    (out / "config.yaml").write_text(CONFIG)
    copy_project(PROJECT, repo)
    commit(repo, "commit 0: main")
    flags = ["--seed-runs", str(seed_runs), "--rounds", str(rounds), "--max-rounds",
             str(max_rounds), "--budget", budget, "--threshold", f"{threshold * 100:g}%"]
    cores = os.cpu_count() or 1
    result: dict = {"cpu": _cpu(), "cores": cores, "flags": flags, "scenarios": {}}
    t0 = time.perf_counter()
    with busy_loops(cores):
        note("suite: seeding the shared history at commit 0")
        result["seed"] = nightly(out, repo, out / "seeded", flags, {FAKE_ENV: "0"})
        for name, plan in SCENARIOS.items():
            if only and name not in only:
                continue
            result["scenarios"][name] = run_one(out, name, plan, out / "seeded", flags)
            note(f"suite: {name}: exit {result['scenarios'][name]['exit']}")
    result["seconds"] = time.perf_counter() - t0
    result["checks"] = checks(result)
    (out / "suite.json").write_text(json.dumps(result, indent=1, default=str))
    text = report(result)
    (out / "suite.md").write_text(text)
    print(text)
    return 0 if all(ok for _, ok in result["checks"]) else 1


def checks(result: dict) -> list[tuple[str, bool]]:
    """The suite's must-show, each a line and whether it held; a check about a kind of
    scenario that did not run (`--scenario`) is left out, not ticked."""
    runs = result["scenarios"]
    regress = {k: v for k, v in runs.items() if v["expected"]}
    doctored = {k: v for k, v in runs.items() if v["degenerate"]}
    clean = {k: v for k, v in runs.items() if not v["expected"] and not v["degenerate"]}
    out = [("the shared history was seeded (exit 0)", result["seed"]["exit"] == 0),
           ("0 wrong culprits", not any(v["wrong"] for v in runs.values())),
           ("0 false confirmations", not any(v["false"] for v in runs.values()))]
    if clean:
        out.append(("0 failed jobs in the no-regression runs",
                    all(v["exit"] == 0 for v in clean.values())))
    if regress:
        out.append(("every regression run named its culprit(s) (exit 1)",
                    all(v["exit"] == 1 and v["named"] == v["expected"]
                        for v in regress.values())))
    if doctored:
        out.append(("a mode that scores nothing fails the night with `degenerate` and keeps "
                    "the baseline (exit 1)", all(v["exit"] == 1 and v["names_degenerate"]
                                                 and v["baseline_kept"]
                                                 for v in doctored.values())))
    return out


def report(result: dict) -> str:
    lines = [f"# Short nightly scenarios under unseen noise ({result['cpu']}, "
             f"{result['cores']} cores)", "",
             f"A busy loop on each core through every night, the load measurement faked "
             f"quiet; `mibench nightly` flags `{' '.join(result['flags'])}`; one seeded "
             f"history ({result['seed']['seconds']:.0f} s, exit {result['seed']['exit']}); "
             f"{result['seconds'] / 60:.1f} minutes in all.", "",
             "| scenario | exit | seconds | culprits named | expected | wrong | false "
             "confirmations | undecided night |", "|---|---:|---:|---|---|---|---|---|"]
    for name, v in result["scenarios"].items():
        named = ", ".join(f"{c[:8]} ({v['subjects'][c]})" for c in v["named"]) or "-"
        lines.append(f"| {name} | {v['exit']} | {v['seconds']:.0f} | {named} | "
                     f"{', '.join(c[:8] for c in v['expected']) or '-'} | "
                     f"{len(v['wrong'])} | {len(v['false'])} | "
                     f"{'yes' if v['undecided'] else 'no'} |")
    lines += ["", "## Checks", ""] + [f"- [{'x' if ok else ' '}] {what}"
                                      for what, ok in result["checks"]]
    for name, v in result["scenarios"].items():
        lines += ["", f"## {name}", "", v["summary"] or v["error"]]
    return "\n".join(lines) + "\n"
