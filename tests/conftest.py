"""Shared fixtures: engines on the embedded `tiny` preset and seeded random requests."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# how busy the machine is, as every run records it (harness/host/busy.py), is faked: quiet
# (0) unless a test says otherwise, so no verdict of the suite depends on the real load
# beside it; tests of the probe itself remove the variable
os.environ.setdefault("MIBENCH_FAKE_OTHER_LOAD", "0")
# a pytest-xdist worker gets its share of the cores, no more: PyTorch's OpenMP pool and XLA's
# Eigen pool are sized for the whole machine, and two workers' pools fought over 2 cores
# (the fast tier's test_torch_extend, other work beside it: 51 s, 17 s with one thread
# each; the whole fast tier idle: 235 s, 215 s). Set before
# either library starts; a variable the user set is kept; subprocesses inherit it.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _threads = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_threads))
    if _threads == 1:
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                           "intra_op_parallelism_threads=1")

import functools  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import typer.testing  # noqa: E402

# Typer's CliRunner turns the app into a click command on every invoke, evaluating the type
# hints of every command's every parameter (about 0.1 s for mibench's); the app does not
# change within a session, so each worker builds it once (test_bad_inputs: 379 invokes)
if hasattr(typer.testing, "_get_command"):
    typer.testing._get_command = functools.cache(typer.testing._get_command)

DELIM = 151643
LABELS = [198, 9834]


def python_start_s(n: int = 3) -> float:
    """The median time a bare Python takes to start and exit on this machine now: the unit
    by which a test that waits on a deadline scales its margin, so that a busy loop on
    every core (which slows the test's own processes and threads alike) moves its bound
    too, where fixed seconds failed (issue 45). About 0.03 s on a quiet 2-core machine."""
    import statistics
    import subprocess
    import sys
    import time

    took = []
    for _ in range(n):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-S", "-c", "pass"], check=True)
        took.append(time.monotonic() - t0)
    return statistics.median(took)


def random_request(seed: int, query_len: int = 48, num_items: int = 8,
                   item_len: int | tuple[int, int] = (1, 9), vocab: int = 151000):
    """(query, items): random token ids below `vocab` (so never the delimiter)."""
    rng = np.random.default_rng(seed)
    query = rng.integers(0, vocab, query_len).tolist()
    lo, hi = (item_len, item_len + 1) if isinstance(item_len, int) else item_len
    items = [rng.integers(0, vocab, int(rng.integers(lo, hi))).tolist()
             for _ in range(num_items)]
    return query, items


# The mode matrices (every example of every mode) run under the delimited semantics without
# softmax in the fast tier; the plain semantics and apply_softmax=True are the slow tier's, which
# CI runs. The plain semantics keep fast tests of their own (test_semantics:
# test_num_tokens_under_plain, test_dense_and_segment_masks_agree_under_plain, ...).
SEMANTICS_TIERED = ["delimited", pytest.param("plain", marks=pytest.mark.slow)]
SOFTMAX_TIERED = [False, pytest.param(True, marks=pytest.mark.slow)]


def mode_examples(engine: str = "jax", skip: tuple[str, ...] = ()) -> list[tuple[str, dict]]:
    """(mode, options) of every example the registry declares for `engine`'s modes: the
    tests that must cover every mode loop over these, so a new mode is covered at once."""
    from mibench.engines import MODES

    return [(m.name, dict(ex)) for m in MODES[engine].values() if m.name not in skip
            for ex in m.examples]


def example_id(mode: str, opts: dict) -> str:
    return mode + "".join(f"-{k}{v}" for k, v in opts.items())


def tiered(examples: list) -> list:
    """`examples` ((mode, options) pairs, or pytest params of them) as pytest params: a
    mode's first example and its first with each mask run in the fast tier, the rest of its
    options (chunk sizes, schedules, precompiled sets) in the slow tier."""
    seen, out = set(), []
    for ex in examples:
        if hasattr(ex, "values"):  # already a pytest.param: kept as it is
            out.append(ex)
            continue
        mode, opts = ex
        keys = {mode, (mode, opts.get("mask"))}
        out.append(pytest.param(mode, opts, id=example_id(mode, opts),
                                marks=() if keys - seen else pytest.mark.slow))
        seen |= keys
    return out


@pytest.fixture(scope="session")
def make_request():
    return random_request


@pytest.fixture(scope="session")
def jax_tiny():
    from mibench.engines import load_engine

    return load_engine("jax", model="embedded:tiny", dtype="float32")


@pytest.fixture(scope="session")
def torch_tiny():
    from mibench.engines import load_engine

    return load_engine("torch", model="embedded:tiny", dtype="float32")


@pytest.fixture(scope="session")
def served(jax_tiny):
    """`mibench serve` of embedded:tiny (packed, the fastest mode on a CPU; delimited) on
    127.0.0.1, a free port; stops after the tests (test_serve.py, test_http.py)."""
    from mibench.harness.serve import Served, Settings, build_app, prepare

    settings = prepare(jax_tiny, Settings(model="embedded:tiny", mode="packed",
                                          delimiter=DELIM))
    with Served(build_app(jax_tiny, settings)) as server:
        yield server


# The fast tier (`pytest -m "not slow"`, the developer's loop) starts no server: a test that
# listens on a socket is marked slow, as pyproject's marker says, and so is one that uses the
# `served` fixture (marked at collection). The guard makes the rule true, where a docstring
# once claimed it: while a test not marked slow runs (its fixtures' setup included),
# socket.listen fails it. tests/test_fast_tier.py shows the guard at work.
_RUNNING: list = [None]  # the fast test running now (None: a slow test, or none)


def _install_fast_tier_guard() -> None:
    import socket

    listen = socket.socket.listen

    def guarded_listen(self, *args):
        if _RUNNING[0] is not None:
            raise AssertionError(f"{_RUNNING[0]} listens on a socket (starts a server): "
                                 "a fast-tier test may not; mark it slow")
        return listen(self, *args)

    socket.socket.listen = guarded_listen


def pytest_configure(config):
    _install_fast_tier_guard()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "served" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    # the slow tests first (a stable sort: each file's order kept): with pyproject's
    # --maxschedchunk, pytest-xdist hands tests out a few at a time in this order, so the
    # last ones are short and both workers finish together (a 60 s compile collected last
    # kept one worker busy alone)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _RUNNING[0] = None if item.get_closest_marker("slow") else item.nodeid
    try:
        yield
    finally:
        _RUNNING[0] = None
