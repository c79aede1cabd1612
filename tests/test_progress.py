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
from mibench.harness.host import peak as peak_mod
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
    assert len(err) == 5 and err[-1].startswith("parity embedded:tiny float32 tp=1 elapsed ")
    assert "(" not in err[-1]  # no Python tuple


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


def test_a_calibration_on_a_busy_machine_is_not_cached_nor_used(tmp_path, monkeypatch):
    """Threads that waited for a CPU half of the time measured the other processes, not
    the peak: tried again, then neither cached nor used: the peak and MFU are unknown, and
    the table asks once, not once per case."""
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(peak_mod, "RETRY_S", 0.0)
    clock = iter(range(0, 10**12, 10**9))  # each read: 1 s more running and waiting
    monkeypatch.setattr(peak_mod, "run_queue_ns", lambda: (next(clock), next(clock)))
    calls = []
    monkeypatch.setattr(peak_mod, "calibrate_cpu", lambda dtype: calls.append(dtype) or 1e11)
    table = peak_mod.PeakTable("cpu", "cpu")
    assert table("float32") is None and len(calls) == peak_mod.ATTEMPTS
    assert table("float32") is None and len(calls) == peak_mod.ATTEMPTS  # asked once
    assert table.source.startswith("unknown, so MFU is not computed")
    assert "the CPUs were busy" in table.source and "50%" in table.source
    assert "mibench env" in table.source and table.values == {}
    assert not (tmp_path / "cache" / "peak.json").exists()
    # idle again: measured once and cached
    monkeypatch.setattr(peak_mod, "run_queue_ns", lambda: (next(clock), 0))
    table = peak_mod.PeakTable("cpu", "cpu")
    assert table("float32") == 1e11 and len(calls) == peak_mod.ATTEMPTS + 1
    assert (tmp_path / "cache" / "peak.json").exists() and "(cached" in table.source


def test_lines_say_what_a_long_case_does_at_most_once_a_heartbeat():
    """`lines`: a case's calls are silent for HEARTBEAT_S after its start or the last
    line, then one says what it just did; each capacity step gets its line; the case's
    line ends it."""
    import io

    from mibench.harness.run.progress import HEARTBEAT_S, LineProgress

    t, out = [0.0], io.StringIO()
    p = LineProgress(10, stream=out, timer=lambda: t[0])
    p.start_case(1, 1, "jax/single/tp=1", 10, runs=(1, 8))
    said = []
    for dt, label in [(10, "compile"), (HEARTBEAT_S, "warmup 1/1"), (HEARTBEAT_S - 1, "run 1/8"),
                      (2, "run 2/8"), (1, "run 3/8")]:
        t[0] += dt
        p.tick(label)
        said.append(out.getvalue().count("\n"))
    assert said == [0, 1, 1, 2, 2], out.getvalue()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/1] jax/single/tp=1: warmup 1/1 elapsed 0:00:40")
    assert lines[1].startswith("[1/1] jax/single/tp=1: run 2/8 elapsed")
    p.start_case(1, 1, "http/single/slo=p99:5000ms/tp=1", 10)
    for label in ["warmup", "slo 1/s missed", "slo 0.5/s met", "slo repeat 1/3 at 0.5/s"]:
        t[0] += 1
        p.tick(label)
    steps = out.getvalue().splitlines()[2:]
    assert [line.split(": ", 1)[1].split(" elapsed")[0] for line in steps] == [
        "slo 1/s missed", "slo 0.5/s met", "slo repeat 1/3 at 0.5/s"], steps


def test_a_heartbeat_names_the_case_its_phase_and_the_time_while_one_call_runs():
    """One call that runs for minutes (a long timed run, a parity check): the heartbeat
    says which case, which call it is in and for how long, at most once a HEARTBEAT_S."""
    import io

    from mibench.harness.run.progress import HEARTBEAT_S, LineProgress, phase_after

    t, out = [0.0], io.StringIO()
    p = LineProgress(14, stream=out, timer=lambda: t[0])
    t[0] = HEARTBEAT_S
    p.beat()  # before the first case: workers start
    assert out.getvalue() == "starting: probing the devices, loading the engine, elapsed 0:00:30\n"
    p.start_case(2, 3, "jax/packed/mask=dense/tp=1", 7, runs=(1, 5))
    t[0] += 5
    p.beat()
    assert out.getvalue().count("\n") == 1  # not yet
    t[0] += HEARTBEAT_S
    p.beat()
    assert out.getvalue().splitlines()[-1] == (
        "[2/3] jax/packed/mask=dense/tp=1: loading, compiling (the first call), case 0:00:35, "
        "elapsed 0:01:05")
    for label in ["compile", "warmup 1/1", "run 1/5"]:
        p.tick(label)
    t[0] += HEARTBEAT_S
    p.beat()
    assert out.getvalue().splitlines()[-1].startswith(
        "[2/3] jax/packed/mask=dense/tp=1: run 2/5, case 0:01:05")
    p.note("parity embedded:tiny float32 tp=1")
    t[0] += HEARTBEAT_S
    p.beat()
    assert out.getvalue().splitlines()[-1].startswith("[2/3] jax/packed/mask=dense/tp=1: parity")
    assert phase_after("compile", (0, 3)) == "run 1/3"
    assert phase_after("warmup 2/2", (2, 3)) == "run 1/3"
    assert phase_after("run 3/3", (2, 3)) == "finishing the case"
    assert phase_after("load", None) == "after load"


def test_a_compile_counter_says_which_case_of_how_many_and_an_eta():
    import io

    from mibench.harness.run.heartbeat import HEARTBEAT_S, CaseCounter

    t, out = [0.0], io.StringIO()
    c = CaseCounter(4, "compiling", stream=out, timer=lambda: t[0], heartbeat=False)
    c.start(1, "jax/single/tp=1")
    t[0] += 20
    c.start(2, "jax/packed/mask=dense/tp=1")
    t[0] += HEARTBEAT_S
    c.beat()
    c.close()
    assert out.getvalue().splitlines() == [
        "[1/4] compiling jax/single/tp=1 elapsed 0:00:00 ETA ?",
        "[2/4] compiling jax/packed/mask=dense/tp=1 elapsed 0:00:20 ETA 0:01:00",
        "[2/4] jax/packed/mask=dense/tp=1: compiling, case 0:00:30, elapsed 0:00:50"]


# --- the bar and its ETA ----------------------------------------------------------------


def test_eta_weighs_calls_by_their_measured_cost():
    """Two cases of 1 compile + 5 runs: the first call takes 10 s, each run 1 s. Counting
    calls would say 6 calls done of 12 after case 1 (15 s), so 15 s left; by cost, the
    next case is one 10 s first call and 5 runs: 15 s too. Inside case 2, after its
    compile, calls would say 7 of 12 done in 25 s (18 s left); by cost, 5 s."""
    from mibench.harness.run.progress import Eta

    t = [0.0]
    eta = Eta(12, clock=lambda: t[0])
    assert eta.remaining() is None  # nothing measured yet
    for i in (1, 2):
        eta.start_case(i, 2, 6)
        for label in ["compile"] + [f"run {k}/5" for k in range(1, 6)]:
            t[0] += 10.0 if label == "compile" else 1.0
            eta.tick(label)
            if i == 2 and label == "compile":
                assert eta.remaining() == pytest.approx(5.0)
        if i == 1:
            eta.end_case()
            assert eta.remaining() == pytest.approx(15.0)
    # a slow case after fast ones: its own calls set its ETA as soon as one is measured
    eta.end_case()
    slow = Eta(18, clock=lambda: t[0])
    slow.start_case(1, 3, 6)
    for label in ["compile"] + [f"run {k}/5" for k in range(1, 6)]:
        t[0] += 0.5
        slow.tick(label)
    slow.end_case()
    slow.start_case(2, 3, 6)
    t[0] += 0.5
    slow.tick("compile")
    t[0] += 8.0
    slow.tick("run 1/5")  # this case's runs take 8 s, the last case's 0.5 s
    assert slow.remaining() == pytest.approx(4 * 8.0 + 0.5 + 5 * 0.5)


def render_bar(width: int, case_id: str) -> tuple[list[str], str]:
    """(the lines printed above the bar, the bar) of a RichProgress at `width` columns."""
    import io

    from rich.console import Console

    from mibench.harness.run.progress import RichProgress

    t = [0.0]
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    bar = RichProgress(14, timer=lambda: t[0], console=console)
    for i in (1, 2):
        bar.start_case(i, 2, case_id, 7)
        for label in ["compile", "warmup 1/1", "run 1/5", "run 2/5"]:
            t[0] += 1.0
            bar.tick(label)
        if i == 1:
            record = type("R", (), {"status": "ok", "error": None, "metrics": type(
                "M", (), {"throughput_items_per_s": type("S", (), {"median": 123.4})})})
            bar.end_case(record)
    live = bar._progress.get_renderable()
    shot = Console(width=width, force_terminal=False, color_system=None)
    with shot.capture() as cap:
        shot.print(live)
    bar._progress.stop()
    printed = [line[line.index("✓"):] for line in out.getvalue().splitlines() if "✓" in line]
    return printed, cap.get().rstrip("\n")


@pytest.mark.parametrize("width", [80, 120])
def test_bar_survives_80_columns_and_finished_cases_stay(width):
    case_id = "jax/prefill_extend/extend_batch_size=4/precompile_bs=1,2,4/tp=1"
    printed, bar = render_bar(width, case_id)
    assert len(bar) <= width and "\n" not in bar
    assert "━" in bar and "2/2" in bar and "run 2/5" in bar and "ETA 0:00:" in bar
    assert "…" in bar and bar.startswith("jax/prefill")  # the id cut, not the bar
    assert printed and printed[0].startswith(f"✓ [1/2] {case_id} ok 123.4 items/s")


def test_each_ab_round_says_which_of_how_many(tmp_path):
    """`ab`'s line per side and case of a round: `round 2/5 base (COMMIT) CASE: N ms`."""
    import types

    from mibench.harness.ab.rounds import _record_sample
    from mibench.harness.config.matrix import expand

    record = go(tmp_path, progress="none", case="jax/single/*")
    (rec,) = record.cases
    (case,) = [c for c in expand(load_config(write_config(tmp_path, CONFIG), []))
               if c.case_id == rec.case_id]
    lines, side = [], types.SimpleNamespace(commit="0123456789abcdef")
    by_id = {case.case_id: types.SimpleNamespace(base=[])}
    _record_sample(rec, case, side, "base", (1, 5), False, by_id, {case.case_id: {}},
                   lines.append)
    (line,) = lines
    assert re.fullmatch(r"round 2/5 base \(01234567\) jax/single/tp=1: [\d.]+ ms", line), line


def test_an_interrupted_bar_ends_interrupted_with_no_eta():
    """The user's report: Ctrl-C, then `finished ... ETA 0:00:00`. Now the bar's last
    frame says `interrupted`, and no ETA."""
    import io

    from rich.console import Console

    from mibench.harness.run.progress import RichProgress

    t, out = [0.0], io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    bar = RichProgress(14, timer=lambda: t[0], console=console)
    bar.start_case(1, 2, "jax/single/tp=1", 7)
    for label in ["compile", "warmup 1/1", "slo 2/s met"]:
        t[0] += 1.0
        bar.tick(label)
    assert "  [1/2] jax/single/tp=1: slo 2/s met\n" in out.getvalue()  # a step stays
    bar.close(stopped=True)
    last = out.getvalue().rsplit("\r", 1)[-1]
    assert "interrupted" in last and "ETA" not in last and "finished" not in last, last


def test_a_long_step_says_it_still_runs():
    """`still` around an `ab` round's case: a line each period while it runs, none after."""
    import threading

    from mibench.harness.run.heartbeat import still

    said, t, ticked = [], [0.0], threading.Event()

    def say(line):
        said.append(line)
        ticked.set()

    def clock():
        t[0] += 45.0  # each read: 45 s later
        return t[0]

    with still(say, "round 2/5 base (01234567) jax/single/tp=1", timer=clock, every=0.01):
        assert ticked.wait(10)
    n = len(said)
    assert said[0] == "round 2/5 base (01234567) jax/single/tp=1: still running, 0:00:45"
    threading.Event().wait(0.05)
    assert len(said) == n  # stopped with the block
