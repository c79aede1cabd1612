"""Developer sessions: `nox -s tests`, `nox -s scenarios`, `nox -s fast`, `nox -s lint`,
`nox -s smoke`, `nox -s bench`, `nox -s overhead`, `nox -s calibrate`, `nox -s verdicts`,
`nox -s nightly`,
`nox -s nightly_scenario`, `nox -s nightly_suite`, `nox -s compile`, `nox -s serve_smoke`,
`nox -s serve_flood`, `nox -s sglang_jax`, `nox -s seeds_cpu`, `nox -s history_scale`,
`nox -s site_scale`, `nox -s score_checks`."""

import nox

nox.options.sessions = ["lint", "tests"]
ENV = {"HF_HUB_OFFLINE": "1"}


def _install(session, extras: str = "test") -> None:
    # the CPU build of torch first, so the project's `torch` requirement pulls no CUDA build
    session.install("torch==2.13.0")
    session.install("-e", f".[{extras}]")


@nox.session(python="3.11")
def tests(session):
    """The README's test command (what CI runs): every test but the long scenarios."""
    _install(session)
    session.run("python", "-m", "pytest", "-q", "-n", "2", "-m", "not scenario",
                *session.posargs, env=ENV)


@nox.session(python="3.11")
def scenarios(session):
    """The long scenarios (`@pytest.mark.scenario`: a real bisect, a real nightly that
    bisects, `ab` with TPU compiles, the v6e-4/v6e-8 configs compiled, 8 simulated devices,
    the GPU job's dry run with every parity check),
    each with a smaller version in the README's test command; not in CI."""
    _install(session)
    session.run("python", "-m", "pytest", "-q", "-n", "2", "-m", "scenario",
                *session.posargs, env=ENV)


@nox.session(python="3.11")
def fast(session):
    """The fast tier: every test not marked slow (none starts a server: tests/conftest.py
    fails one that listens; none runs Pallas in interpret mode or the mode matrices past
    their delimited examples without softmax), a few minutes on a 2-core CPU, with coverage
    (subprocesses included); fails when a source file never ran."""
    _install(session)
    session.run("python", "-m", "pytest", "-q", "-m", "not slow", "--cov",
                "--cov-report=term:skip-covered", "--cov-report=json:out/coverage.json",
                *session.posargs, env=ENV)
    session.run("python", "-c", UNEXECUTED, "out/coverage.json")


# a file whose statements never ran in the fast tier (coverage.py's json report)
UNEXECUTED = """
import json, sys
files = json.load(open(sys.argv[1]))["files"]
never = sorted(f for f, v in files.items() if v["summary"]["num_statements"]
               and not v["summary"]["covered_lines"])
print(f"{len(files)} source files, {len(never)} never ran" + (": " if never else ""),
      ", ".join(never))
sys.exit(1 if never else 0)
"""


@nox.session(python="3.11")
def lint(session):
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session(python="3.11")
def bench(session):
    """The modes benchmark (configs/bench-modes.yaml: every JAX mode on the seeds' workload
    shape, tiny, float32, one process): compile time, items/s, latency and peak memory per
    mode, then the report of the new artifact (artifacts/bench/report.md). Extra arguments
    go to `mibench run`, e.g. `nox -s bench -- --set runs.timed=5`."""
    import json
    from pathlib import Path

    _install(session)
    out = Path("artifacts/bench")
    before = set(out.glob("*.json"))
    # exit 3 (a case failed) is recorded in the artifact: report it, then fail below
    session.run("mibench", "run", "configs/bench-modes.yaml", "--out", str(out),
                *session.posargs, env=ENV, success_codes=[0, 3])
    new = max(set(out.glob("*.json")) - before, key=lambda p: p.stat().st_mtime)
    session.run("mibench", "report", str(new), "--out", str(out / "report.md"), env=ENV)
    failed = [c["case_id"] for c in json.loads(new.read_text())["cases"] if c["status"] != "ok"]
    if failed:
        session.error(f"cases not ok: {', '.join(failed)} (see {new})")


@nox.session(python="3.11")
def overhead(session):
    """What the harness adds to a direct timed loop over the same call (configs/overhead.yaml;
    the <= 2% budget). Extra arguments go to `mibench job overhead`, e.g. `-- --rounds 5`."""
    _install(session)
    session.run("mibench", "job", "overhead", "configs/overhead.yaml", *session.posargs,
                env=ENV)


@nox.session(python="3.11")
def calibrate(session):
    """The A/B gate's false alarms and detections on this machine (`mibench job calibrate`:
    A/A and 1.2x / 1.5x slower prefill_extend, 20 trials each under a background load, then
    21 separate runs compared in turn; about an hour on 2 cores). Its workers import the
    harness from this checkout: leave the working tree alone while it runs (or run it from
    a worktree of its own). Extra arguments go to the job, e.g. `-- --trials 5`."""
    _install(session)
    session.run("mibench", "job", "calibrate", "--out", "out/calibrate", *session.posargs,
                env=ENV)


@nox.session(python="3.11")
def verdicts(session):
    """The verdicts between runs on this machine (`mibench job verdicts`, docs/verdicts.md):
    the busy level's measurements, the A/A matrix (six cpu-smoke runs, three beside a busy
    loop per core, all 15 pairs through compare and history), 10 pairs of separate runs at
    1.2x / 1.5x / 2x slower prefill_extend, and memory by case order; tables in
    out/verdicts/verdicts.md, about 1.5 hours on 2 cores. Leave the working tree alone while
    it runs. Extra arguments go to the job, e.g. `-- --part aa --aa-runs 2`."""
    _install(session)
    session.run("mibench", "job", "verdicts", "--out", "out/verdicts", *session.posargs,
                env=ENV)


@nox.session(python="3.11")
def score_checks(session):
    """The engine x mode x check table of parity's order, duplicates, degenerate and
    prefix_cache checks, each with the fault it must catch (`mibench job score-checks`,
    docs/parity.md): out/score-checks/score-checks.md. CI runs the tiny controls
    (tests/test_score_invariants.py); this is the full table."""
    _install(session)
    session.run("mibench", "job", "score-checks", "--out", "out/score-checks",
                *session.posargs, env=ENV)


@nox.session(python="3.11")
def smoke(session):
    """The README's main command: every mode and parity check on the embedded tiny model."""
    _install(session)
    session.run("mibench", "run", "configs/cpu-smoke.yaml", "--out", "artifacts/smoke", env=ENV)


@nox.session(python="3.11")
def serve_smoke(session):
    """`mibench serve` launched by mibench on a free port of 127.0.0.1 (configs/serve-smoke
    .yaml), the `http` engine against it and the `jax` engine in process on the same
    workload, then the report of both side by side (artifacts/serve-smoke/report.md).
    Extra arguments go to `mibench run`."""
    _run_and_report(session, "configs/serve-smoke.yaml", "artifacts/serve-smoke")


@nox.session(python="3.11")
def serve_flood(session):
    """`mibench serve` (tiny, default limits) under 300 and 1,000 silent sockets that
    reconnect as fast as it closes them: well-formed requests answered and their latency
    p50/p99 (out/serve-flood.json; about two minutes). Extra arguments go to `mibench job
    serve-flood`, e.g. `-- --sockets 2000 --server-arg max_connections=512`."""
    _install(session)
    session.run("mibench", "job", "serve-flood", "--out", "out/serve-flood.json",
                *session.posargs, env=ENV)


@nox.session(python="3.11")
def sglang_jax(session):
    """sglang-jax launched by mibench (configs/sglang-jax-cpu.yaml: 1 and 16 running
    requests, parity against torch, concurrency invariance) and its report in
    artifacts/sglang-jax-cpu/report.md, then the opt-in test tests/test_sglang_jax.py.
    Needs MIBENCH_SGLANG_JAX: the python of a venv built by
    a venv with a CPU build of sglang-jax (skipped without it)."""
    import os

    if not os.environ.get("MIBENCH_SGLANG_JAX"):
        session.skip("MIBENCH_SGLANG_JAX is not set (a venv with sglang-jax's CPU build: "
                     "export MIBENCH_SGLANG_JAX=VENV/bin/python)")
    _run_and_report(session, "configs/sglang-jax-cpu.yaml", "artifacts/sglang-jax-cpu")
    session.run("python", "-m", "pytest", "-q", "tests/test_sglang_jax.py", env=ENV)


def _run_and_report(session, config: str, folder: str) -> None:
    """`mibench run CONFIG --out FOLDER` (exit 3, a failed case or parity check, is
    recorded: reported, then the session fails), then the report of the new artifact."""
    import json
    from pathlib import Path

    _install(session)
    out = Path(folder)
    before = set(out.glob("*.json"))
    session.run("mibench", "run", config, "--out", str(out), *session.posargs, env=ENV,
                success_codes=[0, 3])
    new = max(set(out.glob("*.json")) - before, key=lambda p: p.stat().st_mtime)
    session.run("mibench", "report", str(new), "--out", str(out / "report.md"), env=ENV)
    data = json.loads(new.read_text())
    failed = [c["case_id"] for c in data["cases"] if c["status"] == "failed"]
    if failed or (data.get("parity") or {}).get("passed") is False:
        session.error(f"failed cases {failed} or parity checks (see {out / 'report.md'})")


@nox.session(python="3.11")
def nightly(session):
    """The nightly workflow's command on CPU (.github/workflows/nightly.yml runs the same on a
    TPU VM): `mibench nightly configs/cpu-smoke.yaml --history out/nightly/history` runs the
    config at HEAD, judges it against the history, confirms suspicions with `ab`, bisects a
    confirmed one and prints the summary (docs/nightly.md); the first night seeds the
    history (5 runs). Exit 1 (a confirmed or known regression, a failed case, parity, ...)
    fails the session. Extra arguments go to the command, e.g. `-- --budget 20m`."""
    _install(session)
    session.run("mibench", "nightly", "configs/cpu-smoke.yaml", "--history",
                "out/nightly/history", *session.posargs, env=ENV)


@nox.session(python="3.11")
def nightly_scenario(session):
    """The nightly loop shown on a scratch clone (`mibench job nightly-scenario`,
    docs/nightly.md): eight commits on top of main, commit 4 makes prefill_extend 2x as
    long; nights at commits 0 (seeding), 2, 5 and 8, and a night whose run has busy loops
    beside it; checks and every summary in out/nightly-scenario/scenario.md. About 25
    minutes on a quiet 2-core CPU. Extra arguments go to the job, e.g. `-- --rounds 3`, or
    `-- --unseen-noise` (a busy loop per core through every night, the load faked quiet)."""
    _install(session)
    session.run("mibench", "job", "nightly-scenario", "--out", "out/nightly-scenario",
                *session.posargs, env=ENV)


@nox.session(python="3.11")
def nightly_suite(session):
    """Short nightly scenarios under noise no load measurement sees (`mibench job
    nightly-suite`, harness/jobs/nightly_suite.py): one seeded history; the culprit first
    and last in its range, a partial step, two runs with no regression; wrong culprits,
    false confirmations, failed jobs and undecided nights in out/nightly-suite/suite.md.
    About an hour on 2 cores. Extra arguments go to the job, e.g. `-- --scenario partial`."""
    _install(session)
    session.run("mibench", "job", "nightly-suite", "--out", "out/nightly-suite",
                *session.posargs, env=ENV)


@nox.session(python="3.11")
def site_scale(session):
    """How `mibench site` scales (not part of CI): synthetic nightly histories of 20 and 200
    measurements x 365 nights built into sites; the build times (200 within 10x of 20), the
    overview's size (< 5 MB) and its first render in headless chromium (< 1 s; Debian's
    `chromium`), on the CPU named in out/site-scale/scale.md. Extra arguments go to
    `mibench job site-scale`, e.g. `-- --nights 100`."""
    _install(session)
    session.run("mibench", "job", "site-scale", "--out", "out/site-scale", *session.posargs,
                env=ENV)


@nox.session(python="3.11")
def compile(session):
    """The TPU configs compiled at full size for their slices by the real TPU compiler
    (libtpu, installed into $MIBENCH_CACHE on first use; no TPU needed): v6e1 for v6e-1,
    v6e4 for v6e-4, v6e8 for v6e-8, into artifacts/compile/, then the "TPU fit" report of
    the three (artifacts/compile/report.md). Fails when a case does not compile or fit.
    Extra arguments go to every `mibench compile`, e.g. `-- --set workload.num_items=100`."""
    import json
    from pathlib import Path

    _install(session)
    out = Path("artifacts/compile")
    made, failed = [], []
    for name, target in (("v6e1", "v6e-1"), ("v6e4", "v6e-4"), ("v6e8", "v6e-8")):
        before = set(out.glob("*.json"))
        # exit 3 (a case failed) is recorded in the artifact: report all three, then fail
        session.run("mibench", "compile", f"configs/{name}.yaml", "--target", target,
                    "--out", str(out), *session.posargs, env=ENV, success_codes=[0, 3])
        new = max(set(out.glob("*.json")) - before, key=lambda p: p.stat().st_mtime)
        made.append(new)
        failed += [c["case_id"] for c in json.loads(new.read_text())["cases"]
                   if c["status"] == "failed"]
    session.run("mibench", "report", *map(str, made), "--out", str(out / "report.md"), env=ENV)
    if failed:
        session.error(f"cases did not compile or fit: {', '.join(failed)} (see {out})")


TINY = ["--set", "model.path=embedded:tiny", "--set", "model.dtype=float32",
        "--set", "workload.query_tokens=256", "--set", "runs.timed=3"]
TP_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
# the TPU configs shrunk to a 2-core CPU: (config, artifact folder, --set, environment)
SEEDS_CPU = (
    ("v6e1", "artifacts/v6e1-cpu-small",
     TINY + ["--set", "workload.num_items=256", "--set", "cases.0.workload.num_items=16",
             "--set", "cases.4.workload.num_items=8"], {}),
    ("v6e4", "artifacts/v6e4-cpu-small",
     TINY + ["--set", "workload.num_items=64", "--set", "cases.0.workload.num_items=16"],
     TP_DEVICES),
    ("v6e8", "artifacts/v6e8-cpu-small",
     TINY + ["--set", "workload.num_items=64", "--set", "cases.0.workload.num_items=16"],
     TP_DEVICES),
    ("model-matrix", "artifacts/model-matrix-cpu-small",
     TINY + ["--set", "workload.num_items=[8, 32, 128]"], {}),
)


@nox.session(python="3.11")
def seeds_cpu(session):
    """The seeds' TPU configs (v6e1, v6e4, v6e8, model-matrix) shrunk to this CPU (`tiny`,
    float32, query 256, fewer items; tp 4 and 8 on simulated devices), each run and its
    report written to reports/<name>-cpu-small.md: every seed figure with why there is no
    ratio here, the seeds' speedups beside mibench's, the dense extend sweep's per-batch
    p50/p99/max (v6e1). About 30 minutes on a quiet 2-core CPU. Extra arguments go to
    every `mibench run`."""
    from pathlib import Path

    _install(session)
    for name, folder, sets, env in SEEDS_CPU:
        out = Path(folder)
        before = set(out.glob("*.json"))
        session.run("mibench", "run", f"configs/{name}.yaml", "--out", folder, *sets,
                    *session.posargs, env={**ENV, **env}, success_codes=[0, 3])
        new = max(set(out.glob("*.json")) - before, key=lambda p: p.stat().st_mtime)
        session.run("mibench", "report", str(new), "--out", f"reports/{name}-cpu-small.md",
                    env=ENV)


@nox.session(python="3.11")
def history_scale(session):
    """`mibench history` wall times at 50, 200 and 2,000 synthetic run artifacts
    (tests/history_scale.py: distinct commits of a scratch git repository, 14 cases each,
    A/A groups, steps and one-off 2x runs), with the CPU's name and t(2000) / t(200), which
    should stay at most 12 (linear: 10). About two minutes on a 2-core CPU. Extra arguments
    replace the sizes, e.g. `-- 50 400`."""
    _install(session)
    session.run("python", "tests/history_scale.py", *(session.posargs or ["50", "200", "2000"]),
                env=ENV)
