"""The command that reproduces one row: `mibench run CONFIG [--set ...]` selecting the case.

The config file and its `--set` overrides come from the artifact's argv; the case is
selected by replacing `cases` with that one case (`--set 'cases=[{...}]'`) and pinning every
matrix axis the config varies (model, dtype, tp, workload sizes) to the row's value.
"""

from __future__ import annotations

import shlex

import yaml
from mibench.harness.records import CaseRecord, RunRecord

AXES = {"query_tokens", "num_items", "item_tokens"}
VALUE_FLAGS = {"--set", "--out", "--resume", "--engine-repo"}


def config_args(record: RunRecord) -> tuple[str, list[str]]:
    """(config path, the run's own --set overrides) from argv; `configs/NAME.yaml` when the
    run did not come from `mibench run`."""
    argv = list(record.provenance.argv)
    if "run" not in argv:
        return f"configs/{record.config.get('name', 'CONFIG')}.yaml", []
    rest = argv[argv.index("run") + 1:]
    config, sets, i = None, [], 0
    while i < len(rest):
        arg = rest[i]
        if arg in VALUE_FLAGS and i + 1 < len(rest):
            if arg == "--set":
                sets.append(rest[i + 1])
            i += 2
            continue
        if arg.startswith("--set="):
            sets.append(arg.removeprefix("--set="))
        elif not arg.startswith("-") and config is None:
            config = arg
        i += 1
    return config or "CONFIG", sets


def _flow(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return text.strip().removesuffix("...").strip()  # a scalar document ends with `...`


def _axis_values(config: dict, section: str, key: str) -> list:
    value = (config.get(section) or {}).get(key)
    return value if isinstance(value, list) else [value]


def case_entry(case: CaseRecord, config: dict) -> dict:
    """The one `cases` entry that expands to this case (runs and workload patches kept)."""
    entry = {"engine": case.engine, "mode": case.mode, **case.params}
    top_runs = {"warmup": 1, "timed": 5, **(config.get("runs") or {})}
    runs = {k: v for k, v in case.runs.items() if v is not None and top_runs.get(k) != v}
    if runs:
        entry["runs"] = runs
    top = config.get("workload") or {}
    patch = {}
    for key, value in case.workload.items():
        if key in AXES or value is None:
            continue
        if top.get(key) != value and not (key in ("tokens", "seed", "apply_softmax")
                                          and key not in top and value in ("random", 0, False)):
            patch[key] = value
    if patch:
        entry["workload"] = patch
    return entry


def pins(case: CaseRecord, config: dict) -> list[str]:
    """`--set` assignments pinning the matrix axes the config varies to this case's values."""
    out = []
    for section, key, value in (("model", "path", case.model.get("path")),
                                ("model", "dtype", case.model.get("dtype")),
                                ("topology", "tp", case.topology.get("tp"))):
        if len(_axis_values(config, section, key)) > 1:
            out.append(f"{section}.{key}={_flow(value)}")
    for key in sorted(AXES):
        if len(_axis_values(config, "workload", key)) > 1 and key in case.workload:
            out.append(f"workload.{key}={_flow(case.workload[key])}")
    if (config.get("parity") or {}).get("checks"):
        out.append("parity.checks=[]")
    return out


def command(record: RunRecord, case: CaseRecord) -> str:
    """A shell command that runs exactly this case of the config (parity checks off)."""
    config, sets = config_args(record)
    sets += [f"cases=[{_flow(case_entry(case, record.config))}]"]
    sets += pins(case, record.config)
    words = ["mibench", "run", config] + [w for s in sets for w in ("--set", s)]
    return " ".join(shlex.quote(w) for w in words)
