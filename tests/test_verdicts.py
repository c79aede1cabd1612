"""One vocabulary, one sign (docs/verdicts.md, harness/verdicts.py): the same pair of runs
fed through every command (`compare` Markdown and JSON, `report`, `history` Markdown and
JSON, an `ab` record of the same samples, `export`) gives the same verdict words and the
same sign of change (time per item, + = slower); the docs list exactly the vocabulary."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness import verdicts
from mibench.harness.ab.rounds import judge, overall
from mibench.harness.cli import app
from mibench.harness.records import (
    AB_SCHEMA,
    CaseLoad,
    RunRecord,
    read_artifact,
    write_artifact,
)
from mibench.harness.records.ab import ABCase, ABRecord, RoundSample, Side
from mibench.harness.records.summaries import summarize
from mibench.harness.report.ab import render_text
from mibench.harness.stats.describe import per_unit_ms, rates

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "data" / "reports" / "real-smoke.json"
SLOWER = "jax/chunked/chunk_size=4/tp=1"  # 2x the time
FASTER = "jax/single/tp=1"  # half the time
BUSY = "jax/packed/mask=segment/tp=1"  # 2x the time, the new side beside other work
EXPECTED = {SLOWER: ("regression", 1), FASTER: ("improvement", -1),
            BUSY: ("inconclusive", 1)}


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def timed(case, factor: float) -> None:
    case.timed_s = [t * factor for t in case.timed_s]
    n = case.workload.num_items
    case.metrics.total_s = summarize(case.timed_s)
    case.metrics.throughput_items_per_s = summarize(rates(case.timed_s, n))
    case.metrics.latency_per_item_ms = summarize(per_unit_ms(case.timed_s, n))


def quiet(rec: RunRecord, run_id: str, commit: str, day: int) -> RunRecord:
    out = rec.model_copy(deep=True)
    out.run_id, out.started_at = run_id, f"2026-01-0{day}T00:00:00Z"
    out.provenance.git.commit, out.provenance.git.path = commit * 40, "/nonexistent"
    for c in out.cases:
        c.load = CaseLoad(window_s=2.0, cpus=2, other_share=0.02, other_cpu_s=0.08,
                          own_cpu_s=3.0, source="/proc")
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, RunRecord, RunRecord]:
    folder = tmp_path_factory.mktemp("pair")
    base = quiet(read_artifact(REAL), "base-run", "a", 1)
    new = quiet(read_artifact(REAL), "new-run", "b", 2)
    for c in new.cases:
        factor = {SLOWER: 2.0, FASTER: 0.5, BUSY: 2.0}.get(c.case_id, 1.0)
        timed(c, factor)
        if c.case_id == BUSY:
            c.load = c.load.model_copy(update={"other_share": 0.65})
    write_artifact(base, folder / "base.json")
    write_artifact(new, folder / "new.json")
    return folder, base, new


def ab_record(base: RunRecord, new: RunRecord) -> ABRecord:
    """An `ab` record of the same samples: round r pairs the sides' r-th timed runs."""
    cases = []
    for b, n in zip(base.cases, new.cases, strict=True):
        case = ABCase(case_id=b.case_id, engine=b.engine, mode=b.mode, params=b.params,
                      model=b.model.path, dtype=b.model.dtype, tp=b.topology.tp,
                      workload=b.workload)
        for r, (tb, tn) in enumerate(zip(b.timed_s, n.timed_s, strict=True)):
            case.base.append(RoundSample(round=r, first=r % 2 == 0, status="ok",
                                         timed_s=[tb], median_s=tb, load=b.load))
            case.new.append(RoundSample(round=r, first=r % 2 == 1, status="ok",
                                        timed_s=[tn], median_s=tn, load=n.load))
        judge(case, {}, 0.01, 0.05, interleaved=False)
        cases.append(case)
    record = ABRecord(run_id="ab-pair", started_at=new.started_at, config=new.config,
                      config_sha256=new.config_sha256, provenance=new.provenance,
                      base=Side(rev="a", commit="a" * 40, subject="base"),
                      new=Side(rev="b", commit="b" * 40, subject="new"), rounds=3,
                      cases=cases)
    record.verdict = overall(record)
    return record


def sign(x: float) -> int:
    return (x > 0) - (x < 0)


def row_of(markdown: str, case_id: str) -> str:
    return next(line for line in markdown.splitlines()
                if line.startswith(f"| {case_id} |") or line.startswith(f"| {case_id} ["))


def test_the_same_pair_says_the_same_words_and_signs_everywhere(pair, tmp_path):
    folder, base, new = pair
    # compare: JSON and Markdown
    out = cli("compare", folder / "base.json", folder / "new.json", "--format", "json")
    assert out.exit_code == 1, out.output
    data = json.loads(out.stdout)
    assert data["schema"] == "mibench.compare/3" and data["outcome"] == "regression"
    cases = {c["case_id"]: c for c in data["cases"]}
    for case_id, (word, s) in EXPECTED.items():
        c = cases[case_id]
        assert c["verdict"] == word and sign(c["latency_change"]) == s, c
        assert sign(c["items_per_s_change"]) == -s and "change" not in c
    assert cases[BUSY]["reason"].startswith("new side: other processes held 65% of the CPU")
    assert "new side: other processes held 65% of the CPU" in data["verdict"] == data["verdict"]
    md = cli("compare", folder / "base.json", folder / "new.json").stdout
    for case_id, (word, s) in EXPECTED.items():
        row = row_of(md, case_id)
        assert word in row and ("| +" if s > 0 else "| -") in row, row
    # report against the baseline: the commits table
    rep = cli("report", folder / "new.json", "--baseline", folder / "base.json").stdout
    for case_id, (word, s) in EXPECTED.items():
        row = row_of(rep, case_id)
        assert word in row and ("| +" if s > 0 else "| -") in row, row
    assert "new side: other processes held 65% of the CPU" in row_of(rep, BUSY)
    # history of the folder: a suspected step each (2x), the busy one inconclusive
    hist = json.loads(cli("history", folder, "--format", "json").stdout)
    assert hist["schema"] == "mibench.history/2"
    series = {s["case_id"]: s for s in hist["series"]}
    for case_id, (word, s) in EXPECTED.items():
        (step,) = series[case_id]["steps"]
        assert step["kind"] == "suspected step" and step["verdict"] == word, step
        assert sign(step["latency_change"]) == s and sign(step["items_per_s_change"]) == -s
    (busy_step,) = series[BUSY]["steps"]
    assert busy_step["reason"].startswith("after side: other processes held 65% of the CPU")
    hist_md = cli("history", folder).stdout
    assert "suspected step, **regression**, time +100.0%" in hist_md
    # ab on the same samples: exempt from the busy rule (its sides share a round's load)
    ab = ab_record(base, new)
    stored = json.loads(ab.to_json())
    ab_cases = {c["case_id"]: c for c in stored["cases"]}
    assert stored["schema"] == AB_SCHEMA and stored["verdict"] == "regression"
    for case_id, (word, s) in EXPECTED.items():
        c = ab_cases[case_id]
        assert c["verdict"] == (word if case_id != BUSY else "regression")
        assert sign(c["timing"]["change"]) == s  # time per call, + = slower
    assert "The machine was busy: other processes held up to 65% of the CPU" in \
        render_text(ab)
    # export: the runs' own times give the same sign
    rows = json.loads(cli("export", folder / "base.json", folder / "new.json", "--format",
                          "json").stdout)["rows"]
    for case_id, (_, s) in EXPECTED.items():
        ms = {r["run_id"]: [] for r in rows}
        for r in rows:
            if r["case_id"] == case_id:
                ms[r["run_id"]].append(r["ms_per_item"])
        assert sign(sum(ms["new-run"]) / sum(ms["base-run"]) - 1) == s
    # every word any command stored is in the one vocabulary
    words = {c["verdict"] for c in data["cases"]} | {s["verdict"] for x in hist["series"]
                                                    for s in x["steps"]}
    words |= {c["verdict"] for c in stored["cases"]} | {data["outcome"], stored["verdict"]}
    assert words <= set(verdicts.WORDS), words - set(verdicts.WORDS)


def test_docs_list_exactly_the_vocabulary():
    text = (ROOT / "docs" / "verdicts.md").read_text()
    listed = set(re.findall(r"^\| `([a-z ]+)` \|", text, flags=re.M))
    assert listed == set(verdicts.WORDS), (listed ^ set(verdicts.WORDS))


def undecided_problems(pages: dict[str, str]) -> list[str]:
    """What keeps the "cannot tell" words from being defined once: docs/verdicts.md's
    `word | when | what decides it` table must be harness/verdicts.py's UNDECIDED, cell for
    cell, and any other table row of any page that starts with one of the words must link
    to that table instead of defining it."""
    text = pages["docs/verdicts.md"]
    table = text.split("| word | when | what decides it |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z ]+)` \| (.+?) \| (.+?) \|$", table, flags=re.M)
    found = {w: verdicts.Undecided(when, decides) for w, when, decides in rows}
    problems = [] if found == verdicts.UNDECIDED else [f"the table: {found}"]
    for name, page in pages.items():
        for word in verdicts.CANNOT_TELL:
            for row in re.findall(rf"^\| `{word}` \|.*$", page.replace(table, ""), flags=re.M):
                if "#cannot-tell-the-undecided-words" not in row:
                    problems.append(f"{name} defines {word!r} again: {row[:80]}")
    return problems


def _pages() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text()
            for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}


def test_cannot_tell_is_defined_once():
    assert verdicts.CANNOT_TELL == (verdicts.INCONCLUSIVE, verdicts.UNTESTED,
                                    verdicts.INSUFFICIENT_DATA)
    assert not undecided_problems(_pages())


def test_control_a_second_definition_or_a_drifted_cell_fails():
    pages = _pages()
    again = dict(pages, **{"docs/reports.md": pages["docs/reports.md"] + "\n| `untested` | "
                                                                         "fewer than 3 runs |\n"})
    assert undecided_problems(again) == [
        "docs/reports.md defines 'untested' again: | `untested` | fewer than 3 runs |"]
    drifted = pages["docs/verdicts.md"].replace("or more quiet nights of one commit |",
                                                "or more nights |")
    assert undecided_problems(dict(pages, **{"docs/verdicts.md": drifted}))


def test_validate_and_run_say_when_runs_timed_leaves_cases_untested(tmp_path):
    config = ROOT / "configs" / "cpu-smoke.yaml"
    out = cli("validate", config, "--set", "runs.timed=2")
    assert out.exit_code == 0
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("note:")]
    assert line.startswith("note: 7 of 7 case(s) have runs.timed 2 (< 3): `mibench compare` "
                           "gives them no timing verdict (untested)")
    assert not [x for x in cli("validate", config).stdout.splitlines()
                if x.startswith("note:")]


def test_run_says_it_under_its_summary(tmp_path, monkeypatch):
    from mibench.harness.run import runner

    monkeypatch.setattr(runner, "run", lambda plan: read_artifact(REAL))  # nothing measured
    out = cli("run", ROOT / "configs" / "cpu-smoke.yaml", "--set", "runs.timed=1",
              "--out", tmp_path, "--progress", "none")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[-1].startswith(
        "note: 7 of 7 case(s) have runs.timed 1 (< 3): `mibench compare` gives them no "
        "timing verdict (untested)")
