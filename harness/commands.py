"""Plain functions behind the CLI commands: they return values and raise MibenchError."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from mibench.errors import MibenchError


def run_config(config_path: Path, out: Path, sets: list[str], resume: Path | None,
               engine_repo: Path | None, argv: list[str],
               distributed: tuple = (None, None, None)) -> int:
    """Load, run, print a summary; returns the exit code (0 ok, 3 failures).
    `distributed` is (coordinator, num_processes, process_id) of a multi-process run."""
    from mibench.engines import init_distributed, is_writer
    from mibench.harness.config import load_config
    from mibench.harness.report.console import render_summary
    from mibench.harness.run.runner import artifact_path, exit_code, run

    config = load_config(config_path, sets)
    init_distributed(*distributed)
    writer = is_writer()
    try:
        record = run(config, out, resume=resume, engine_repo=engine_repo, argv=argv,
                     writer=writer)
    except KeyboardInterrupt:
        print("interrupted: the finished cases are in the artifact under "
              f"{resume or out}; continue with --resume ARTIFACT", file=sys.stderr)
        raise
    path = Path(resume) if resume else artifact_path(record, out)
    if writer:
        print(render_summary(record, path))
    return exit_code(record)


def validate_config(config_path: Path, sets: list[str]) -> str:
    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand
    from mibench.harness.report.console import render_cases

    config = load_config(config_path, sets)
    return render_cases(config, expand(config))


def _tokens(text: str | list) -> str | list[int]:
    """`1,2,3` or `[1, 2, 3]` are token ids; anything else is text."""
    if isinstance(text, list):
        return text
    stripped = text.strip().strip("[]")
    parts = [p.strip() for p in stripped.split(",")]
    if stripped and all(p.lstrip("-").isdigit() for p in parts):
        return [int(p) for p in parts]
    return text


def _options(options: list[str]) -> dict:
    out = {}
    for opt in options:
        key, eq, value = opt.partition("=")
        if not eq or not key:
            raise MibenchError(f"expected key=value, got {opt!r}", field="--option")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _request(query, items, request: Path | None) -> tuple:
    if request is not None:
        try:
            data = json.loads(Path(request).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise MibenchError(f"cannot read JSON request: {e}", field="--request") from None
        if not isinstance(data, dict) or "query" not in data or "items" not in data:
            raise MibenchError('expected {"query": ..., "items": [...]}', field="--request")
        query, items = data["query"], data["items"]
    if query is None or not items:
        raise MibenchError("give --query and at least one --item, or --request FILE",
                           field="request")
    return _tokens(query), [_tokens(i) for i in items]


def score_request(*, query, items, request, labels: str, model: str, engine: str, mode: str,
                  dtype: str, tp: int, delimiter, softmax: bool, options: list[str]) -> dict:
    from mibench.engines import load_engine

    q, its = _request(query, items, request)
    label_ids = _tokens(labels)
    if isinstance(label_ids, str):
        raise MibenchError("must be token ids, e.g. 198,9834", field="--labels")
    eng = load_engine(engine, model=model, dtype=dtype, tp=tp)
    result = eng.score(q, its, label_ids, mode=mode, apply_softmax=softmax,
                       delimiter=delimiter, **_options(options))
    return {"engine": engine, "model": model, "mode": mode, "dtype": dtype,
            "num_tokens": result.num_tokens, "scores": result.scores}


def environment(with_peak: bool) -> dict:
    from mibench.engines import env_info
    from mibench.harness.run.peak import PeakTable
    from mibench.harness.run.provenance import host_info, package_versions

    info = env_info()
    info["packages"] = package_versions()
    info["host"] = host_info()
    if with_peak:
        d = info.get("devices", {})
        table = PeakTable(d.get("platform"), d.get("kind"))
        info["peak_flops"] = {dt: table(dt) for dt in ("float32", "bfloat16")}
        info["peak_source"] = table.source
    return info
