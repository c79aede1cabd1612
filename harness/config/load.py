"""Loading a config: read the YAML (includes, `--set` overrides), validate it into a typed
`Config` (errors name the key, file and line), then expand it once, so every semantic
error (unknown engine, mode or option, duplicate case ids) is found before anything runs,
and check it against its models and this machine (`problems`: presets and folders,
vocabularies, lengths, requests files, host memory) without loading any weights."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from mibench.files import Unreadable, resolved

from .errors_format import format_validation_error
from .matrix import expand
from .problems import case_problems, config_problems, raise_first
from .references import load_references, resolve
from .spec import Config
from .yamlsource import Locations, apply_set, load_source


def _workload_spots(data: dict):
    """Every mapping in the raw config that may hold `requests:`, with its key path."""
    yield ("workload",), data.get("workload")
    yield ("parity", "workload"), (data.get("parity") or {}).get("workload") \
        if isinstance(data.get("parity"), dict) else None
    cases = data.get("cases")
    for i, case in enumerate(cases if isinstance(cases, list) else []):
        yield ("cases", i, "workload"), case.get("workload") if isinstance(case, dict) else None


def _resolve_requests(data: dict, locs: Locations) -> None:
    """Make each `requests:` path absolute, relative to the file that set it."""
    for key, node in _workload_spots(data):
        if isinstance(node, dict) and isinstance(node.get("requests"), str):
            file, _ = locs.find(key + ("requests",))
            base = Path(file).parent if file and not file.startswith("--set") else Path.cwd()
            try:
                node["requests"] = str(resolved(base / node["requests"]))
            except Unreadable as e:  # a NUL byte, a symbolic link loop
                raise locs.error(key + ("requests",), f"{node['requests']}: {e.why}") from None


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read, merge includes, apply `--set` overrides, validate, and check the matrix."""
    data, locs = load_source(Path(path))
    for assignment in overrides:
        data = apply_set(data, locs, assignment)
    _resolve_requests(data, locs)
    if isinstance(data.get("references"), str):
        data["references"] = resolve(data["references"], locs.find(("references",))[0])
    try:
        config = Config.model_validate(data)
    except ValidationError as e:
        raise format_validation_error(e, data, locs, Config) from None
    config._locations = locs
    config._source = str(path)
    if config.references is not None:
        load_references(config.references)  # a bad reference file fails here, not in report
    # the one validation pass (config/problems.py), each rule once: on the config (a
    # bounded matrix, engines, modes, options, http keys), then on its cases (models,
    # modes' rules, vocabularies, lengths, requests files, memory); the first is raised
    raise_first(config, config_problems(config))
    raise_first(config, case_problems(config, expand(config)))  # expand: duplicate ids
    return config
