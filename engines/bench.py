"""Benchmark of the JAX engine's modes on the seeds' workload shape, in one process.

    HF_HUB_OFFLINE=1 python -m mibench.engines.bench [--model embedded:tiny] [--runs 3]

For each mode: the first call (compile + run) is reported apart, then the median of
`--runs` timed calls; items/s, latency per item, and peak memory: the peak resident set
during a timed call above the resident set just before it (`peak_rss_rise`), and the
compilations during the timed calls (0 expected). `single` is timed on a subset of items
and extrapolated. Ends with the ratios the issue asks for.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import time

import numpy as np

CASES = [("single", {}), ("packed", {"mask": "dense"}), ("packed", {"mask": "segment"}),
         ("chunked", {"chunk_size": 32}), ("chunked", {"chunk_size": 64}),
         ("chunked", {"chunk_size": 128}), ("prefill_extend", {"extend_batch_size": 12}),
         ("prefill_extend", {"extend_batch_size": 64}),
         ("prefill_extend", {"extend_batch_size": 500})]


def _high_water_bytes() -> int:
    """The resident set's high-water mark (VmHWM of /proc/self/status)."""
    with open("/proc/self/status") as f:
        kib = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    return int(kib) * 1024


def _lifetime_peak_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


@contextlib.contextmanager
def peak_rss_rise():
    """`with peak_rss_rise() as rise: ...`; `rise()` is how far the resident set peaked above
    its level at entry. Linux: the kernel's high-water mark, reset to the current resident
    set at entry (5 to /proc/self/clear_refs, Linux >= 4.0): exact, and no sampling thread
    shares the cores with the timed call. Elsewhere: the rise of the lifetime peak
    (getrusage), 0 while the block stays under an earlier peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        read = _high_water_bytes
    except OSError:
        read = _lifetime_peak_bytes
    base, end = read(), []
    yield lambda: (end[0] if end else read()) - base
    end.append(read())


def measure(engine, query, items, mode, opts, runs, delimiter, labels):
    """(first-call seconds, median seconds, peak extra bytes, compilations in timed runs)."""
    from mibench.engines.modes.compiles import count_compiles

    def call():
        return engine.score(query, items, labels, mode=mode, delimiter=delimiter, **opts)

    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    times, peaks = [], []
    with count_compiles() as compiles:
        for _ in range(runs):
            with peak_rss_rise() as rise:
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
            peaks.append(rise())
    return first, statistics.median(times), max(peaks), compiles()


def workload(query_len, num_items, item_len, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.integers(0, 151000, query_len).tolist()
    return query, [rng.integers(0, 151000, item_len).tolist() for _ in range(num_items)]


def _label(mode, opts):
    return mode + "".join(f" {k}={v}" for k, v in opts.items())


def run(args) -> dict:
    from mibench.engines import load_engine

    engine = load_engine("jax", model=args.model, dtype=args.dtype)
    query, items = workload(args.query, args.items, args.item_len)
    common = dict(delimiter=args.delimiter, labels=args.labels)
    print(f"model {args.model} {args.dtype}; query {args.query}, {args.items} items x "
          f"{args.item_len}; median of {args.runs} runs; single timed on "
          f"{args.single_items} items and extrapolated")
    print(f"host load average at start: {os.getloadavg()[0]:.2f} (2 cores; other processes "
          "share them)")
    print(f"{'mode':34s} {'first_s':>8s} {'total_s':>8s} {'items/s':>8s} {'ms/item':>8s} "
          f"{'peak_MiB':>9s} {'compiles':>8s}")
    res = {}
    for mode, opts in CASES:
        sub = items[: args.single_items] if mode == "single" else items
        first, med, peak, compiles = measure(engine, query, sub, mode, opts,
                                             1 if mode == "single" else args.runs, **common)
        total = med * len(items) / len(sub)
        res[_label(mode, opts)] = (total, peak)
        print(f"{_label(mode, opts):34s} {first:8.2f} {total:8.3f} {len(items) / total:8.1f} "
              f"{1000 * total / len(items):8.2f} {peak / 2**20:9.1f} {compiles:8d}", flush=True)
    half = len(items) // 2
    _, t_half, _, _ = measure(engine, query, items[:half], "packed", {"mask": "segment"},
                           args.runs, **common)
    res["segment_half"] = (t_half, 0)
    print(f"{'packed mask=segment N=' + str(half):34s} {'':8s} {t_half:8.3f} "
          f"{half / t_half:8.1f}")
    report_ratios(res, len(items))
    print(f"host load average at end: {os.getloadavg()[0]:.2f}")
    return res


def report_ratios(res: dict, n: int) -> None:
    dense, seg = res["packed mask=dense"], res["packed mask=segment"]
    pe = min(v[0] for k, v in res.items() if k.startswith("prefill_extend"))
    pe12 = res["prefill_extend extend_batch_size=12"][0]
    print("\nratios (targets in brackets)")
    print(f"  best prefill_extend items/s       {n / pe:8.1f}   [>= 150]")
    print(f"  prefill_extend B=12 items/s       {n / pe12:8.1f}")
    print(f"  segment speedup over dense        {dense[0] / seg[0]:8.2f}x  [>= 2]")
    print(f"  dense / segment peak memory       {dense[1] / max(seg[1], 1):8.2f}x  [>= 3]")
    print(f"  segment time / prefill_extend     {seg[0] / pe:8.2f}x  [<= 1.5]")
    print(f"  {f'segment time N={n} / N={n // 2}':32s} {seg[0] / res['segment_half'][0]:8.2f}x  "
          "[<= 2.3]")
    print(f"  prefill_extend B=12 over single   {res['single'][0] / pe12:8.1f}x")


def main(argv=None):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    p = argparse.ArgumentParser(prog="python -m mibench.engines.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="embedded:tiny")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--query", type=int, default=2000)
    p.add_argument("--items", type=int, default=500)
    p.add_argument("--item-len", type=int, default=20)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--single-items", type=int, default=16)
    p.add_argument("--delimiter", type=int, default=151643)
    p.add_argument("--labels", type=int, nargs="+", default=[198])
    args = p.parse_args(argv)
    run(args)


if __name__ == "__main__":
    main()
