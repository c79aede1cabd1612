"""The verdicts between runs, shown on this machine (not part of CI; `mibench job verdicts`
or `nox -s verdicts`; docs/verdicts.md quotes its tables). Four parts, each a table in
OUT/verdicts.md and every number in OUT/verdicts.json:

- `level`: how busy is busy. prefill_extend of configs/cpu-smoke.yaml (10 timed runs) beside
  0 to 4 busy loops (some busy half the time): the other load each run recorded and its
  median time against the quiet runs'. The busy level (harness/judge/busy.py) is where that
  slowdown leaves the CPU noise floor.
- `aa`: the A/A matrix. `aa_runs` runs of configs/cpu-smoke.yaml at this commit, every
  second one with a busy loop on each core; every pair through `mibench compare` and
  `mibench history` (a folder of the pair): exit codes (never 1), verdict counts, and
  whether a busy side is named; then `history` of all of them.
- `slow`: separate runs of `--case 'jax/prefill_extend*'` at engines 1.2x, 1.5x and 2x as
  slow (a scratch repository, as `mibench job calibrate` builds), `pairs` pairs each, each
  pair through `compare`, with the load of both sides: 2x must be caught in every quiet pair.
- `memory`: a 3-case config, each case alone (`--case`) against the full run (no memory
  verdict), and a commit whose packed case holds twice its own peak (caught).

The busy loops are started outside mibench's process tree (so they count as other load)
and stopped after each run. The workers import the harness from this checkout: leave the
working tree alone while it runs.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ..ab.scratch import allocating, append, commit, copy_project, slower

PROJECT = Path(__file__).resolve().parents[2]
SMOKE = PROJECT / "configs" / "cpu-smoke.yaml"
EXTEND = "engines/modes/extend.py"
PACKED = "engines/modes/packed.py"
FACTORS = (1.2, 1.5, 2.0)
# (busy loops, share of the time each is busy): the `level` part's loads
LOADS = ((0, 1.0), (1, 0.5), (1, 1.0), (2, 0.5), (2, 1.0), (4, 1.0))
MEMORY = """
name: memory3
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 64, num_items: 64, item_tokens: 16, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 1, timed: 3}
cases:
  - {engine: jax, mode: packed, mask: dense}
  - {engine: jax, mode: chunked, chunk_size: 8}
  - {engine: jax, mode: prefill_extend, extend_batch_size: 8}
"""
BURN = ("import time\nduty = {duty}\nwhile True:\n    end = time.perf_counter() + 0.1 * duty\n"
        "    while time.perf_counter() < end: pass\n    time.sleep(0.1 * (1 - duty))\n")


@contextlib.contextmanager
def busy_loops(n: int, duty: float = 1.0):
    """`n` busy Python loops (each busy `duty` of the time) OUTSIDE this process tree (a
    shell starts them and exits: they are re-parented), stopped on leaving."""
    if n == 0:
        yield
        return
    code = BURN.format(duty=duty)
    script = " ".join(f"{sys.executable} -c {shlex_quote(code)} >/dev/null 2>&1 & echo $!;"
                      for _ in range(n))
    pids = [int(p) for p in subprocess.run(["sh", "-c", script], capture_output=True,
                                           text=True, check=True).stdout.split()]
    try:
        time.sleep(1.0)  # let them take their share before the run starts
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def one_run(config, out: Path, **kw):
    from ..run.plan import plan_of
    from ..run.runner import artifact_path, run

    record = run(plan_of(config, out=out, progress=False, **kw))
    return record, artifact_path(record, out)


def cli(*args) -> subprocess.CompletedProcess:
    """`mibench ARGS...` as a user runs it (its exit code is part of what is shown)."""
    return subprocess.run([sys.executable, "-m", "mibench.harness.cli", *map(str, args)],
                          capture_output=True, text=True, env={**os.environ,
                                                               "HF_HUB_OFFLINE": "1"})


def loads(record) -> float | None:
    """The largest other load over the record's ok cases."""
    shares = [c.load.other_share for c in record.cases if c.status == "ok" and c.load]
    return max(shares) if shares else None


def level(out: Path, runs: int) -> list[dict]:
    from ..config import load_config

    config = load_config(SMOKE, ["runs.timed=10"])
    rows = []
    for n, duty in LOADS:
        for _ in range(runs):
            with busy_loops(n, duty):
                record, _ = one_run(config, out / "level", cases=["jax/prefill_extend*"])
            (case,) = record.cases
            rows.append({"loops": n, "duty": duty, "other_load": case.load.other_share,
                         "window_s": case.load.window_s,
                         "median_s": statistics.median(case.timed_s)})
            note(f"level {n} x {duty:.0%}: other {case.load.other_share:.0%}, "
                 f"{rows[-1]['median_s'] * 1e3:.1f} ms")
    quiet = statistics.median(r["median_s"] for r in rows if r["loops"] == 0)
    for r in rows:
        r["slowdown"] = r["median_s"] / quiet
    return rows


def compare_pair(a: Path, b: Path) -> dict:
    out = cli("compare", a, b, "--format", "json")
    data = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}
    cases = data.get("cases", [])
    counts = {w: sum(c["verdict"] == w for c in cases) for w in
              ("regression", "improvement", "unchanged", "inconclusive", "untested")}
    return {"exit": out.returncode, "counts": counts, "busy": data.get("busy"),
            "verdict": data.get("verdict") or out.stderr.strip()[-300:],
            "cases": [{k: c.get(k) for k in ("case_id", "verdict", "latency_change",
                                               "base_other_load", "new_other_load")}
                      for c in cases]}


def history_of(paths: list[Path], folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    for p in paths:
        shutil.copy2(p, folder / p.name)
    out = cli("history", folder, "--format", "json")
    data = json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}
    level_ = data.get("busy_level", 1.0)
    busy = sum(1 for s in data.get("series", []) for p in s["points"]
               if p["other_load"] is not None and p["other_load"] > level_)
    steps = [st["verdict"] for s in data.get("series", []) for st in s["steps"]]
    return {"exit": out.returncode, "busy_points": busy,
            "steps": {w: steps.count(w) for w in set(steps)}}


def aa(out: Path, n: int, cores: int) -> dict:
    from ..config import load_config

    config, paths, busy = load_config(SMOKE), [], []
    for k in range(n):
        with busy_loops(cores if k % 2 else 0):
            record, path = one_run(config, out / "aa")
        paths.append(path)
        busy.append(loads(record))
        note(f"aa run {k + 1}/{n}: {'busy loops' if k % 2 else 'no loops'}, other up to "
             f"{busy[-1]:.0%}")
    rows = []
    for a, b in itertools.combinations(range(n), 2):
        row = {"pair": f"{a + 1}-{b + 1}", "sides": ("loops" if a % 2 else "none") + "/"
               + ("loops" if b % 2 else "none"), "base_load": busy[a], "new_load": busy[b],
               "compare": compare_pair(paths[a], paths[b]),
               "history": history_of([paths[a], paths[b]], out / "aa-pairs" / f"{a}-{b}")}
        rows.append(row)
        note(f"aa pair {row['pair']}: compare exit {row['compare']['exit']}, history exit "
             f"{row['history']['exit']}")
    return {"pairs": rows, "history": history_of(paths, out / "aa-all")}


def scratch(out: Path) -> tuple[Path, dict[str, str]]:
    """The scratch repository: `base`, and each FACTORS' slower prefill_extend."""
    repo = out / "scratch"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    copy_project(PROJECT, repo)
    shas = {"base": commit(repo, "base")}
    for factor in FACTORS:
        original = (repo / EXTEND).read_text()
        append(repo, EXTEND, slower("score_prefill_extend", factor))
        shas[f"x{factor}"] = commit(repo, f"prefill_extend {factor}x as long")
        (repo / EXTEND).write_text(original)
        commit(repo, "undo")
    return repo, shas


def slow(out: Path, pairs: int, repo: Path, shas: dict, roots: dict) -> list[dict]:
    from ..config import load_config

    config, rows = load_config(SMOKE), []
    for factor, k in itertools.product(FACTORS, range(pairs)):
        base, a = one_run(config, out / "slow", cases=["jax/prefill_extend*"],
                          engine_root=roots["base"])
        new, b = one_run(config, out / "slow", cases=["jax/prefill_extend*"],
                         engine_root=roots[f"x{factor}"])
        result = compare_pair(a, b)
        (case,) = result["cases"] or [{}]
        rows.append({"factor": factor, "pair": k + 1, "exit": result["exit"],
                     "verdict": case.get("verdict"), "latency_change": case.get(
                         "latency_change"), "base_load": loads(base), "new_load": loads(new)})
        note(f"slow {factor}x pair {k + 1}: exit {result['exit']} {case.get('verdict')}")
    return rows


def memory(out: Path, repo: Path, roots: dict, cache: Path) -> dict:
    from ..ab.revisions import checkout
    from ..config import load_config

    (out / "memory3.yaml").write_text(MEMORY)
    config = load_config(out / "memory3.yaml")
    full, full_path = one_run(config, out / "memory", engine_root=roots["base"])
    rows = []
    for c in full.cases:
        alone, path = one_run(config, out / "memory-alone", engine_root=roots["base"],
                              cases=[c.case_id])
        (mine,) = alone.cases
        rows.append({"case": c.case_id, "full_mib": c.metrics.peak_memory_bytes / 2**20,
                     "alone_mib": mine.metrics.peak_memory_bytes / 2**20,
                     "memory_verdicts": [memory_verdict(full_path, path, c.case_id),
                                         memory_verdict(path, full_path, c.case_id)]})
        note(f"memory {c.case_id}: {rows[-1]['full_mib']:.1f} MiB in the full run, "
             f"{rows[-1]['alone_mib']:.1f} alone: {rows[-1]['memory_verdicts']}")
    packed = full.cases[0]
    original = (repo / PACKED).read_text()
    append(repo, PACKED, allocating("score_packed", packed.metrics.peak_memory_bytes))
    sha = commit(repo, "packed holds twice its own peak")
    (repo / PACKED).write_text(original)
    commit(repo, "undo")
    doubled, doubled_path = one_run(config, out / "memory", engine_root=checkout(
        repo, sha, cache).root)
    return {"alone_vs_full": rows, "doubled": {
        "full_mib": packed.metrics.peak_memory_bytes / 2**20,
        "doubled_mib": doubled.cases[0].metrics.peak_memory_bytes / 2**20,
        "compare": compare_pair(full_path, doubled_path),
        "memory_verdict": memory_verdict(full_path, doubled_path, packed.case_id)}}


def memory_verdict(a: Path, b: Path, case_id: str) -> str:
    """The memory part of `compare`'s verdict of one case: `memory regression` or `none`."""
    from ..judge.compare import compare
    from ..records import read_artifact

    (c,) = [x for x in compare(read_artifact(a), read_artifact(b)).cases
            if x.case_id == case_id]
    return "memory regression" if c.memory and c.memory.regression else "none"


def note(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(out: Path, parts: list[str], pairs: int = 10, aa_runs: int = 6,
         level_runs: int = 3) -> dict:
    from ..ab.revisions import checkout
    from .calibrate import _cpu
    from .verdicts_report import write

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"  # the scratch revisions' worktrees (no JAX compilation cache:
    # a program loaded from it is not compiled, and its case's resident set rises less)
    cores = os.cpu_count() or 1
    result: dict = {"cpu": _cpu(), "cores": cores, "parts": parts, "seconds": {}}
    repo = shas = roots = None
    if {"slow", "memory"} & set(parts):
        repo, shas = scratch(out)
        roots = {name: checkout(repo, sha, cache).root for name, sha in shas.items()}
    for part in parts:
        t0 = time.perf_counter()
        if part == "level":
            result["level"] = level(out, level_runs)
        elif part == "aa":
            result["aa"] = aa(out, aa_runs, cores)
        elif part == "slow":
            result["slow"] = slow(out, pairs, repo, shas, roots)
        elif part == "memory":
            result["memory"] = memory(out, repo, roots, cache)
        result["seconds"][part] = time.perf_counter() - t0
        (out / "verdicts.json").write_text(json.dumps(result, indent=1, default=str))
    write(result, out / "verdicts.md")
    return result
