"""The tables of `mibench job verdicts` (harness/jobs/verdicts.py) as Markdown: what
docs/verdicts.md quotes. Formats the job's result only; computes nothing."""

from __future__ import annotations

import statistics
from pathlib import Path

from ..report.fmt import Table


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def level_table(rows: list[dict]) -> Table:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["loops"], r["duty"]), []).append(r)
    body = [[f"{n} x {duty:.0%}", str(len(rs)),
             ", ".join(_pct(r["other_load"]) for r in rs),
             ", ".join(f"{r['slowdown']:.2f}x" for r in rs),
             f"{statistics.median(r['slowdown'] for r in rs):.2f}x"]
            for (n, duty), rs in groups.items()]
    return Table(["busy loops x duty", "runs", "other load (each run)", "time vs quiet",
                  "median"], body, ["l", "r", "l", "l", "r"],
                 title="How busy is busy: prefill_extend of cpu-smoke, 10 timed runs")


def aa_table(aa: dict) -> Table:
    body = []
    for r in aa["pairs"]:
        c, h = r["compare"], r["history"]
        counts = ", ".join(f"{n} {w}" for w, n in c["counts"].items() if n)
        body.append([r["pair"], r["sides"], _pct(r["base_load"]), _pct(r["new_load"]),
                     str(c["exit"]), counts, "yes" if c["busy"] else "-",
                     str(h["exit"]), str(h["busy_points"]),
                     ", ".join(f"{n} {w}" for w, n in h["steps"].items()) or "-"])
    return Table(["pair", "busy loops (base/new)", "other load base", "other load new",
                  "compare exit",
                  "compare verdicts", "busy named", "history exit", "history busy points",
                  "history steps"], body, ["l", "l", "r", "r", "r", "l", "l", "r", "r", "l"],
                 title="A/A matrix: cpu-smoke at one commit, every pair")


def slow_table(rows: list[dict]) -> Table:
    body = [[f"{r['factor']}x", str(r["pair"]), _pct(r["base_load"]), _pct(r["new_load"]),
             str(r["exit"]), r["verdict"] or "-",
             "-" if r["latency_change"] is None else f"{r['latency_change']:+.1%}"]
            for r in rows]
    return Table(["slowdown", "pair", "other load base", "other load new", "compare exit",
                  "verdict", "time change"], body, ["l", "r", "r", "r", "r", "l", "r"],
                 title="Separate runs of jax/prefill_extend at a slower commit")


def slow_summary(rows: list[dict], level: float) -> list[str]:
    out = []
    for factor in sorted({r["factor"] for r in rows}):
        mine = [r for r in rows if r["factor"] == factor]
        quiet = [r for r in mine if max(r["base_load"] or 0, r["new_load"] or 0) <= level]
        caught = sum(r["exit"] == 1 for r in quiet)
        out.append(f"{factor}x: caught (exit 1) in {caught} of {len(quiet)} quiet pairs; "
                   f"{len(mine) - len(quiet)} pair(s) with a busy side, all exit "
                   f"{sorted({r['exit'] for r in mine if r not in quiet}) or '-'}")
    return out


def memory_table(mem: dict) -> Table:
    body = [[r["case"], f"{r['full_mib']:.1f}", f"{r['alone_mib']:.1f}",
             " / ".join(r["memory_verdicts"])] for r in mem["alone_vs_full"]]
    d = mem["doubled"]
    body.append(["packed, holding twice its peak", f"{d['full_mib']:.1f}",
                 f"{d['doubled_mib']:.1f} (doubled)", d["memory_verdict"]])
    return Table(["case", "own peak in the full run (MiB)", "alone (MiB)",
                  "memory verdict (alone vs full / full vs alone)"], body,
                 ["l", "r", "r", "l"], title="Memory: each case alone against the full run")


def write(result: dict, path: Path) -> None:
    from ..judge.busy import BUSY_LEVEL

    parts = [f"# mibench job verdicts on {result['cpu']} ({result['cores']} cores)",
             "Seconds per part: " + ", ".join(f"{k} {v:.0f}" for k, v in
                                              result["seconds"].items())]
    if "level" in result:
        parts.append(level_table(result["level"]))
    if "aa" in result:
        parts += [aa_table(result["aa"]), "History of all A/A runs: exit "
                  f"{result['aa']['history']['exit']}, {result['aa']['history']['busy_points']}"
                  f" busy points, steps {result['aa']['history']['steps'] or 'none'}."]
    if "slow" in result:
        parts += [slow_table(result["slow"]), *slow_summary(result["slow"], BUSY_LEVEL)]
    if "memory" in result:
        parts.append(memory_table(result["memory"]))
    text = []
    for p in parts:
        text.append(f"## {p.title}\n\n{p.markdown()}" if isinstance(p, Table) else p)
    path.write_text("\n\n".join(text) + "\n")
