"""The command that reproduces one row: `mibench run CONFIG [--set ...] --case ID`.

The config file, its `--set` overrides and a multi-process run's options are the run's own
(`provenance.invocation`, recorded by `mibench run`); the case is selected by its id with
`--case` (glob characters in the id escaped), and parity checks are turned off so that
only that case runs. An artifact written before the invocation was recorded (or by a run
that did not come from a config file) names `configs/NAME.yaml` and no overrides.
"""

from __future__ import annotations

import re
import shlex

from ..records import CaseRecord, RunRecord


def config_args(record: RunRecord) -> tuple[str, list[str], list[str]]:
    """(config path, the run's own --set overrides, its multi-process options)."""
    inv = record.provenance.invocation
    if inv is not None:
        return inv.config, list(inv.sets), list(inv.options)
    return f"configs/{record.config.get('name', 'CONFIG')}.yaml", [], []


def glob_escape(text: str) -> str:
    """`text` as an fnmatch pattern that matches only itself."""
    return re.sub(r"([*?[])", r"[\1]", text)


def command(record: RunRecord, case: CaseRecord) -> str:
    """A shell command that runs exactly this case of the config (parity checks off)."""
    config, sets, extra = config_args(record)
    if (record.config.get("parity") or {}).get("checks"):
        sets = sets + ["parity.checks=[]"]
    words = (["mibench", "run", config] + [w for s in sets for w in ("--set", s)]
             + ["--case", glob_escape(case.case_id)] + extra)
    return " ".join(shlex.quote(w) for w in words)
