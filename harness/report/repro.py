"""The command that reproduces one row: `mibench run CONFIG [--set ...]` selecting the case.

The config file, its `--set` overrides and a multi-process run's options come from the
artifact's argv, parsed by the CLI's own `run` command (so every option it has, in any
order); the case is selected by replacing `cases` with that one case
(`--set 'cases=[{...}]'`) and pinning every matrix axis the config varies (model, dtype, tp,
workload sizes) to the row's value. Defaults come from the config models.
"""

from __future__ import annotations

import shlex

import yaml

from mibench.harness.config.matrix import WORKLOAD_AXES
from mibench.harness.config.spec import Runs, WorkloadFields
from mibench.harness.records import CaseRecord, RunRecord

DISTRIBUTED = ("coordinator", "num_processes", "process_id")  # kept: a multi-host case needs them
WORKLOAD_DEFAULTS = {k: f.default for k, f in WorkloadFields.model_fields.items()}


def _run_command():
    """The click command behind `mibench run` (imported late: the CLI imports the report)."""
    import typer

    from mibench.harness.cli import app

    return typer.main.get_command(app).commands["run"]


def config_args(record: RunRecord) -> tuple[str, list[str], list[str]]:
    """(config path, the run's own --set overrides, its multi-process options) from argv,
    parsed by `mibench run` itself; `configs/NAME.yaml` when the run did not come from
    `mibench run CONFIG`."""
    run, argv, params = _run_command(), record.provenance.argv, {}
    if "run" in argv[1:]:
        rest = list(argv[argv.index("run", 1) + 1:])
        with run.make_context("run", rest, resilient_parsing=True) as ctx:
            params = ctx.params  # by Python name: config, set_, coordinator, ...
    config = params.get("config") or f"configs/{record.config.get('name', 'CONFIG')}.yaml"
    flags = {p.name: p.opts[0] for p in run.params}
    extra = [w for name in DISTRIBUTED if params.get(name) is not None
             for w in (flags[name], str(params[name]))]
    return str(config), list(params.get("set_") or []), extra


def _flow(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return text.strip().removesuffix("...").strip()  # a scalar document ends with `...`


def _axis_values(config: dict, section: str, key: str) -> list:
    value = (config.get(section) or {}).get(key)
    return value if isinstance(value, list) else [value]


def case_entry(case: CaseRecord, config: dict) -> dict:
    """The one `cases` entry that expands to this case (runs and workload patches kept)."""
    entry = {"engine": case.engine, "mode": case.mode, **case.params}
    top_runs = {**Runs().model_dump(), **(config.get("runs") or {})}
    runs = {k: v for k, v in case.runs.items() if v is not None and top_runs.get(k) != v}
    if runs:
        entry["runs"] = runs
    top = {**WORKLOAD_DEFAULTS, **(config.get("workload") or {})}
    patch = {k: v for k, v in case.workload.items()
             if k not in WORKLOAD_AXES and v is not None and top.get(k) != v}
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
    for key in sorted(WORKLOAD_AXES):
        if len(_axis_values(config, "workload", key)) > 1 and key in case.workload:
            out.append(f"workload.{key}={_flow(case.workload[key])}")
    if (config.get("parity") or {}).get("checks"):
        out.append("parity.checks=[]")
    return out


def command(record: RunRecord, case: CaseRecord) -> str:
    """A shell command that runs exactly this case of the config (parity checks off)."""
    config, sets, extra = config_args(record)
    sets += [f"cases=[{_flow(case_entry(case, record.config))}]"]
    sets += pins(case, record.config)
    words = ["mibench", "run", config] + [w for s in sets for w in ("--set", s)] + extra
    return " ".join(shlex.quote(w) for w in words)
