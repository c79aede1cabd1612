"""The servers' rows of the score-checks job (harness/jobs/score_checks.py): `mibench serve`
in each mode (invariance_serve.py `SERVE_MODES`), its checks' faults switched on in the http
engine (what comes back from the server), and `prefix_cache` on the fake server
(harness/testing/fake_server.py) with a harmless cache, its control its `--cache-off`
launch, caught with `--warm-shift`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ...jobs.invariance import DELIM
from ...jobs.score_checks import Row, config, measure_case
from .invariance_serve import SERVE_MODES


def serve_cases() -> list[dict]:
    return [{"engine": "http", "mode": "single", "clients": 1, "requests": 1,
             "launch": {"name": f"serve-{m}", "command": [
                 "{python}", "-m", "mibench.harness.cli", "serve", "--model", "{model}",
                 "--host", "{host}", "--port", "{port}", "--dtype", "{dtype}"],
                 "ready": {"timeout_s": 300}},
             "server_args": {"mode": m, "delimiter": DELIM}} for m in SERVE_MODES]


def fake_cache_case(shift: float) -> dict:
    return {"engine": "http", "mode": "single", "clients": 1, "requests": 1,
            "launch": {"name": f"fake-shift-{shift:g}", "command": [
                "{python}", "-m", "mibench.harness.testing.fake_server", "{port}",
                "--warm-shift", str(shift)], "ready": {"path": "/get_server_info",
                                                        "timeout_s": 60},
                "stop": {"grace_s": 2}},
            "prefix_cache": {"trials": 2, "cache_off": {"cache_off": True}}}


def server_rows(folder: Path, spec) -> list[Row]:
    """`mibench serve`'s rows in each mode (its checks on the parity workload `spec`, each
    server launched in turn under `folder`), then `prefix_rows`."""
    from ...case_kinds import open_servers
    from ...config import expand
    from ...run.pool import EnginePool

    cfg = config(serve_cases(), folder, ["order", "duplicates", "degenerate"])
    launched = open_servers(folder / "servers")
    pool = EnginePool(bind=launched.bind)
    rows = []
    try:
        for case in expand(cfg):
            mode = dict(case.http.launch.args)["mode"]
            rows += [dataclasses.replace(r, engine="serve", mode=mode,
                                         fault=f"{r.fault} (in the http engine)")
                     for r in measure_case(case, pool, spec, launched)]
            pool.close()
            launched.release(set())
    finally:
        pool.close()
        launched.close()
    return rows + prefix_rows(folder)


def prefix_rows(folder: Path) -> list[Row]:
    """`prefix_cache` on the fake server: a cache that changes nothing (passes), and one
    whose warm answers move (`--warm-shift 0.01`: caught); the control of each is its
    `--cache-off` launch."""
    from ...case_kinds import kind_of, open_servers
    from ...config import expand
    from ...run.parity import GroupParity, parity_workload
    from ...run.pool import EnginePool

    cfg = config([fake_cache_case(0.0), fake_cache_case(0.01)], folder, ["prefix_cache"])
    servers = open_servers(folder / "servers")
    pool = EnginePool(bind=servers.bind)
    try:
        g = GroupParity(pool, parity_workload(cfg), {}, servers=servers)
        clean, shifted = (kind_of(c.engine).parity(g, [c], ["prefix_cache"])[0]
                          for c in expand(cfg))
    finally:
        pool.close()
        servers.close()
    return [Row("fake server", "single", "prefix cache", "prefix_cache",
                f"<= {clean.tolerance:g}", clean.max_log_diff, clean.status,
                "warm answers moved (--warm-shift 0.01); control: --cache-off",
                shifted.max_log_diff, shifted.status)]
