"""What the http path adds to a call of the same engine: `mibench serve` launched by
mibench (the JAX engine, packed, `tiny`, float32) against the JAX engine in this process,
on the same request (a 64-token query, 16 items of 6, softmax over two labels), the two
calls alternating; medians over `calls` pairs after 5 warmup pairs.

    mibench job http-overhead [--calls 40]

Reported (JSON): `in_process_ms`, `http_ms` (the request sent on one keep-alive connection
and its answer read and checked, as the load generator does at 1 client), `added_ms` and
`ratio`; `client_cpu_ms`, the load generator's own CPU time per request (encoding is done
once before, as in a load); `max_abs_diff` of the two calls' scores (0: the same engine,
the same scores)."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ...config.server import Launch, ServerLaunch

DELIMITER, LABELS = 151643, [198, 9834]
SERVE = ServerLaunch(Launch(command=["{python}", "-m", "mibench.harness.cli", "serve", "--model",
                                    "{model}", "--host", "{host}", "--port", "{port}",
                                    "--dtype", "{dtype}"]),
                     args=(("mode", "packed"), ("delimiter", DELIMITER)))


def request(seed: int = 3) -> tuple[list[int], list[list[int]]]:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 151000, 64).tolist(),
            [rng.integers(0, 151000, 6).tolist() for _ in range(16)])


def main(calls: int = 40) -> dict:
    from mibench.engines import HttpClient, load_engine, model_folder, wire

    from ..launch import Server

    query, items = request()
    engine = load_engine("jax", model="embedded:tiny")
    sglang = wire("sglang")
    body = sglang.encode(query, items, LABELS, True)

    def local():
        return engine.score(query, items, LABELS, mode="packed", apply_softmax=True,
                            delimiter=DELIMITER).scores

    with tempfile.TemporaryDirectory() as tmp, Server(
            SERVE, str(model_folder("embedded:tiny")), "float32",
            Path(tmp) / "serve.log") as started:
        client = HttpClient(started.base_url, 60.0)

        def remote():
            return sglang.decode(sglang.send(client, body), len(items), len(LABELS), True)

        for _ in range(5):
            local(), remote()
        t_in, t_http, cpu = [], [], []
        for _ in range(calls):
            t0 = time.perf_counter()
            ours = local()
            t_in.append(time.perf_counter() - t0)
            c0, t0 = time.process_time(), time.perf_counter()
            theirs = remote()
            t_http.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        client.close()
    ms = lambda xs: 1e3 * statistics.median(xs)  # noqa: E731
    return {"calls": calls, "in_process_ms": ms(t_in), "http_ms": ms(t_http),
            "added_ms": ms(t_http) - ms(t_in), "ratio": ms(t_http) / ms(t_in),
            "client_cpu_ms": ms(cpu),
            "max_abs_diff": float(np.max(np.abs(np.asarray(ours) - np.asarray(theirs))))}


def report(calls: int) -> None:
    print(json.dumps(main(calls), indent=1))
