"""The runner's plumbing with a fake engine: failures recorded, interrupted runs resumed,
artifacts valid against the shipped schema, provenance and metrics filled."""

from __future__ import annotations

import json
import time

import jsonschema
import pytest

from mibench.engines import MibenchError
from mibench.harness.config import load_config
from mibench.harness.records import SCHEMA_FILE, read_artifact
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import artifact_path, exit_code, run
from mibench.harness.testing import fake_factory, fixed_peak, write_config

CONFIG = """
    name: fake
    model: {path: "embedded:tiny"}
    workload: {query_tokens: 12, num_items: 5, item_tokens: {dist: uniform, min: 2, max: 4},
               label_token_ids: [198, 9834], delimiter: 151643}
    runs: {warmup: 1, timed: 3}
    cases:
      - {engine: jax, mode: single}
      - {engine: jax, mode: packed, mask: segment}
      - {engine: jax, mode: prefill_extend, extend_batch_size: 2}
"""
SCHEMA = json.loads(SCHEMA_FILE.read_text())


def go(tmp_path, factory=None, text=CONFIG, sets=(), **kw):
    config = load_config(write_config(tmp_path, text), list(sets))
    if "case" in kw:
        kw["cases"] = kw.pop("case")
    return run(plan_of(config, out=tmp_path / "out", **{"progress": False, **kw},
                       engine_factory=factory or fake_factory(), peak=fixed_peak()))


def artifact(tmp_path):
    (path,) = (tmp_path / "out").glob("*.json")
    data = json.loads(path.read_text())
    jsonschema.validate(data, SCHEMA)
    return path, data


def test_all_ok_artifact_validates(tmp_path):
    record = go(tmp_path)
    path, data = artifact(tmp_path)
    assert path == artifact_path(record, tmp_path / "out")
    assert data["schema"] == "mibench.run/4" and data["finished_at"]
    assert [c["status"] for c in data["cases"]] == ["ok"] * 3
    case = data["cases"][0]
    assert len(case["timed_s"]) == 3 and len(case["warmup_s"]) == 1 and case["compile_s"] > 0
    m = case["metrics"]
    assert m["throughput_items_per_s"]["n"] == 3 and m["latency_per_item_ms"]["median"] > 0
    assert m["total_s"]["min"] <= m["total_s"]["median"] <= m["total_s"]["max"]
    assert m["useful_flops"] > 0 and m["mfu"] > 0 and m["tokens_per_s"] > 0
    assert m["peak_memory_bytes"] >= 0 and m["peak_memory_source"] == "rss-rise"
    assert len(m["score_digest"]) == 64
    assert exit_code(record) == 0


def test_failing_second_case_keeps_first_and_third(tmp_path):
    factory = fake_factory(fail={"packed": RuntimeError("RESOURCE_EXHAUSTED: out of memory")})
    record = go(tmp_path, factory)
    _, data = artifact(tmp_path)
    assert [c["status"] for c in data["cases"]] == ["ok", "failed", "ok"]
    err = data["cases"][1]["error"]
    assert err["type"] == "RuntimeError" and "RESOURCE_EXHAUSTED" in err["message"]
    assert "Traceback" in err["traceback"] and "RESOURCE_EXHAUSTED" in err["traceback"]
    assert data["cases"][2]["timed_s"] and exit_code(record) == 3


def test_engine_load_failure_fails_its_cases_only(tmp_path):
    def factory(name, model, dtype, tp):
        if name == "torch":
            raise MibenchError("no torch here", field="engine")
        return fake_factory()(name, model, dtype, tp)

    text = CONFIG + "      - {engine: torch, mode: single}\n"
    record = go(tmp_path, factory, text=text)
    assert [c.status for c in record.cases] == ["ok", "ok", "ok", "failed"]
    assert "no torch here" in record.cases[3].error.message


@pytest.mark.parametrize("at, holds", [("packed", "holds 1 of 3 case(s) (1 ok), kept"),
                                       ("single", "no case finished")])
def test_an_interrupted_run_names_its_artifact_and_what_it_holds(tmp_path, monkeypatch, at,
                                                                  holds):
    """`mibench run` stopped by Ctrl-C: exit 130, one line naming the artifact file, what
    it holds and the command that resumes it; no `finished` or `ETA 0:00:00` after it."""
    import shlex

    from typer.testing import CliRunner

    from mibench.harness.cli import app
    from mibench.harness.run import plan as plan_module

    monkeypatch.chdir(tmp_path)
    make = plan_module.make_plan
    factory = fake_factory(fail={at: KeyboardInterrupt()})
    monkeypatch.setattr(plan_module, "make_plan", lambda *a, **kw: make(
        *a, **kw, engine_factory=factory, peak=fixed_peak()))
    config = write_config(tmp_path, CONFIG)
    result = CliRunner().invoke(app, ["run", str(config), "--out", "out", "--progress",
                                      "lines"])
    assert result.exit_code == 130, result.output
    (path,) = (tmp_path / "out").glob("*.json")
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("interrupted")]
    assert f"out/{path.name}" in line and holds in line, line
    again = line.split("resume with: ")[1].split(", or delete it)")[0]
    assert shlex.split(again) == ["mibench", "run", str(config), "--resume",
                                  f"out/{path.name}"]
    after = result.stderr.split(line)[1]
    assert "ETA" not in after and "finished" not in after
    assert len(read_artifact(path).cases) == (at == "packed")


def test_interrupted_run_keeps_finished_cases_and_resumes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside any git checkout: no commit to mix
    with pytest.raises(KeyboardInterrupt):
        go(tmp_path, fake_factory(fail={"packed": KeyboardInterrupt()}))
    path, data = artifact(tmp_path)
    assert [c["case_id"] for c in data["cases"]] == ["jax/single/tp=1"]
    assert data["finished_at"] is None
    factory = fake_factory()
    config = load_config(tmp_path / "c.yaml")
    record = run(plan_of(config, out=tmp_path / "elsewhere", resume=path, progress=False,
                         engine_factory=factory, peak=fixed_peak()))
    _, data2 = artifact(tmp_path)  # the same file, completed
    assert data2["run_id"] == data["run_id"] and data2["finished_at"]
    assert [c["status"] for c in data2["cases"]] == ["ok"] * 3
    assert data2["cases"][0] == data["cases"][0]  # kept, not re-run
    assert len(record.resumed_at) == 1
    # only the two missing cases, and the engine's one untimed warm-up call (run/pool.py)
    assert sum(e.calls for e in factory.made) == 2 * (1 + 1 + 3) + 1


def test_resume_reruns_failed_cases_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside any git checkout: no commit to mix
    go(tmp_path, fake_factory(fail={"packed": RuntimeError("boom")}))
    path, _ = artifact(tmp_path)
    factory = fake_factory()
    record = run(plan_of(load_config(tmp_path / "c.yaml"), out=tmp_path / "out", resume=path,
                         progress=False, engine_factory=factory, peak=fixed_peak()))
    assert [c.status for c in record.cases] == ["ok"] * 3
    assert sum(e.calls for e in factory.made) == 1 + 1 + 3 + 1  # + the warm-up call


def test_resume_refuses_another_config(tmp_path):
    go(tmp_path)
    path, _ = artifact(tmp_path)
    other = load_config(tmp_path / "c.yaml", ["runs.timed=2"])
    with pytest.raises(MibenchError, match="different config"):
        run(plan_of(other, out=tmp_path / "out", resume=path, progress=False,
                    engine_factory=fake_factory()))


def git(repo, *args):
    import subprocess

    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def test_resume_at_another_commit_or_dirty_is_refused_unless_allowed(tmp_path, monkeypatch):
    from mibench.harness.report.tables import case_commits

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "f").write_text("1")
    git(repo, "add", "f")
    git(repo, "commit", "-qm", "one")
    monkeypatch.chdir(repo)
    go(tmp_path, fake_factory(fail={"packed": RuntimeError("boom")}))
    path, data = artifact(tmp_path)
    first = data["cases"][0]["commit"]
    assert first and data["cases"][0]["dirty"] is False
    config = load_config(tmp_path / "c.yaml")
    (repo / "f").write_text("2")  # uncommitted change
    with pytest.raises(MibenchError, match="continued with uncommitted changes"):
        run(plan_of(config, out=tmp_path / "out", resume=path, progress=False,
                    engine_factory=fake_factory(), peak=fixed_peak()))
    git(repo, "commit", "-qam", "two")
    with pytest.raises(MibenchError, match=f"measured at commit {first[:12]}.*--allow-mixed"):
        run(plan_of(config, out=tmp_path / "out", resume=path, progress=False,
                    engine_factory=fake_factory(), peak=fixed_peak()))
    record = run(plan_of(config, out=tmp_path / "out", resume=path, progress=False,
                         engine_factory=fake_factory(), peak=fixed_peak(), allow_mixed=True))
    commits = [c.commit for c in record.cases]
    assert commits[0] == first and commits[1] != first  # packed re-run at the new commit
    assert case_commits(record).startswith("MIXED: ")
    assert case_commits(read_artifact(path)) == case_commits(record)


def test_an_artifact_being_written_is_locked(tmp_path, monkeypatch):
    from mibench.harness.records import locked

    monkeypatch.chdir(tmp_path)
    go(tmp_path, fake_factory(fail={"packed": RuntimeError("boom")}))
    path, _ = artifact(tmp_path)
    with locked(path):  # another process writing it
        with pytest.raises(MibenchError, match="being written by another mibench process"):
            run(plan_of(load_config(tmp_path / "c.yaml"), out=tmp_path / "out", resume=path,
                        progress=False, engine_factory=fake_factory(), peak=fixed_peak()))
    record = run(plan_of(load_config(tmp_path / "c.yaml"), out=tmp_path / "out", resume=path,
                         progress=False, engine_factory=fake_factory(), peak=fixed_peak()))
    assert [c.status for c in record.cases] == ["ok"] * 3
    assert not path.with_name(path.name + ".lock").exists()


def test_resume_refuses_unknown_schema(tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"schema": "mibench.run/0"}))
    with pytest.raises(MibenchError, match="mibench.run/1"):
        read_artifact(bad)


@pytest.mark.slow
def test_timeout_fails_the_case_and_keeps_its_runs(tmp_path):
    def slow(engine, n):
        if n <= 21:  # the first case's calls only
            time.sleep(0.15)

    # the first call, the warmup and one timed run take 0.45 s of sleep, all 21 take 3.2 s:
    # 1.5 s times out mid-run with a second of margin for a loaded machine's wake-ups
    text = CONFIG.replace("mode: single}", "mode: single, runs: {timed: 20, timeout_s: 1.5}}")
    record = go(tmp_path, fake_factory(on_call=slow), text=text)
    first = record.cases[0]
    assert first.status == "failed" and first.error.type == "CaseTimeout"
    assert 1 <= len(first.timed_s) < 20 and first.metrics.throughput_items_per_s is not None
    assert record.cases[1].status == "ok"


def test_provenance_is_filled(tmp_path, monkeypatch):
    monkeypatch.setenv("MIBENCH_PROBE", "42")
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    record = go(tmp_path, engine_repo=".", argv=["mibench", "run", "c.yaml"])
    p = record.provenance
    assert p.git.commit and len(p.git.commit) == 40 and p.git.branch and p.git.dirty is not None
    assert p.engine_repo is not None and p.engine_repo.commit == p.git.commit
    assert p.packages["jax"] and p.packages["pydantic"] and p.packages["mibench"]
    assert p.devices.platform == "cpu" and p.devices.kind and p.devices.count >= 1
    assert p.devices.peak_flops == {"float32": 1e11, "bfloat16": 1e11}
    assert p.host["hostname"] and p.python.startswith("3.")
    assert p.argv == ["mibench", "run", "c.yaml"]
    assert p.env["MIBENCH_PROBE"] == "42" and p.env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"
    config = load_config(tmp_path / "c.yaml")
    assert record.config == config.resolved() and record.config_sha256 == config.sha256()


def test_same_workload_gives_same_digest(tmp_path):
    record = go(tmp_path)
    digests = {c.metrics.score_digest for c in record.cases}
    assert len(digests) == 1  # the fake engine scores every mode alike


def test_parity_plumbing(tmp_path):
    text = CONFIG + ("      - {engine: torch, mode: single}\n"
                     "    parity: {checks: [isolation, modes, engines]}\n")
    record = go(tmp_path, text=text)
    checks = record.parity.checks
    assert record.parity.passed and exit_code(record) == 0
    kinds = [(c.check, c.variant) for c in checks]
    assert kinds.count(("isolation", "same_length")) == 3  # not the reference engine's
    assert kinds.count(("modes", None)) == 2 and kinds.count(("engines", None)) == 1
    assert all(c.max_abs_diff == 0.0 for c in checks)
    artifact(tmp_path)


def test_parity_failure_exits_3(tmp_path):
    class Skewed:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):  # the rest of the engine contract: the inner engine's
            return getattr(self.inner, name)

        def score(self, *a, mode="single", **kw):
            r = self.inner.score(*a, mode=mode, **kw)
            if mode == "packed":
                r.scores[0][0] += 1e-3
            return r

    base = fake_factory()
    text = CONFIG + "    parity: {checks: [modes]}\n"
    record = go(tmp_path, lambda *k: Skewed(base(*k)), text=text)
    bad = [c for c in record.parity.checks if c.status == "failed"]
    assert [c.case_id for c in bad] == ["jax/packed/mask=segment/tp=1"]
    assert bad[0].max_abs_diff == pytest.approx(1e-3) and bad[0].tolerance == 1e-5
    assert all(c.status == "ok" for c in record.cases) and exit_code(record) == 3


def test_jsonl_requests_workload(tmp_path):
    (tmp_path / "reqs.jsonl").write_text('{"query": [1, 2, 3], "items": [[4], [5, 6]]}\n'
                                         '{"query": [7, 8], "items": [[9], [10], [11]]}\n')
    text = CONFIG.replace(
        "workload: {query_tokens: 12, num_items: 5, item_tokens: {dist: uniform, min: 2, max: 4},",
        "workload: {requests: reqs.jsonl,")
    record = go(tmp_path, text=text)
    case = record.cases[0]
    assert case.status == "ok" and case.workload.requests.endswith("reqs.jsonl")
    t = case.metrics.total_s.median
    assert case.metrics.throughput_items_per_s.median == pytest.approx(5 / t, rel=0.5)
    assert case.metrics.tokens_per_s == pytest.approx((3 + 1 + 3 + 2 + 1 + 3) / t)


def test_engines_are_shared_and_released(tmp_path):
    text = CONFIG.replace('model: {path: "embedded:tiny"}',
                          'model: {path: ["embedded:tiny", "embedded:small"]}')
    factory = fake_factory()
    record = go(tmp_path, factory, text=text)
    assert len(record.cases) == 6 and all(c.status == "ok" for c in record.cases)
    assert [e.model for e in factory.made] == ["embedded:tiny", "embedded:small"]
