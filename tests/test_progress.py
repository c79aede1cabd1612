"""What a run tells as it goes and what it measures against: progress lines on a stderr that
is not a terminal (CI logs), `--progress` styles, `--case` selection, and the CPU peak that
`mfu` divides by, calibrated once per machine and cached."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from mibench.engines import MibenchError
from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.run import peak as peak_mod
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run
from mibench.harness.testing import fake_factory, fixed_peak, write_config

CONFIG = """
    name: fake
    model: {path: "embedded:tiny"}
    workload: {query_tokens: 12, num_items: 5, item_tokens: {dist: uniform, min: 2, max: 4},
               label_token_ids: [198, 9834], delimiter: 151643}
    runs: {warmup: 1, timed: 2}
    cases:
      - {engine: jax, mode: single}
      - {engine: jax, mode: packed, mask: [dense, segment]}
      - {engine: jax, mode: prefill_extend, extend_batch_size: 2}
"""
IDS = ["jax/single/tp=1", "jax/packed/mask=dense/tp=1", "jax/packed/mask=segment/tp=1",
       "jax/prefill_extend/extend_batch_size=2/tp=1"]
LINE = re.compile(r"^\[(\d)/(\d)\] (\S+) (ok|failed|skipped)(?: \(\w+\))? "
                  r"(\S+) items/s elapsed \d+:\d\d:\d\d ETA (\d+:\d\d:\d\d|\?)$")


def go(tmp_path, factory=None, **kw):
    config = load_config(write_config(tmp_path, CONFIG), [])
    if "case" in kw:
        kw["cases"] = kw.pop("case")
    return run(plan_of(config, out=tmp_path / "out", engine_factory=factory or fake_factory(),
                       peak=fixed_peak(), **kw))


@pytest.mark.parametrize("style", ["auto", "lines", True])
def test_one_line_per_case_on_a_stderr_that_is_not_a_terminal(tmp_path, capsys, style):
    """capsys's stderr is no terminal: `auto` (and True, the API default) prints lines."""
    factory = fake_factory(fail={"prefill_extend": RuntimeError("boom")})
    record = go(tmp_path, factory, progress=style)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4, err
    parsed = [LINE.match(line) for line in err]
    assert all(parsed), err
    assert [m.group(3) for m in parsed] == IDS
    assert [(m.group(1), m.group(2)) for m in parsed] == [(str(i), "4") for i in range(1, 5)]
    assert [m.group(4) for m in parsed] == ["ok", "ok", "ok", "failed"]
    assert "(RuntimeError)" in err[3] and err[3].endswith("ETA 0:00:00")
    speed = record.cases[0].metrics.throughput_items_per_s.median
    assert float(parsed[0].group(5)) == pytest.approx(speed, rel=1e-3)


def test_parity_groups_get_a_line_too(tmp_path, capsys):
    text = CONFIG + "    parity: {checks: [modes]}\n"
    config = load_config(write_config(tmp_path, text), [])
    run(plan_of(config, out=tmp_path / "out", engine_factory=fake_factory(), peak=fixed_peak(),
                progress="lines"))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 5 and err[-1].startswith("parity ('embedded:tiny', 'float32', 1)")


def test_none_prints_nothing_and_a_bad_style_is_named(tmp_path, capsys):
    go(tmp_path, progress="none")
    go(tmp_path, progress=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(MibenchError) as e:
        go(tmp_path, progress="fancy")
    assert e.value.field == "--progress" and "auto, bar, lines, none" in str(e.value)


def test_case_glob_selects(tmp_path):
    record = go(tmp_path, progress=False, case="jax/packed/*")
    assert [c.case_id for c in record.cases] == IDS[1:3]
    (path,) = (tmp_path / "out").glob("*.json")
    assert [c["case_id"] for c in json.loads(path.read_text())["cases"]] == IDS[1:3]
    # resuming without --case runs the rest and keeps the config's order
    config = load_config(write_config(tmp_path, CONFIG), [])
    record = run(plan_of(config, resume=path, progress=False, engine_factory=fake_factory(),
                         peak=fixed_peak(), allow_mixed=True))
    assert [c.case_id for c in record.cases] == IDS
    # a resume with --case keeps the cases it does not select
    record = run(plan_of(config, resume=path, progress=False, engine_factory=fake_factory(),
                         peak=fixed_peak(), allow_mixed=True, cases="*single*"))
    assert [c.case_id for c in record.cases] == IDS


def test_case_that_matches_nothing_is_exit_2_naming_the_option(tmp_path):
    config = write_config(tmp_path, CONFIG)
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "o"),
                                      "--case", "torch/*"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: --case") and "'torch/*' matches no case" in line
    assert IDS[0] in line and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()  # nothing ran, nothing was written
    bad = CliRunner().invoke(app, ["run", str(config), "--progress", "fancy"])
    assert bad.exit_code == 2 and bad.output.startswith("error: --progress")


def test_cpu_peak_is_calibrated_once_per_machine_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    calls = []
    monkeypatch.setattr(peak_mod, "calibrate_cpu", lambda dtype: calls.append(dtype) or 1.5e11)
    first = peak_mod.PeakTable("cpu", "cpu")
    assert first("float32") == 1.5e11 and calls == ["float32"]
    assert first.source.startswith("calibrated (cached 20")
    assert peak_mod.cpu_model() in first.source
    monkeypatch.setattr(peak_mod, "calibrate_cpu", lambda dtype: calls.append(dtype) or 9e11)
    second = peak_mod.PeakTable("cpu", "cpu")  # the next run: same figure, no measurement
    assert second("float32") == 1.5e11 and calls == ["float32"]
    assert second.source == first.source
    assert second("bfloat16") == 9e11 and calls == ["float32", "bfloat16"]  # its own entry
    data = json.loads((tmp_path / "cache" / "peak.json").read_text())
    assert len(data["entries"]) == 2
    entry = next(e for e in data["entries"].values() if e["dtype"] == "float32")
    assert entry["flops"] == 1.5e11 and entry["cpu"] == peak_mod.cpu_model()
    assert peak_mod.PeakTable("gpu", "NVIDIA H100 80GB HBM3").source == "vendor"


def test_a_broken_or_unwritable_cache_costs_only_the_caching(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "peak.json").write_text("{not json")
    monkeypatch.setenv("MIBENCH_CACHE", str(cache))
    monkeypatch.setattr(peak_mod, "calibrate_cpu", lambda dtype: 2e11)
    table = peak_mod.PeakTable("cpu", "cpu")
    assert table("float32") == 2e11 and "cached" in table.source
    assert json.loads((cache / "peak.json").read_text())["version"] == 1  # rewritten
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")  # the cache folder is a file: nothing can be cached
    table = peak_mod.PeakTable("cpu", "cpu")
    assert table("float32") == 2e11 and "not cached" in table.source


def test_a_calibration_on_a_busy_machine_is_not_cached(tmp_path, monkeypatch):
    """Threads that waited for a CPU half of the time measured the other processes, not
    the peak: tried again, then used for this run only."""
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(peak_mod, "RETRY_S", 0.0)
    clock = iter(range(0, 10**12, 10**9))  # each read: 1 s more running and waiting
    monkeypatch.setattr(peak_mod, "run_queue_ns", lambda: (next(clock), next(clock)))
    calls = []
    monkeypatch.setattr(peak_mod, "calibrate_cpu", lambda dtype: calls.append(dtype) or 1e11)
    table = peak_mod.PeakTable("cpu", "cpu")
    assert table("float32") == 1e11 and len(calls) == peak_mod.ATTEMPTS
    assert "not cached: the CPUs were busy" in table.source and "50%" in table.source
    assert not (tmp_path / "cache" / "peak.json").exists()
    # idle again: measured once and cached
    monkeypatch.setattr(peak_mod, "run_queue_ns", lambda: (next(clock), 0))
    table = peak_mod.PeakTable("cpu", "cpu")
    assert table("float32") == 1e11 and len(calls) == peak_mod.ATTEMPTS + 1
    assert (tmp_path / "cache" / "peak.json").exists() and "(cached" in table.source
