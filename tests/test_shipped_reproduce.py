"""Every shipped report's Reproduce commands: each is accepted by the CLI, and its config and
`--set` overrides, run through `validate`, expand (with its `--case`) to exactly the case
the report's artifact measured: the same id, options, model, dtype, workload and runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand, select_cases
from mibench.harness.records import read_artifact

ROOT = Path(__file__).resolve().parents[1]
REPORTS = sorted(p for p in (ROOT / "reports").rglob("*.md")
                 if "## Reproduce" in p.read_text())


def artifacts_by_run_id() -> dict:
    found = {}
    for path in [*(ROOT / "artifacts").rglob("*.json"), *(ROOT / "reports").rglob("*.json")]:
        try:
            rec = read_artifact(path)
        except Exception:  # compile, A/B and summary files are not run artifacts
            continue
        found[rec.run_id] = rec
    return found


ARTIFACTS = artifacts_by_run_id()


def commands(report: Path) -> list[tuple[str, str]]:
    """(case id, command) of each row of the report's Reproduce table."""
    section = report.read_text().split("## Reproduce", 1)[1]
    rows = []
    for line in section.splitlines():
        m = re.fullmatch(r"\|(?: [^|]+ \|)? (\S+) \| `(mibench run .*)` \|", line)
        if m:
            rows.append((m[1], m[2]))
    return rows


def run_ids(report: Path) -> list[str]:
    line = next(ln for ln in report.read_text().splitlines() if ln.startswith("| Run id |"))
    return [c.strip() for c in line.strip("|").split("|")[1:]]


def parsed(command: str):
    words = shlex.split(command.replace("\\|", "|"))
    run = typer.main.get_command(app).commands["run"]
    with run.make_context("run", words[2:]) as ctx:  # the CLI accepts it as it is
        return ctx.params


@pytest.mark.parametrize("report", REPORTS, ids=[str(p.relative_to(ROOT)) for p in REPORTS])
def test_reproduce_commands_expand_to_the_artifacts_cases(report):
    ids = run_ids(report)
    assert ids and all(i in ARTIFACTS for i in ids), f"{report}: artifacts {ids}"
    cases = {c.case_id: c for i in ids for c in ARTIFACTS[i].cases}
    rows = commands(report)
    assert rows and {cid for cid, _ in rows} <= set(cases)
    expanded = {}  # (config, sets) -> its cases: the rows of a report share one or a few
    for case_id, command in rows:
        params = parsed(command)
        config = Path(params["config"])
        assert not config.is_absolute(), f"{report}: {command} names a path outside the repo"
        sets = params["set_"] or []
        if (config, *sets) not in expanded:  # validate's answer depends on these alone
            check = CliRunner().invoke(app, ["validate", str(ROOT / config),
                                             *[w for s in sets for w in ("--set", s)]])
            assert check.exit_code == 0, (report, command, check.output)
            expanded[config, *sets] = expand(load_config(ROOT / config, sets))
        (spec,) = select_cases(expanded[config, *sets], params["case"])
        case = cases[case_id]
        assert spec.case_id == case_id, (report, command)
        assert (spec.engine, spec.mode) == (case.engine, case.mode)
        if spec.http is None:  # an http case's server and load are in its id
            assert spec.params == case.params, (report, case_id)
        assert (spec.model, spec.dtype) == (case.model.path, case.model.dtype)
        want = case.workload.as_dict()
        got = spec.workload.as_dict()
        for key in ("query_tokens", "num_items", "item_tokens", "label_token_ids",
                    "delimiter", "apply_softmax", "tokens", "seed"):
            assert got.get(key) == want.get(key), (report, case_id, key)
        assert (spec.runs.warmup, spec.runs.timed) == (case.runs.warmup, case.runs.timed), \
            (report, case_id)


def test_every_shipped_report_with_commands_is_checked():
    names = {p.relative_to(ROOT).as_posix() for p in REPORTS}
    assert {"reports/v6e1-cpu-small.md", "reports/gpu-h100.md"} <= names


def test_the_seeds_cpu_session_runs_configs_that_validate():
    """`nox -s seeds_cpu` (the must-show runs of the seeds' TPU configs on a CPU): every
    config with its overrides validates, and each has its shipped report."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("noxfile_seeds", ROOT / "noxfile.py")
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    names = []
    for name, _, sets, _ in noxfile.SEEDS_CPU:
        out = CliRunner().invoke(app, ["validate", str(ROOT / "configs" / f"{name}.yaml"),
                                       *sets])
        assert out.exit_code == 0, (name, out.output)
        names.append(name)
    assert names == ["v6e1", "v6e4", "v6e8", "model-matrix"]
