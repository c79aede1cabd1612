"""Developer sessions: `nox -s tests`, `nox -s lint`, `nox -s smoke`, `nox -s bench`,
`nox -s overhead`, `nox -s nightly`."""

import nox

nox.options.sessions = ["lint", "tests"]
ENV = {"HF_HUB_OFFLINE": "1"}


def _install(session, extras: str = "test") -> None:
    # the CPU build of torch first, so the project's `torch` requirement pulls no CUDA build
    session.install("torch==2.13.0")
    session.install("-e", f".[{extras}]")


@nox.session(python="3.11")
def tests(session):
    _install(session)
    session.run("python", "-m", "pytest", "-q", *session.posargs, env=ENV)


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
def smoke(session):
    """The README's main command: every mode and parity check on the embedded tiny model."""
    _install(session)
    session.run("mibench", "run", "configs/cpu-smoke.yaml", "--out", "artifacts/smoke", env=ENV)


@nox.session(python="3.11")
def nightly(session):
    """The nightly workflow's steps on CPU (.github/workflows/nightly.yml, configs/cpu-smoke.yaml):
    run, compare with the baseline, report and history, fail on regression. Outputs in
    out/nightly/; the baseline is out/nightly/baseline.json (or `nox -s nightly -- BASE.json`)
    and becomes this run's artifact when the gate passes."""
    import shutil
    from pathlib import Path

    _install(session)
    out = Path("out/nightly")
    runs = out / "runs"
    baseline = Path(session.posargs[0]) if session.posargs else out / "baseline.json"
    before = set(runs.glob("*.json"))
    # exit 3 (a case or parity check failed) is recorded in the artifact; compare judges it
    session.run("mibench", "run", "configs/cpu-smoke.yaml", "--out", str(runs), env=ENV,
                success_codes=[0, 3])
    new = max(set(runs.glob("*.json")) - before, key=lambda p: p.stat().st_mtime)
    base_args = ["--baseline", str(baseline)] if baseline.exists() else []
    session.run("mibench", "report", str(new), *base_args, "--out", str(out / "report.md"),
                env=ENV)
    session.run("mibench", "history", str(runs), "--out", str(out / "history.md"), env=ENV)
    if baseline.exists():
        session.run("mibench", "compare", str(baseline), str(new), "--threshold", "5%", env=ENV)
    else:
        session.log(f"no baseline at {baseline}: this run becomes the baseline")
    shutil.copyfile(new, baseline)  # reached only when the gate passed


@nox.session(python="3.11")
def calibrate(session):
    """The A/B gate's calibration on this machine (tens of minutes; not part of CI): false
    regressions of A/A runs, detection of 20% and 50% slowdowns (harness/jobs/calibrate.py)."""
    _install(session)
    session.run("mibench", "job", "calibrate", "--out", "out/calibrate", *session.posargs,
                env=ENV)
