"""Cold starts of a launched server (an http case with `cold_start:`): what every deploy
and autoscale costs before a server answers at its warm speed.

Each of `launches` fresh launches of the case's server (the same command, arguments and
environment; its own log, `NAME-coldN-K.log`) is timed from starting it to its ready
probe's first 200 (`ready_s`), then request 0 of the case's workload is sent (`first_ms`:
the first answer, often a compile), then `warm_requests` more (requests 1, 2, ...), one at
a time; their median is `warm_p50_ms` and `first_over_warm` the ratio. The launches run
after the case's own load, one after another, with the machine's load recorded over them.

compare and ab judge `ready_s` and `first_ms` like times (+ = slower), each launch one
sample: a verdict needs at least 3 launches a side (judge/server_compare.py).
"""

from __future__ import annotations

import statistics
import time

from ..config.cases import CaseSpec
from ..host.busy import Window
from ..records import ColdStartLaunch, ColdStartRecord
from .feed import Bodies


def measure(case: CaseSpec, servers, key) -> ColdStartRecord:
    """The case's cold starts (module docstring), on fresh launches from `servers` (the
    run's ServerPool) of the server `key` names."""
    plan = case.http
    window = Window()
    window.mark()
    launches = [one_launch(case, servers, key, j) for j in range(plan.cold_starts)]
    window.end()
    rec = ColdStartRecord(launches=launches, warm_requests=plan.warm_requests,
                          load=window.load())
    for name in ("ready_s", "first_ms", "warm_p50_ms"):
        values = [getattr(x, name) for x in launches if getattr(x, name) is not None]
        setattr(rec, name, statistics.median(values) if values else None)
    came_up = [x for x in launches if x.error is None]
    rec.note = (f"{len(came_up)} of {len(launches)} launches answered" if came_up
                else "no launch answered")
    if rec.first_ms and rec.warm_p50_ms:
        rec.note += (f"; median ready {rec.ready_s:.3g} s, first request "
                     f"{rec.first_ms:.0f} ms = {rec.first_ms / rec.warm_p50_ms:.1f}x the "
                     f"warm p50 {rec.warm_p50_ms:.0f} ms")
    return rec


def one_launch(case: CaseSpec, servers, key, j: int) -> ColdStartLaunch:
    """Launch `j`: ready, first request, warm requests (an error is the launch's)."""
    from mibench.engines import HttpClient, load_engine

    out = ColdStartLaunch(launch=j)
    try:
        with servers.fresh(key, f"-cold{j + 1}") as (url, ready_s):
            out.ready_s = ready_s
            engine = load_engine("http", **key.bound_to(url).load_kwargs())
            bodies = Bodies(case, engine)
            client = HttpClient(url, case.http.timeout_s)
            try:
                times = [_send(bodies, client, i) for i in range(1 + case.http.warm_requests)]
            finally:
                client.close()
    except Exception as e:  # a launch that does not come up or answer is recorded
        out.error = f"{type(e).__name__}: {e}"
        return out
    out.first_ms = times[0]
    out.warm_p50_ms = statistics.median(times[1:])
    out.first_over_warm = out.first_ms / out.warm_p50_ms if out.warm_p50_ms > 0 else None
    return out


def _send(bodies: Bodies, client, i: int) -> float:
    """Request i's latency in ms; a failed answer raises (the launch's error)."""
    built = bodies.at(i)
    t0 = time.perf_counter()
    reply = bodies.wire.send(client, built.body)
    ms = 1000 * (time.perf_counter() - t0)
    if not reply.ok:
        raise RuntimeError(f"request {i}: {reply.status}: {reply.text(300)}")
    bodies.wire.decode(reply, built.items, bodies.labels, bodies.softmax, bodies.dtype)
    return ms
