"""`mibench serve` under a crowd of silent sockets that reconnect as fast as it closes them
(issue 45: about 300 of them locked every well-formed client out, 0 of 15 requests
answered): `mibench serve` launched by mibench (`embedded:tiny`, mode single, its default
limits unless `--server-arg` says otherwise), then for each crowd size N, N sockets that
open, send nothing, and reconnect as soon as the server closes them (in a process of their
own), while a well-formed client sends one small request every `interval` seconds on a
fresh connection and reads its answer (at most `timeout` seconds).

    mibench job serve-flood [--sockets 300 --sockets 1000] [--requests 30] [--interval 1]

Reported (JSON, and a line per crowd on stderr): per N, the requests sent and answered
200, those answered within BOUND_S, the other statuses, latency p50 and p99 (nearest rank)
and max of the answered ones, and the crowd's connections opened and refused; the CPU.
"""

from __future__ import annotations

import asyncio
import collections
import json
import multiprocessing
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

from ...config.server import Launch, ServerLaunch
from ...stats import describe

BOUND_S = 5.0  # the stated bound on a well-formed request's answer under a crowd
SERVE = Launch(command=["{python}", "-m", "mibench.harness.cli", "serve", "--model", "{model}",
                        "--host", "{host}", "--port", "{port}", "--dtype", "{dtype}"])
BODY = json.dumps({"query": [1, 2, 3, 4], "items": [[5, 6], [7]],
                   "label_token_ids": [198]}).encode()


def more_files(want: int) -> int:
    """This process's soft limit on open files raised toward `want` (at most the hard
    limit); the limit it has now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(hard, want)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def _silent(host: str, port: int, until: list[float],
                  counts: collections.Counter) -> None:
    """One silent socket: open, send nothing, wait for the server to close it, again, until
    the time in `until` (which the crowd may move to now)."""
    while (left := until[0] - time.monotonic()) > 0:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), left)
        except (OSError, TimeoutError):
            counts["refused"] += 1
            await asyncio.sleep(0.01)  # a refused connect: not a busy loop
            continue
        counts["opened"] += 1
        try:
            while await asyncio.wait_for(reader.read(65536), max(until[0] - time.monotonic(),
                                                                 0.001)):
                pass
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()


def crowd(host: str, port: int, n: int, seconds: float, out, stop=None) -> None:
    """`n` silent sockets for `seconds`, or until the event `stop` is set (a process's
    target); their counts put on `out`."""
    more_files(n + 64)
    counts: collections.Counter = collections.Counter()

    async def run():
        until = [time.monotonic() + seconds]
        sockets = asyncio.gather(*(_silent(host, port, until, counts) for _ in range(n)))
        while stop is not None and not sockets.done():
            if stop.is_set():  # a socket's wait_for may swallow the cancel: `until` ends it
                until[0] = 0.0
                sockets.cancel()
                break
            await asyncio.wait([sockets], timeout=0.1)
        try:
            await sockets
        except asyncio.CancelledError:
            pass

    asyncio.run(run())
    out.put(dict(counts))


def request(host: str, port: int, timeout: float) -> tuple[int | str, float]:
    """(status, seconds) of one small well-formed request on a fresh connection; a
    connection error or a timeout is its name instead of a status."""
    t0 = time.monotonic()
    head = (f"POST /v1/score HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n").encode()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(max(timeout - (time.monotonic() - t0), 0.001))
            s.sendall(head + BODY)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    except TimeoutError:
        return "timeout", time.monotonic() - t0
    except OSError as e:
        return type(e).__name__, time.monotonic() - t0
    status = int(data.split()[1]) if data.startswith(b"HTTP/") else "no answer"
    return status, time.monotonic() - t0


def nearest_rank(xs: list[float], p: float) -> float | None:
    """stats/describe.py's nearest-rank percentile; None for no values."""
    return describe.nearest_rank(xs, p) if xs else None


def _result(out, proc, seconds: float) -> dict:
    """What the crowd's process put on `out` ({} when it died without a word)."""
    import queue

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            return out.get(timeout=1.0)
        except queue.Empty:
            if not proc.is_alive():
                return {}
    return {}


def one_crowd(host: str, port: int, n: int, requests: int, interval: float,
              timeout: float, settle: float = 3.0) -> dict:
    """A crowd of `n` (ramped up for `settle` s) and `requests` well-formed requests."""
    spawn = multiprocessing.get_context("spawn")
    out, stop = spawn.Queue(), spawn.Event()
    seconds = settle + requests * interval + timeout + 2  # at most: it stops after the last
    proc = spawn.Process(target=crowd, args=(host, port, n, seconds, out, stop), daemon=True)
    proc.start()
    try:
        time.sleep(settle)
        results = []
        for _ in range(requests):
            t0 = time.monotonic()
            results.append(request(host, port, timeout))
            time.sleep(max(0.0, interval - (time.monotonic() - t0)))
        stop.set()
        counts = _result(out, proc, seconds + 60)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()
    ok = [s for status, s in results if status == 200]
    ms = lambda x: None if x is None else round(1e3 * x, 1)  # noqa: E731
    return {"sockets": n, "sent": requests, "answered": len(ok),
            "within_bound": sum(s <= BOUND_S for s in ok),
            "statuses": dict(collections.Counter(str(st) for st, _ in results)),
            "p50_ms": ms(nearest_rank(ok, 50)), "p99_ms": ms(nearest_rank(ok, 99)),
            "max_ms": ms(max(ok, default=None)), "crowd": counts}


def main(sockets: list[int], requests: int = 30, interval: float = 1.0,
         timeout: float = 30.0, server_args: dict | None = None) -> dict:
    from mibench.engines import model_folder

    from ...host.peak import cpu_model
    from ..launch import Server

    more_files(max(sockets) + 64)
    launch = ServerLaunch(SERVE, args=tuple(sorted((server_args or {}).items())))
    runs = []
    with tempfile.TemporaryDirectory() as tmp, Server(
            launch, str(model_folder("embedded:tiny")), "float32",
            Path(tmp) / "serve.log") as started:
        host, port = started.base_url.removeprefix("http://").rsplit(":", 1)
        alone = [request(host, int(port), timeout) for _ in range(5)]
        for n in sockets:
            runs.append(one_crowd(host, int(port), n, requests, interval, timeout))
            r = runs[-1]
            print(f"serve-flood: {n} silent sockets: {r['answered']} of {r['sent']} answered "
                  f"({r['within_bound']} within {BOUND_S:g} s), p50 {r['p50_ms']} ms, p99 "
                  f"{r['p99_ms']} ms; statuses {r['statuses']}", file=sys.stderr, flush=True)
    return {"cpu": cpu_model(), "bound_s": BOUND_S, "interval_s": interval,
            "server_args": server_args or {},
            "alone_ms": sorted(round(1e3 * s, 1) for st, s in alone if st == 200),
            "runs": runs}
