"""`mibench job site-scale --out DIR` (`nox -s site_scale`, not part of CI): how `mibench
site` scales. A synthetic nightly history per size (M measurements x N nights: five seed
runs, then one run a night, written directly as run artifacts and an index, no engine),
each built into a site; the build's wall time, the overview's size and its first render
in headless chromium (Playwright driving the system's chromium, when both are there).
The criteria of issue 42: M=200 builds in at most 10x the time of M=20 at the same N; the
overview under 5 MB; its first render under 1 s. OUT/scale.md and scale.json; exit 1 when
a criterion fails.

The synthetic series: each measurement's time per item is its own level with 3% noise a
run; one in ten steps to 1.3x slower at a random night (a regression confirmed there, then
known; one in three of them accepted, one in three fixed ten nights later), one in twenty
nights is busy (other load 60%, 1.4x slower), and the seeds are five runs of the first
commit (the noise floor's A/A runs).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import shutil
import time
from pathlib import Path

from ..records import CaseLoad, CaseRecord, RunRecord
from ..records.nightly import (
    Acceptance,
    Baseline,
    CulpritCommit,
    Event,
    Night,
    NightlyIndex,
    Regression,
    regression_id,
)
from ..records.run import RunsRecord
from ..records.summaries import summarize
from ..stats.describe import per_unit_ms, rates
from ..verdicts import CONFIRMED_REGRESSION, INCONCLUSIVE, KNOWN_REGRESSION, PASS

SEEDS, TIMED, ITEMS = 5, 5, 64
MAX_RATIO, MAX_BYTES, MAX_RENDER_S = 10.0, 5 * 1024 * 1024, 1.0
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@dataclasses.dataclass(frozen=True)
class Size:
    measurements: int
    nights: int
    runs: int
    history_s: float  # writing the synthetic history
    build_s: float  # `mibench site`
    overview_bytes: int
    site_bytes: int
    fcp_s: float | None  # first contentful paint of the overview (None: no browser)
    load_s: float | None  # its load event's end


def sha(i: int) -> str:
    return f"{i:08x}" + "5ca1e" * 6 + "00"


def synthetic_history(out: Path, measurements: int, nights: int, seed: int = 0) -> Path:
    """The history folder (the module docstring) at `out`."""
    import numpy as np

    from ..config import load_config
    from ..config.matrix import expand

    rng = np.random.default_rng(seed)
    shutil.rmtree(out, ignore_errors=True)
    (out / "runs").mkdir(parents=True)
    config_file = out / "site-scale.yaml"
    config_file.write_text(
        "name: site-scale\nmodel: {path: embedded:tiny, dtype: float32}\n"
        f"workload: {{query_tokens: 64, num_items: {ITEMS}, item_tokens: 8, "
        "label_token_ids: [198], delimiter: 151643}\n"
        f"runs: {{warmup: 1, timed: {TIMED}}}\ncases:\n  - {{engine: jax, mode: chunked, "
        f"chunk_size: {list(range(1, measurements + 1))}}}\n")
    config = load_config(config_file)
    heads = [CaseRecord.head_of(c) for c in expand(config)]
    level = rng.uniform(0.005, 0.05, measurements)  # seconds per item
    steps = {k: int(rng.integers(nights // 4, nights - 5)) for k in range(measurements)
             if rng.random() < 0.1}  # measurement -> the night it regressed
    fixes = {m: at + 10 for k, (m, at) in enumerate(sorted(steps.items()))
             if k % 3 == 2 and at + 10 < nights}  # -> the night it was fixed
    busy = rng.random(nights) < 0.05
    template = _template(config, out)
    index = NightlyIndex(config=config.name)
    for night in range(nights):
        commit, ids = sha(night), []
        slow = [steps.get(m, nights) <= night < fixes.get(m, nights) for m in range(measurements)]
        for r in range(SEEDS if night == 0 else 1):
            run_id = f"site-scale-{r + (0 if night == 0 else SEEDS - 1 + night):05d}"
            when = dt.datetime(2025, 1, 1, 3, tzinfo=dt.UTC) + dt.timedelta(days=night,
                                                                             minutes=10 * r)
            load = 0.6 if busy[night] and night else 0.02
            cases = [_case(h, level[m] * (1.3 if slow[m] else 1.0) * (1.4 if load > .5 else 1),
                           rng, when, load) for m, h in enumerate(heads)]
            _write_run(out / "runs" / f"{run_id}.json", template, run_id, commit, when, cases)
            ids.append(run_id)
        words = {h["case_id"]: _word(night, steps.get(m), fixes.get(m), busy[night])
                 for m, h in enumerate(heads)}
        index.nights.append(Night(
            at=(when + dt.timedelta(hours=1)).isoformat(), commit=commit,
            subject=f"commit {night}", runs=ids, cases=words,
            verdict=CONFIRMED_REGRESSION if CONFIRMED_REGRESSION in words.values() else PASS,
            exit_code=0))
    index.baseline = Baseline(commit=sha(0), subject="commit 0", run_id="site-scale-00000",
                              artifact="runs/site-scale-00000.json", since="", reason="seed")
    from ..judge.comparable import measurement_id
    from ..records import read_artifact

    first = read_artifact(out / "runs" / "site-scale-00000.json")
    mids = [measurement_id(first, c) for c in first.cases]
    index.regressions = [_regression(heads[m]["case_id"], mids[m], night, fixes.get(m), k)
                         for k, (m, night) in enumerate(sorted(steps.items()))]
    (out / "index.json").write_text(index.to_json())
    return out


def _word(night: int, step: int | None, fix: int | None, busy: bool) -> str:
    if step is not None and night == step:
        return CONFIRMED_REGRESSION
    if step is not None and night > step and (fix is None or night < fix):
        return KNOWN_REGRESSION
    return INCONCLUSIVE if busy and night else PASS


def _template(config, out: Path) -> dict:
    from ..host.provenance import collect
    from ..records import Devices

    record = RunRecord(run_id="x", started_at="", config=config.resolved(),
                       config_sha256=config.sha256(),
                       provenance=collect(["mibench", "job", "site-scale"], devices=Devices(
                           platform="cpu", kind="cpu", count=1)))
    data = json.loads(record.to_json())
    data["provenance"]["engine_repo"] = {"path": str(out), "commit": None, "dirty": False}
    return data


def _case(head: dict, seconds_per_item: float, rng, when: dt.datetime, load: float) -> dict:
    timed = [seconds_per_item * ITEMS * math.exp(0.03 * rng.standard_normal())
             for _ in range(TIMED)]
    rec = CaseRecord(**head, runs=RunsRecord(warmup=1, timed=TIMED), status="ok",
                     started_at=when.isoformat(), timed_s=timed, warmup_s=[timed[0]],
                     load=CaseLoad(window_s=1.0, cpus=2, other_share=load, other_cpu_s=load,
                                   source="fake: site-scale"))
    rec.metrics.throughput_items_per_s = summarize(rates(timed, ITEMS))
    rec.metrics.latency_per_item_ms = summarize(per_unit_ms(timed, ITEMS))
    rec.metrics.total_s = summarize(timed)
    return rec.model_dump(mode="json", by_alias=True)


def _write_run(path: Path, template: dict, run_id: str, commit: str, when: dt.datetime,
               cases: list[dict]) -> None:
    data = dict(template, run_id=run_id, started_at=when.isoformat(),
                finished_at=(when + dt.timedelta(minutes=5)).isoformat(), cases=cases)
    data["provenance"] = dict(template["provenance"])
    data["provenance"]["engine_repo"] = dict(template["provenance"]["engine_repo"],
                                             commit=commit)
    path.write_text(json.dumps(data))


def _regression(case_id: str, mid: str, night: int, fix: int | None, k: int) -> Regression:
    def at(n: int) -> str:
        return (dt.datetime(2025, 1, 1, 5, tzinfo=dt.UTC) + dt.timedelta(days=n)).isoformat()

    r = Regression(id=regression_id(case_id, mid, sha(night)), case_id=case_id,
                   measurement=mid, status="confirmed", good=sha(night - 1), bad=sha(night),
                   change=0.3, low=0.25, high=0.35, source="ab, 5 rounds", verdict="regression",
                   culprit=sha(night), subject=f"commit {night}",
                   culprits=[CulpritCommit(commit=sha(night), subject=f"commit {night}")],
                   confirmed_at=at(night), events=[Event(at=at(night), status="confirmed",
                                                          commit=sha(night))])
    if k % 3 == 1:
        r.accepted = Acceptance(by="scale", why="synthetic: slower on purpose", at=at(night))
        r.moved("accepted", at(night), sha(night), "by scale: synthetic")
    if fix is not None:
        r.fixed_at, r.fix = sha(fix), "ab: improvement (synthetic)"
        r.moved("fixed", at(fix), sha(fix), r.fix)
    return r


def render_times(page: Path, browser: str = CHROMIUM) -> tuple[float | None, float | None, str]:
    """(first contentful paint, load event end) of `page` from file:// in headless chromium,
    seconds, the median of three loads in fresh tabs after one that warms the browser; (None,
    None, why) without Playwright or the browser."""
    import os

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None, None, "not measured: Playwright is not installed"
    if not os.access(browser, os.X_OK):
        return None, None, f"not measured: no chromium at {browser}"
    got = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=browser, args=ARGS, headless=True)
        try:
            for k in range(4):  # the first warms the browser's own start; then the median
                pg = b.new_page()
                pg.goto(page.resolve().as_uri(), wait_until="load")
                pg.wait_for_function("performance.getEntriesByName('first-contentful-paint')"
                                     ".length > 0", timeout=30_000)
                got += [pg.evaluate(
                    "() => [performance.getEntriesByName('first-contentful-paint')[0].startTime,"
                    " performance.getEntriesByType('navigation')[0].loadEventEnd]")] if k else []
                pg.close()
        finally:
            b.close()
    fcp, load = sorted(got)[len(got) // 2]
    return fcp / 1000, load / 1000, "headless chromium"


def measure(out: Path, measurements: int, nights: int, browser: str = CHROMIUM
            ) -> tuple[Size, str]:
    from ..report.renderers import RENDERERS

    t0 = time.perf_counter()
    history = synthetic_history(out / f"history-{measurements}", measurements, nights)
    t1 = time.perf_counter()
    site = out / f"site-{measurements}"
    built = RENDERERS.lookup("site")([history], site)
    t2 = time.perf_counter()
    fcp, load, how = render_times(site / "index.html", browser)
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    return Size(measurements=measurements, nights=nights, runs=built.runs,
                history_s=t1 - t0, build_s=t2 - t1,
        overview_bytes=(site / "index.html").stat().st_size, site_bytes=size,
        fcp_s=fcp, load_s=load), how


def main(out: Path, sizes: list[int], nights: int, browser: str = CHROMIUM) -> int:
    """Every size, then the criteria; OUT/scale.md and scale.json; 0 when they hold."""
    from ..host.peak import cpu_model, usable_cpus

    out.mkdir(parents=True, exist_ok=True)
    rows, how = [], ""
    for m in sizes:
        size, how = measure(out, m, nights, browser)
        rows.append(size)
        print(f"site-scale: {m} x {nights}: built in {size.build_s:.1f} s, overview "
              f"{size.overview_bytes / 1e6:.2f} MB, first render "
              f"{'-' if size.fcp_s is None else f'{size.fcp_s:.3f} s'}", flush=True)
    checks = criteria(rows)
    cpu = f"{cpu_model()} ({usable_cpus()} CPUs)"
    text = markdown(rows, checks, cpu, how)
    (out / "scale.md").write_text(text)
    (out / "scale.json").write_text(json.dumps({
        "cpu": cpu, "render": how, "sizes": [dataclasses.asdict(r) for r in rows],
        "checks": [{"check": c, "ok": ok} for c, ok in checks]}, indent=1) + "\n")
    print(text, end="")
    return 0 if all(ok is not False for _, ok in checks) else 1


def criteria(rows: list[Size]) -> list[tuple[str, bool | None]]:
    """Issue 42's criteria on the sizes measured (None: not measured)."""
    by = {r.measurements: r for r in rows}
    out = []
    if 20 in by and 200 in by:
        ratio = by[200].build_s / by[20].build_s
        out.append((f"200 x {by[200].nights} builds in at most {MAX_RATIO:g}x the time of "
                    f"20 x {by[20].nights}: {ratio:.1f}x", ratio <= MAX_RATIO))
    for r in rows:
        out.append((f"{r.measurements} x {r.nights}: overview {r.overview_bytes / 1e6:.2f} MB "
                    f"< {MAX_BYTES / 1024 / 1024:g} MB", r.overview_bytes < MAX_BYTES))
        out.append((f"{r.measurements} x {r.nights}: first render (first contentful paint) "
                    f"{'not measured' if r.fcp_s is None else f'{r.fcp_s:.3f} s'} < "
                    f"{MAX_RENDER_S:g} s", None if r.fcp_s is None else r.fcp_s < MAX_RENDER_S))
    return out


def markdown(rows: list[Size], checks, cpu: str, how: str) -> str:
    lines = ["# mibench site at scale", "", f"CPU: {cpu}. Render: {how} (the overview from "
             "file://, the median of 3 loads after one that warms the browser).", "",
             "| measurements x nights | runs | history written | site built | overview | "
             "whole site | first contentful paint | load event |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.measurements} x {r.nights} | {r.runs} | {r.history_s:.1f} s | "
                     f"{r.build_s:.1f} s | {r.overview_bytes / 1e6:.2f} MB | "
                     f"{r.site_bytes / 1e6:.1f} MB | "
                     f"{'-' if r.fcp_s is None else f'{r.fcp_s:.3f} s'} | "
                     f"{'-' if r.load_s is None else f'{r.load_s:.3f} s'} |")
    lines += ["", *[f"- {'ok' if ok else 'not measured' if ok is None else '**FAILED**'}: {c}"
                    for c, ok in checks]]
    return "\n".join(lines) + "\n"
