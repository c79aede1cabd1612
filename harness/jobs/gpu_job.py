"""The prepared GPU job: check the machine, run `configs/gpu.yaml`, profile the fastest
mode's stages, write the artifact, the report and a summary, all inside a time budget.

    mibench job gpu --out DIR [--budget-s 420]       # on a GPU machine
    mibench job gpu --out DIR --dry-run              # anywhere: tiny preset

Steps: (1) what the machine has (devices, versions, missing packages); (2) a kernel check
of the cuDNN attention path against XLA at a small shape (GPU only); (3) `mibench run` of
the config in a child process, killed at the budget (the artifact is written after every
case, so what finished is kept); (4) per-stage times of `prefill_extend` at the config's
shape, and the top kernels of one call from a JAX profiler trace; (5) `mibench report`.
Exit code: the run's (0 ok, 3 a case or parity failed).

On a bare GPU machine with JAX, PyTorch and transformers but no package index: install the
missing wheels (pydantic and its dependencies), then `pip install --no-deps
--no-build-isolation -e .` in the repository, then run the job through the CLI module
(no console script needed): `python3 -m mibench.harness.cli job gpu --out DIR`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mibench.engines import ENGINE_PACKAGES, ENGINES
from mibench.errors import MibenchError

from ..records.io import write_output

# this process only checks and profiles: it must not hold the GPU memory the run needs
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "gpu.yaml"
# the modules the job imports: every engine's packages, then the harness's
NEEDED = (*(p for names in ENGINE_PACKAGES.values() for p in names), "pydantic", "typer",
          "rich", "jinja2", "matplotlib", "scipy", "safetensors", "yaml")
# the dry run: the same config on the tiny preset, small enough for a CPU test
DRY_SETS = ("model.path=embedded:tiny", "model.dtype=float32", "workload.query_tokens=64",
            "workload.num_items=12", "runs.warmup=0", "runs.timed=1")


def machine() -> dict:
    """Devices, versions and missing packages, printed and returned."""
    info = {"missing": [m for m in NEEDED if importlib.util.find_spec(m) is None]}
    for name in ENGINES:  # each engine's backend: its version and devices
        try:
            info.update(getattr(ENGINES[name], "backend_info", dict)())
        except ImportError:  # its packages are in `missing`
            pass
    print("machine:", json.dumps(info), flush=True)
    return info


def run_config(out: Path, sets: tuple[str, ...], budget_s: float) -> int:
    """`mibench run` in a child process; killed (the artifact kept) past the budget."""
    cmd = [sys.executable, "-m", "mibench.harness.cli", "run", str(CONFIG), "--out", str(out),
           ]
    for s in sets:
        cmd += ["--set", s]
    print("+", " ".join(cmd), flush=True)
    # JAX takes 60% of the GPU up front, leaving the torch reference in the same process room
    env = {k: v for k, v in os.environ.items() if k != "XLA_PYTHON_CLIENT_PREALLOCATE"}
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.6")
    try:
        return subprocess.run(cmd, timeout=budget_s, env=env).returncode
    except subprocess.TimeoutExpired:
        print(f"run stopped at the budget ({budget_s:.0f} s); finished cases are kept",
              flush=True)
        return 124


def profiled(dry: bool) -> tuple:
    """(engine, request, case): the config's largest-batch prefill_extend case, its JAX
    engine loaded once for the profiles of both attention paths."""
    from mibench.engines import load_engine
    from mibench.workloads import materialize

    from ..config import load_config
    from ..config.matrix import expand

    config = load_config(CONFIG, DRY_SETS if dry else ())
    extends = [c for c in expand(config) if c.mode == "prefill_extend"]
    case = max(extends, key=lambda c: c.params.get("extend_batch_size", 0))
    engine = load_engine("jax", model=case.model, dtype=case.dtype)
    return engine, materialize(case.workload, engine.model_config.vocab_size)[0], case


def profile(loaded: tuple, attention: str = "auto", kernels: bool = False) -> dict:
    """Stage times of the `profiled` case on one attention path; with `kernels`, the top
    kernels of one whole call from a JAX profiler trace too."""
    from mibench.engines import stage_profile, top_kernels

    from ..run.pool import make_call, semantics_kw

    engine, req, case = loaded
    w = case.workload
    case = dataclasses.replace(case, params={**case.params, "attention": attention})
    stages = stage_profile(
        engine, list(req.query), [list(i) for i in req.items], list(w.label_token_ids),
        delimiter=w.delimiter, apply_softmax=w.apply_softmax, **semantics_kw(w),
        **case.params)
    stages["case_id"] = case.case_id
    if kernels:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:  # the very call the case times
            stages["top_kernels"] = top_kernels(make_call(engine, [req], case), folder)
    print("profile:", json.dumps(stages), flush=True)
    return stages


def main(out: Path, budget_s: float = 420.0, dry_run: bool = False) -> int:
    """The whole job (`mibench job gpu`); returns the run's exit code. No GPU without
    `dry_run`, or a budget that is not positive, is a MibenchError."""
    if not budget_s > 0:
        raise MibenchError(f"must be a positive number of seconds, got {budget_s:g}",
                           field="--budget-s")
    t0 = time.perf_counter()
    summary = {"machine": machine()}
    if not dry_run:
        if not any(d.startswith("gpu") for d in summary["machine"]["devices"]):
            raise MibenchError("no GPU visible to JAX (use --dry-run on a CPU)")
        from mibench.engines import cudnn_check

        summary["kernel_check"] = cudnn_check()
        print("kernel check:", json.dumps(summary["kernel_check"]), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    rc = run_config(out, DRY_SETS if dry_run else (), budget_s)
    summary["run_exit"] = rc
    artifacts = sorted(out.glob("*.json"), key=lambda p: p.stat().st_mtime)
    artifacts = [p for p in artifacts if p.name != "summary.json"]
    if artifacts:
        subprocess.run([sys.executable, "-m", "mibench.harness.cli", "report", str(artifacts[-1]),
                        "--out", str(out / "report" / "report.md")], check=False)
    # the same stages on today's path and on the tiled CPU kernels: the before/after ratio
    loaded = None
    for attention in ("auto", "xla"):
        try:
            loaded = loaded or profiled(dry_run)
            summary[f"profile_{attention}"] = profile(loaded, attention,
                                                      kernels=attention == "auto")
        except Exception as e:  # the artifact matters more than the profile
            summary[f"profile_{attention}"] = {"error": f"{type(e).__name__}: {e}"}
        write_output(out / "summary.json", json.dumps(summary, indent=1), "the summary")
    summary["wall_s"] = time.perf_counter() - t0
    write_output(out / "summary.json", json.dumps(summary, indent=1), "the summary")
    print(f"gpu job done in {summary['wall_s']:.0f} s, run exit {rc}", flush=True)
    return rc
