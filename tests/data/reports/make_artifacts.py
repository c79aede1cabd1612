"""Regenerate the fixed artifacts of the reporting tests (deterministic, seeded):

    python tests/data/reports/make_artifacts.py   # from the repository root

The cases come from the real configs beside this file (expanded by harness/config/matrix.py), the
times from the tables below, shaped like the seeds' TPU v6e reports: FAILED and OOM rows, a
tail pause at extend batch 16, a 2x segment-over-dense A/B, TP=4 chunked at 141 items/s.
- `base.json`: commit 1111111, demo.yaml.
- `new.json`: commit 2222222, same config; packed segment 10% faster, the rest noise.
- `models.json`: models.yaml (three model shapes x three item counts; Qwen2.5 fails).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from mibench.harness.config import load_config
from mibench.harness.config.matrix import CaseSpec, expand
from mibench.harness.records import (
    CaseRecord,
    Devices,
    ErrorInfo,
    GitInfo,
    Invocation,
    ParityCheck,
    ParityRecord,
    Provenance,
    RunRecord,
    RunsRecord,
    write_artifact,
)
from mibench.harness.records.summaries import summarize
from mibench.harness.stats.describe import per_unit_ms, rates

HERE = Path(__file__).parent
REL = "tests/data/reports"
PEAK = 918e12  # TPU v6e bf16 per chip
PACKAGES = {"mibench": "0.1.0", "jax": "0.8.1", "jaxlib": "0.8.1", "flax": "0.12.0",
            "torch": "2.13.0", "transformers": "4.57.1", "numpy": "2.3.4", "pydantic": "2.12.3"}
GQA_ERROR = ("ValueError", "Specified dims (1, 8, 2) do not evenly divide the mesh axes\n"
                           "while lowering ragged_paged_attention with custom_mask")
OOM_ERROR = ("XlaRuntimeError", "RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                                "4.00GiB\nBuffer assignment failed")
FUSED_KV = ("ValueError", "cannot reshape array of size 1024 into shape (2, -1, 8, 128)")

# seconds for 500 items (noise is added), or an (error type, message), or None: skipped
DEMO_TIMES: dict[str, float | tuple | None] = {
    "jax/single/tp=1": 48.37, "jax/packed/mask=dense/tp=1": 9.58,
    "jax/packed/mask=segment/tp=1": 4.76, "jax/chunked/chunk_size=32/tp=1": 7.10,
    "jax/chunked/chunk_size=64/tp=1": 7.45, "jax/prefill_extend/extend_batch_size=12": 0.95,
    "jax/prefill_extend/extend_batch_size=16": 0.90, "torch/single/tp=1": 1.25,
    "jax/single/tp=4": 40.0, "jax/packed/mask=dense/tp=4": 7.13,
    "jax/packed/mask=segment/tp=4": GQA_ERROR, "jax/chunked/chunk_size=32/tp=4": 3.54,
    "jax/chunked/chunk_size=64/tp=4": OOM_ERROR, "torch/single/tp=4": None,
}
TP4_FACTOR = 0.55  # prefill_extend at tp=4 takes 55% of the tp=1 time


def demo_time(case: CaseSpec) -> float | tuple | None:
    for prefix, value in DEMO_TIMES.items():
        if case.case_id.startswith(prefix):
            if not isinstance(value, float):
                return value
            return value * (TP4_FACTOR if "prefill" in prefix and case.tp == 4 else 1.0)
    raise KeyError(case.case_id)


def model_time(case: CaseSpec) -> float | tuple:
    size = {"qwen3-0.6b": 1.0, "qwen3-1.7b": 2.4, "qwen2.5-1.5b": 2.0}[case.model.split(":")[1]]
    if "qwen2.5" in case.model:
        return FUSED_KV
    n = case.workload.num_items
    return size * (0.09675 * n if case.mode == "single" else 0.05 + 0.0175 * n)


def timings(rng, seconds: float, n: int, pause_at: int | None) -> list[float]:
    times = [round(seconds * (1 + 0.01 * rng.standard_normal()), 4) for _ in range(n)]
    if pause_at is not None and pause_at < n:
        times[pause_at] = round(times[pause_at] * 2.3, 4)  # a long-tail pause
    return times


def case_record(case: CaseSpec, value, rng, start: str) -> CaseRecord:
    # runs as artifacts before `max_rss` and `processes` wrote them
    rec = CaseRecord(**CaseRecord.head_of(case),
                     runs=RunsRecord(warmup=case.runs.warmup, timed=case.runs.timed,
                                     timeout_s=case.runs.timeout_s), status="ok", started_at=start)
    if value is None:
        rec.status = "skipped"
        rec.error = ErrorInfo(type="Skipped", message="the torch reference runs at tp=1 only",
                              traceback="")
        return rec
    if isinstance(value, tuple):
        rec.status = "failed"
        rec.error = ErrorInfo(type=value[0], message=value[1],
                              traceback=f"Traceback (most recent call last):\n  ...\n"
                                        f"{value[0]}: {value[1]}")
        return rec
    pause = 3 if "extend_batch_size=16" in case.case_id else None
    rec.compile_s = round(value * 1.1 + 20 * (case.engine == "jax"), 3)
    rec.warmup_s = timings(rng, value, case.runs.warmup, None)
    rec.timed_s = timings(rng, value, case.runs.timed, pause)
    n = case.workload.num_items
    m = rec.metrics
    m.throughput_items_per_s = summarize(rates(rec.timed_s, n))
    m.latency_per_item_ms = summarize(per_unit_ms(rec.timed_s, n))
    m.total_s = summarize(rec.timed_s)
    m.tokens_per_s = round((case.workload.query_tokens + 21 * n) / m.total_s.median, 3)
    m.useful_flops = 1.2e9 * (case.workload.query_tokens + 21 * n)
    m.peak_flops = PEAK * case.tp
    m.mfu = m.useful_flops / (m.total_s.median * m.peak_flops)
    m.peak_memory_bytes = int(2e9 + 1e6 * n * case.tp)
    m.peak_memory_source = "device"
    m.score_digest = hashlib.sha256(case.model.encode() + str(n).encode()).hexdigest()
    return rec


def set_times(case: CaseRecord, timed_s: list[float]) -> CaseRecord:
    """Replace a case's timed runs and recompute its summaries (for edited artifacts)."""
    n = case.workload.num_items
    case.timed_s = [round(t, 6) for t in timed_s]
    m = case.metrics
    m.throughput_items_per_s = summarize(rates(case.timed_s, n))
    m.latency_per_item_ms = summarize(per_unit_ms(case.timed_s, n))
    m.total_s = summarize(case.timed_s)
    return case


def scaled(record: RunRecord, case_id: str, factor: float) -> RunRecord:
    """A copy of `record` whose case `case_id` takes `factor` times as long."""
    out = record.model_copy(deep=True)
    case = next(c for c in out.cases if c.case_id == case_id)
    set_times(case, [t * factor for t in case.timed_s])
    return out


def provenance(config_file: str, commit: str) -> Provenance:
    return Provenance(
        git=GitInfo(path="/home/ci/mibench", commit=commit * 5, branch="main", dirty=False),
        packages=PACKAGES,
        devices=Devices(platform="tpu", kind="TPU v6 lite", count=4,
                        peak_flops={"bfloat16": PEAK}, peak_source="vendor"),
        host={"hostname": "mi-tpu-v6e4", "system": "Linux", "machine": "x86_64", "cpus": 180},
        python="3.11.9 (/home/ci/.venv/bin/python)",
        argv=["/home/ci/.venv/bin/mibench", "run", f"{REL}/{config_file}", "--out", "artifacts"],
        invocation=Invocation(config=f"{REL}/{config_file}"),
        env={"XLA_FLAGS": "--xla_tpu_enable_latency_hiding_scheduler=true"})


def first_per_model(cases: list[CaseRecord]) -> list[CaseRecord]:
    firsts: dict[tuple, CaseRecord] = {}
    for c in cases:
        firsts.setdefault((c.model.path, str(c.params)), c)
    return list(firsts.values())


def parity_checks(cases: list[CaseRecord], reference: str | None) -> list[ParityCheck]:
    ok = [c for c in cases if c.status == "ok"]
    packed = [c for c in ok if c.mode == "packed"]
    singles = {(c.model.path, c.topology.tp, c.workload.num_items): c.case_id
               for c in ok if c.mode == "single" and c.engine == "jax"}
    out = [ParityCheck(check="isolation", variant=v, case_id=c.case_id, against=c.case_id,
                       max_abs_diff=d, mean_abs_diff=d / 4, tolerance=t, status="passed")
           for c in first_per_model(packed) for v, d, t in (("same_length", 0.0, 0.0),
                                                ("changed_length", 3e-7, 1e-6))]
    key = lambda c: (c.model.path, c.topology.tp, c.workload.num_items)  # noqa: E731
    out += [ParityCheck(check="modes", case_id=c.case_id, against=singles[key(c)],
                        max_abs_diff=4e-3, mean_abs_diff=1e-3, tolerance=2e-2, status="passed")
            for c in ok if c.engine == "jax" and c.mode != "single" and key(c) in singles]
    if reference:
        out.append(ParityCheck(check="engines", case_id=singles[next(iter(singles))],
                               against=reference, max_abs_diff=6e-3, mean_abs_diff=2e-3,
                               tolerance=2e-2, status="passed"))
    return out


def build(config_file: str, commit: str, seed: int, times, started: str,
          speed: dict[str, float] | None = None) -> RunRecord:
    config = load_config(HERE / config_file)
    rng = np.random.default_rng(seed)
    record = RunRecord(run_id=f"{config.name}-{started.replace(':', '')}", started_at=started,
                       finished_at=started.replace("T03", "T04"), config=config.resolved(),
                       config_sha256=config.sha256(), provenance=provenance(config_file, commit))
    for case in expand(config):
        value = times(case)
        for prefix, factor in (speed or {}).items():
            if case.case_id.startswith(prefix) and isinstance(value, float):
                value *= factor
        record.cases.append(case_record(case, value, rng, started))
    torch_ref = next((c.case_id for c in record.cases if c.engine == "torch"
                      and c.status == "ok"), None)
    checks = parity_checks(record.cases, torch_ref)
    record.parity = ParityRecord(reference={"engine": "torch", "mode": "single",
                                            "dtype": "float32"},
                                 workload={"query_tokens": 64, "num_items": 8, "item_tokens": 6},
                                 checks=checks, passed=all(c.status == "passed" for c in checks))
    return record


def main() -> None:
    write_artifact(build("demo.yaml", "1111111", 1, demo_time, "2026-02-12T03:00:00Z"),
                   HERE / "base.json")
    write_artifact(build("demo.yaml", "2222222", 2, demo_time, "2026-02-13T03:00:00Z",
                         speed={"jax/packed/mask=segment/tp=1": 1 / 1.1}), HERE / "new.json")
    write_artifact(build("models.yaml", "2222222", 3, model_time, "2026-02-13T03:30:00Z"),
                   HERE / "models.json")
    print(f"wrote base.json, new.json, models.json in {HERE}")


if __name__ == "__main__":
    main()
