"""Golden outputs of the commands on the fake engine: what `run`, `compare`, `report`,
`export` and `history` write, byte for byte, for one fixed world. They hold the refactor of
issue 46 (code moving between folders) to "artifacts stay byte-identical".

The world: one config (four JAX modes and torch, parity checks) run twice on the fake engine
(harness/testing), as commit 111... (base) and 222... (new, where packed segment is 1.6x
slower and prefill_extend 0.6x), then each command on the two artifacts, with relative
paths, inside the world's folder. Everything that differs between machines or runs is
pinned where it is read, never normalised afterwards:
- each call's duration (`measure._timed`: from the case's mode and the side, 1% steps of
  noise by the call's index), the resident-set rise (`PeakRss`: 48 MiB a case), the other
  load (MIBENCH_FAKE_OTHER_LOAD=0; its window's clock and `os.cpu_count`);
- the time stamps (`now` of the runner and of the case records: a second apart from the
  side's start) and the run id (`runner.dt`, `runner.secrets`);
- the provenance at its sources (harness/host/provenance.py: git, packages, devices, host,
  Python, env; the runner's `git_info` that stamps each case).
So no time, host, machine path or dict order reaches a golden file (a second world, built
in another folder in the same process, must match the first byte for byte).

Regenerate after an intended change; the test then FAILS, naming what it wrote, so a
regeneration never passes silently (review it with `git diff tests/data/golden`):
    MIBENCH_REGOLD=1 python -m pytest tests/test_golden_outputs.py
"""

from __future__ import annotations

import datetime as dt
import difflib
import itertools
import os
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.host import busy, memory, provenance
from mibench.harness.records import Devices, GitInfo
from mibench.harness.records import run as run_records
from mibench.harness.run import case as case_module
from mibench.harness.run import measure, runner
from mibench.harness.run.plan import RunOptions, make_plan
from mibench.harness.testing import fake_factory, fixed_peak, write_config

GOLDEN = Path(__file__).parent / "data" / "golden"
REGOLD = os.environ.get("MIBENCH_REGOLD") == "1"
DIFF_LINES = 40  # of the unified diff a mismatch shows

CONFIG = """
    name: golden
    model: {path: "embedded:tiny"}
    workload: {query_tokens: 12, num_items: 5, item_tokens: {dist: uniform, min: 2, max: 4},
               label_token_ids: [198, 9834], delimiter: 151643}
    runs: {warmup: 1, timed: 5}
    cases:
      - {engine: jax, mode: single}
      - {engine: jax, mode: packed, mask: [dense, segment]}
      - {engine: jax, mode: prefill_extend, extend_batch_size: 2}
      - {engine: torch, mode: single}
    parity: {checks: [isolation, modes, engines]}
"""
SECONDS = {"single": 0.050, "packed": 0.020, "prefill_extend": 0.008}  # a call, by mode
SIDES = {  # name: (commit, start, factor of the seconds by case id)
    "base": ("1" * 40, dt.datetime(2026, 1, 1, 3, 0, tzinfo=dt.UTC), {}),
    "new": ("2" * 40, dt.datetime(2026, 1, 2, 3, 0, tzinfo=dt.UTC),
            {"jax/packed/mask=segment/tp=1": 1.6,  # a regression
             "jax/prefill_extend/extend_batch_size=2/tp=1": 0.6}),  # an improvement
}
HOST = {"hostname": "golden-host", "system": "Linux", "release": "6.1.0", "machine": "x86_64",
        "cpus": 2, "processor": None, "cpu_model": "Golden CPU"}
PACKAGES = {"mibench": "0.1.0", "jax": "0.8.1", "jaxlib": "0.8.1", "flax": "0.12.0",
            "torch": "2.9.0", "transformers": "4.57.1", "numpy": "2.3.4", "pydantic": "2.12.3"}
# each command of the world: (golden file, exit code, arguments); BASE, NEW: the artifacts
COMMANDS = [
    ("compare.md", 1, ["compare", "BASE", "NEW"]),
    ("compare.json", 1, ["compare", "BASE", "NEW", "--format", "json"]),
    ("report.md", 0, ["report", "NEW", "--baseline", "BASE"]),  # stdout: no plots
    ("export.csv", 0, ["export", "BASE", "NEW", "--format", "csv"]),
    ("export.bmf", 0, ["export", "BASE", "NEW", "--format", "bmf"]),
    ("export.json", 0, ["export", "BASE", "NEW", "--format", "json"]),
    ("history.md", 0, ["history", "artifacts"]),
    ("history.json", 0, ["history", "artifacts", "--format", "json"]),
]
NAMES = [f"run-{side}.json" for side in SIDES] + [name for name, _, _ in COMMANDS]


def check(name: str, text: str) -> None:
    """`text` must be tests/data/golden/NAME byte for byte; a difference fails with the
    first lines of the unified diff. Under MIBENCH_REGOLD=1 the file is rewritten and the
    test fails all the same (a golden file is never written by a passing test)."""
    __tracebackhide__ = True
    golden = GOLDEN / name
    if REGOLD:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(text.encode())
        pytest.fail(f"MIBENCH_REGOLD=1 wrote {name}: review `git diff tests/data/golden`, "
                    "then run without it")
    if not golden.exists():
        pytest.fail(f"golden file {name} is missing: MIBENCH_REGOLD=1 python -m pytest "
                    "tests/test_golden_outputs.py writes it")
    want = golden.read_bytes().decode()
    if text != want:
        diff = difflib.unified_diff(want.splitlines(), text.splitlines(), f"golden/{name}",
                                    "produced", lineterm="")
        pytest.fail(f"{name} differs from its golden file:\n"
                    + "\n".join(itertools.islice(diff, DIFF_LINES)))


class FixedRss:
    """The resident set of a machine that never varies: every case rises by 48 MiB."""

    def __init__(self, interval: float = 0.0):
        self.exact, self.base, self.peak = True, 512 * 2**20, 560 * 2**20

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    @property
    def extra(self) -> int:
        return self.peak - self.base


def pin_clock(m: pytest.MonkeyPatch, started: dt.datetime, factors: dict) -> None:
    """Each call's duration, the resident set, the load window and the time stamps."""
    calls, ticks = itertools.count(), itertools.count()
    stamps = (started + dt.timedelta(seconds=s) for s in itertools.count())
    real_make_call = case_module.make_call

    def make_call(engine, requests, case):  # a call that tells the clock its case
        inner = real_make_call(engine, requests, case)

        def call():
            return inner()

        call.mode, call.case_id = case.mode, case.case_id
        return call

    def timed(call):
        out, k = call(), next(calls)
        return SECONDS[call.mode] * factors.get(call.case_id, 1.0) * (1 + 0.01 * (k % 5)), out

    def now():
        return next(stamps).isoformat(timespec="milliseconds")

    m.setattr(case_module, "make_call", make_call)
    m.setattr(measure, "_timed", timed)
    m.setattr(measure, "PeakRss", FixedRss)
    m.setattr(memory, "PeakRss", FixedRss)
    # the fake load (quiet), its window 0.1 s per reading of the clock, on 2 CPUs
    m.setenv(busy.FAKE_ENV, "0")
    m.setattr(busy, "time", types.SimpleNamespace(monotonic=lambda: next(ticks) / 10))
    m.setattr(os, "cpu_count", lambda: 2)
    m.setattr(runner, "now", now)
    m.setattr(run_records, "now", now)
    m.setattr(runner, "dt", types.SimpleNamespace(UTC=dt.UTC, datetime=types.SimpleNamespace(
        now=lambda tz=None: started)))  # the run id's stamp
    m.setattr(runner, "secrets", types.SimpleNamespace(token_hex=lambda n: "0" * 2 * n))


def pin_provenance(m: pytest.MonkeyPatch, commit: str) -> None:
    """The provenance's sources: git, packages, devices, host, Python and env vars."""
    git = GitInfo(path=".", commit=commit, branch="main", dirty=False)
    m.setattr(runner, "git_info", lambda path: git)  # each case's commit
    m.setattr(provenance, "git_info", lambda path: git)
    m.setattr(provenance, "package_versions", lambda: dict(PACKAGES))
    m.setattr(provenance, "device_info",
              lambda env=None: Devices(platform="cpu", kind="cpu", count=1))
    m.setattr(provenance, "host_info", lambda: dict(HOST))
    m.setattr(provenance, "relevant_env", lambda: {"JAX_PLATFORMS": "cpu"})
    m.setattr(provenance, "sys", types.SimpleNamespace(version="3.11.9 (main)",
                                                       executable="python", argv=["mibench"]))


def run_side(side: str) -> Path:
    """One fake run of golden.yaml as `side`: its artifact, artifacts/<run id>.json."""
    commit, started, factors = SIDES[side]
    with pytest.MonkeyPatch.context() as m:
        pin_clock(m, started, factors)
        pin_provenance(m, commit)
        options = RunOptions(out=Path("artifacts"), progress="none",
                             argv=("mibench", "run", "golden.yaml"))
        plan = make_plan(load_config(Path("golden.yaml")), options, "golden.yaml",
                         engine_factory=fake_factory(), peak=fixed_peak())
        return runner.artifact_path(runner.run(plan), "artifacts")


def build_world(folder: Path) -> dict[str, str]:
    """Every golden output of a world built in `folder`, by file name."""
    with pytest.MonkeyPatch.context() as m:
        m.chdir(folder)
        write_config(folder, CONFIG, "golden.yaml")
        paths = {side: run_side(side) for side in SIDES}
        out = {f"run-{side}.json": path.read_text() for side, path in paths.items()}
        for name, code, args in COMMANDS:
            named = {"BASE": str(paths["base"]), "NEW": str(paths["new"])}
            result = CliRunner().invoke(app, [named.get(a, a) for a in args])
            assert result.exit_code == code, (name, result.output)
            out[name] = result.stdout
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    return build_world(tmp_path_factory.mktemp("world"))


@pytest.mark.parametrize("name", NAMES)
def test_output_matches_its_golden_file(world, name):
    check(name, world[name])


def test_a_second_world_elsewhere_is_byte_identical(world, tmp_path_factory):
    """Another folder, later in the same process (engines, caches and counters warm): the
    same bytes, so nothing of the path, the clock or what ran before leaks in."""
    again = build_world(tmp_path_factory.mktemp("elsewhere"))
    assert [n for n in NAMES if again[n] != world[n]] == []


def test_a_mismatch_fails_with_a_diff_and_regold_fails_too(monkeypatch, tmp_path):
    monkeypatch.setitem(globals(), "GOLDEN", tmp_path)
    monkeypatch.setitem(globals(), "REGOLD", False)
    with pytest.raises(pytest.fail.Exception, match="missing: MIBENCH_REGOLD=1"):
        check("x.md", "a\nb\n")
    assert not (tmp_path / "x.md").exists()
    monkeypatch.setitem(globals(), "REGOLD", True)
    with pytest.raises(pytest.fail.Exception, match="MIBENCH_REGOLD=1 wrote x.md"):
        check("x.md", "a\nb\n")
    monkeypatch.setitem(globals(), "REGOLD", False)
    check("x.md", "a\nb\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)differs.*-b\n\+c"):
        check("x.md", "a\nc\n")
