"""Developer sessions: `nox -s tests`, `nox -s lint`, `nox -s smoke`, `nox -s bench`."""

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
def smoke(session):
    """The README's main command: every mode and parity check on the embedded tiny model."""
    _install(session)
    session.run("mibench", "run", "configs/cpu-smoke.yaml", "--out", "artifacts/smoke", env=ENV)
