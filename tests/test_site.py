"""`mibench site` without a browser (issue 42; tests/test_site_browser.py drives chromium):
the pages and copies a site holds, the case page's marks (busy points, culprit and
acceptance flags, an environment change where a step coincides), the issue body for a
regression the last night confirmed (and none without one), a site that replaces only an
earlier site, the pieces of statistics it adds, and the scale job at a tiny size."""

from __future__ import annotations

import json
import re

import pytest
from nightly_fakes import EXTEND, PACKED
from site_world import CULPRIT, NIGHTS, RUNS, SECOND, WHO, WHY, make_history
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.judge.environment import environment_changes
from mibench.harness.records import read_artifact
from mibench.harness.records.nightly import read_index
from mibench.harness.report.site import build_site
from mibench.harness.report.site.issue import newly_confirmed


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    return make_history(tmp_path_factory.mktemp("world"))


@pytest.fixture(scope="module")
def site(history, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "site"
    return build_site([history], out), out


def case_page(out, case_id: str) -> str:
    (page,) = [p for p in (out / "cases").iterdir()
               if re.sub(r"[^A-Za-z0-9_.-]+", "-", case_id) in p.name]
    return page.read_text()


def test_the_site_holds_its_pages_and_the_nights_reports(site, history):
    built, out = site
    assert (built.measurements, built.regressions, built.runs) == (2, 4, RUNS)
    assert {p.name for p in out.iterdir()} >= {"index.html", "regressions.html", "cases",
                                               "assets", "reports"}
    assert len(list((out / "cases").iterdir())) == 2
    reports = out / "reports" / "nightly-fake"
    assert (reports / "index.json").read_bytes() == (history / "index.json").read_bytes()
    assert len(list((reports / "ab").glob("*.json"))) == len(list((history / "ab").glob("*")))
    nights = sorted((reports / "nights").iterdir())
    assert len(nights) == len(NIGHTS)
    for night in nights:
        assert {"summary.md", "summary.md.html", "report.md.html"} <= {p.name for p in
                                                                      night.iterdir()}
    # the summary's links (relative to the history folder) point at the site's copies
    page = (nights[-1] / "summary.md.html").read_text()
    assert 'href="report.md.html"' in page and 'href="../../index.json"' in page
    for text in [p.read_text() for p in out.rglob("*.html")]:
        assert not re.search(r'(src|href)="(https?:)?//', text)  # nothing from elsewhere


def test_the_overview_lists_open_regressions_first(site):
    _, out = site
    text = (out / "index.html").read_text()
    rows = re.findall(r'<tr data-row data-verdict="([^"]+)"', text)
    assert rows == ["confirmed regression", "pass"]
    assert text.index(EXTEND) < text.index(PACKED)


def test_a_case_page_marks_its_runs_flags_and_evidence(site):
    _, out = site
    page = case_page(out, EXTEND)
    assert len(re.findall(r'class="pt (quiet|busy)"', page)) == RUNS
    assert page.count('class="pt busy"') == 1
    assert f"culprit {CULPRIT[:8]}" in page and f"culprit {SECOND[:8]}" in page
    assert f"accepted by {WHO}" in page and WHY in page
    assert len(re.findall(r'<tr id="run-\d+"', page)) == RUNS
    assert "summary.md.html" in page  # each night's reports linked
    packed = case_page(out, PACKED)
    assert 'class="flag fixed"' in packed


def test_an_environment_change_is_marked_where_a_step_coincides(history, tmp_path):
    import shutil

    copy = tmp_path / "history"
    shutil.copytree(history, copy)
    index = read_index(copy / "index.json")
    later = [rid for n in index.nights if n.commit >= "05" for rid in n.runs]
    for rid in later:  # a jax upgrade that came with commit 5
        path = copy / "runs" / f"{rid}.json"
        data = json.loads(path.read_text())
        data["provenance"]["packages"]["jax"] = "9.9.9"
        path.write_text(json.dumps(data))
    build_site([copy], tmp_path / "site")
    page = case_page(tmp_path / "site", EXTEND)
    assert page.count('class="env hit"') == 1 and "environment changed" in page
    assert re.search(r"changed here:</b> jax [^ ]+ -&gt; 9.9.9", page)


def test_environment_changes_name_packages_device_and_cpu(history):
    a, b = (read_artifact(p) for p in sorted((history / "runs").glob("*.json"))[:2])
    assert environment_changes(a, b) == []
    b.provenance.packages["jax"] = "0.0.1"
    a.provenance.host["cpu_model"], b.provenance.host["cpu_model"] = "One CPU", "Other CPU"
    b.provenance.packages["mibench"] = "9"  # the code measured, not the environment
    got = environment_changes(a, b)
    assert got[0].startswith("jax ") and got[0].endswith("-> 0.0.1")
    assert any(c.startswith("CPU ") for c in got) and not any("mibench" in c for c in got)


def test_the_issue_body_names_the_newly_confirmed_regression(history, tmp_path):
    (new,) = newly_confirmed(read_index(history / "index.json"))
    assert new.case_id == EXTEND and new.culprit == SECOND
    body = tmp_path / "issue.md"
    out = CliRunner().invoke(app, ["site", str(history), "--out", str(tmp_path / "s"),
                                   "--issue-body", str(body), "--site-url", "https://x.io/nb"])
    assert out.exit_code == 0, out.output
    text = body.read_text()
    assert text.startswith("### mibench nightly: 1 regression(s) confirmed, `nightly-fake` at")
    assert SECOND[:12] in text and new.reproduce in text and "mibench accept" in text
    assert "(https://x.io/nb/cases/" in text and "https://x.io/nb/regressions.html" in text
    assert "summary.md.html" in text


def test_no_issue_body_without_a_newly_confirmed_regression(tmp_path):
    history = make_history(tmp_path, nights=NIGHTS[:4])  # up to the fix, nothing new
    body = tmp_path / "issue.md"
    body.write_text("stale")
    out = CliRunner().invoke(app, ["site", str(history), "--out", str(tmp_path / "s"),
                                   "--issue-body", str(body)])
    assert out.exit_code == 0, out.output
    assert not body.exists() and "no regression newly confirmed" in out.stdout


def test_the_site_replaces_an_earlier_site_and_nothing_else(history, tmp_path):
    out = tmp_path / "site"
    build_site([history], out)
    (out / "stale.html").write_text("old")
    build_site([history], out)
    assert not (out / "stale.html").exists() and (out / "index.html").is_file()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    got = CliRunner().invoke(app, ["site", str(history), "--out", str(other)])
    assert got.exit_code == 2 and "--out" in got.output
    assert (other / "notes.txt").read_text() == "keep"
    got = CliRunner().invoke(app, ["site", str(tmp_path), "--out", str(tmp_path / "x")])
    assert got.exit_code == 2 and "index.json" in got.output


def test_a_change_point_gets_the_between_run_interval_of_its_segments():
    from mibench.harness.judge.history import Point
    from mibench.harness.judge.steps import judge_steps, step_interval
    from mibench.harness.stats.significance import NoiseFloor

    def point(i, seconds):
        runs = ((seconds * (1 + 0.01 * ((i * 7) % 5 - 2)),) * 3,)
        return Point(label=str(i), commit=str(i), time=str(i), run_id=str(i), status="ok",
                     items_per_s=1 / runs[0][0], runs=runs, other_load=0.0)

    points = [point(i, 1.0) for i in range(8)] + [point(i, 1.5) for i in range(8, 16)]
    steps = judge_steps(points, lambda _: NoiseFloor(0.02, "test"))
    (cp,) = [s for s in steps if s.kind == "change point"]
    change, low, high = step_interval(points, steps, cp, 0.02)
    assert change == pytest.approx(0.5, abs=0.02) and low < change < high and low > 0.3


def test_the_scale_job_at_a_tiny_size(tmp_path):
    from mibench.harness.jobs import site_scale

    code = site_scale.main(tmp_path, [3, 4], nights=12, browser=str(tmp_path / "none"))
    assert code == 0
    data = json.loads((tmp_path / "scale.json").read_text())
    assert [s["measurements"] for s in data["sizes"]] == [3, 4]
    assert data["sizes"][0]["runs"] == 5 + 11 and data["cpu"]
    assert "not measured" in (tmp_path / "scale.md").read_text()
    index = read_index(tmp_path / "history-4" / "index.json")
    assert len(index.nights) == 12


def test_a_confirmed_improvement_is_flagged_for_a_look(history, tmp_path):
    import shutil

    from mibench.harness.records.nightly import Regression

    copy = tmp_path / "history"
    shutil.copytree(history, copy)
    index = read_index(copy / "index.json")
    last = index.nights[-1]
    index.regressions.append(Regression(
        id="i-1", kind="improvement", case_id=PACKED, measurement=index.regressions[0]
        .measurement, status="confirmed", good=index.nights[-2].commit, bad=last.commit,
        change=-0.6, low=-0.62, high=-0.58, source="ab, 5 rounds",
        verdict="suspicious improvement"))
    (copy / "index.json").write_text(index.to_json())
    built = build_site([copy], tmp_path / "site")
    text = (tmp_path / "site" / "regressions.html").read_text()
    article = text[text.index('id="i-1"'):].split("</article>")[0]
    assert "Flagged for a look" in article and "suspicious improvement" in article
    assert built.issue is not None and "i-1" not in built.issue  # not a regression


FAKE_GH = """#!{python}
import json, re, sys
from pathlib import Path
state = Path({state!r})
issues = json.loads(state.read_text()) if state.exists() else []
args = sys.argv[1:]
if args[:2] == ["issue", "list"]:
    jq = args[args.index("--jq") + 1]
    title = json.loads(re.search(r'select\\(\\.title == (".*")\\)', jq)[1])
    print("\\n".join(str(i["number"]) for i in issues if i["title"] == title))
elif args[:2] == ["issue", "create"]:
    body = Path(args[args.index("--body-file") + 1]).read_text()
    issues.append({{"number": len(issues) + 1, "title": args[args.index("--title") + 1],
                   "body": body}})
    print(f"https://github.test/issues/{{len(issues)}}")
elif args[:2] == ["issue", "edit"]:
    issue = next(i for i in issues if i["number"] == int(args[2]))
    issue["body"] = Path(args[args.index("--body-file") + 1]).read_text() + "(edited)"
state.write_text(json.dumps(issues))
"""


def test_the_workflow_opens_one_issue_and_updates_it_on_a_rerun(history, tmp_path):
    """The workflow's issue step (its own shell script) against a fake `gh`: the first run
    opens an issue titled by the body's first line, a second run of the same night updates
    that issue instead of opening another."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    workflow = yaml.safe_load((root / ".github/workflows/nightly.yml").read_text())
    (step,) = [s for s in workflow["jobs"]["site"]["steps"]
               if s.get("name", "").startswith("Open or update")]
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    gh = bin_ / "gh"
    gh.write_text(FAKE_GH.format(python=sys.executable, state=str(tmp_path / "issues.json")))
    gh.chmod(0o755)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    built = build_site([history], tmp_path / "site")
    (tmp_path / "issue.md").write_text(built.issue)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    for _ in range(2):
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    (issue,) = json.loads((tmp_path / "issues.json").read_text())
    assert issue["title"] == built.issue.splitlines()[0].removeprefix("### ")
    assert "`nightly-fake`" in issue["title"] and issue["body"].endswith("(edited)")
    summary = (tmp_path / "summary.md").read_text()
    assert "Opened https://github.test/issues/1" in summary and "Updated issue #1" in summary
