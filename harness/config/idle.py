"""Keys that would do nothing: set in a config, read by nothing it runs (issue 45:
`concurrency: {trials: 3}` without the `concurrency` parity check ran nothing and said
nothing). `mibench validate` and `mibench run` name each as a `note:` with its file, line
and key; none is an error, so a config stays loadable with `--set parity.checks=[]` (the
reproduce commands of a report) whatever else it sets.

- a case's `concurrency` without `concurrency` in `parity.checks`;
- `concurrency` in `parity.checks` without an http case, `topologies` without a case at
  tp > 1;
- `parity.min_speedup` or `speedup_items` without `speedup`; `parity.reference` without
  `engines` (the one check that reads it); `parity.workload` where no check runs on it
  (`speedup` reads the cases' own records);
- an http case's own `runs.warmup`, `timed` or `processes` (a load is one timed run);
- `tokens` in a workload whose requests come from a `requests:` file.
"""

from __future__ import annotations

from ..case_kinds import kind_of
from .problems import Problem
from .spec import Config

WORKLOAD_CHECKS = ("isolation", "modes", "engines", "topologies", "concurrency")


def idle_keys(config: Config, cases) -> list[Problem]:
    """Every key of `config` (expanded into `cases`) that would do nothing, and why."""
    checks = list(config.parity.checks) if config.parity is not None else []
    found = [Problem(("cases", i, "concurrency"), "does nothing: parity.checks has no "
                     "`concurrency`, the check its trials are for")
             for i, case in enumerate(config.cases)
             if case.concurrency is not None and "concurrency" not in checks]
    if "concurrency" in checks and not any("concurrency" in kind_of(c.engine).parity_checks
                                           for c in cases):
        found.append(Problem(("parity", "checks"), "`concurrency` does nothing: it checks the "
                             "servers of http cases, and this config has none"))
    if "topologies" in checks and not any(c.tp > 1 for c in cases):
        found.append(Problem(("parity", "checks"), "`topologies` does nothing: it compares "
                             "cases at tp > 1 with tp 1, and every case runs at tp 1"))
    found += _parity_keys(config, checks)
    for i, case in enumerate(config.cases):
        runs = case.runs.model_fields_set & kind_of(case.engine).runs_idle \
            if case.runs is not None else set()
        why = kind_of(case.engine).runs_idle_why
        found += [Problem(("cases", i, "runs", k), f"does nothing: {why}") for k in sorted(runs)]
    return found + _tokens(config)


def _parity_keys(config: Config, checks: list[str]) -> list[Problem]:
    p = config.parity
    if p is None:
        return []
    out = [Problem(("parity", k), "does nothing: parity.checks has no `speedup`, the check "
                   "it sets") for k in ("min_speedup", "speedup_items")
           if k in p.model_fields_set and "speedup" not in checks]
    if "reference" in p.model_fields_set and "engines" not in checks:
        out.append(Problem(("parity", "reference"), "does nothing: only the `engines` check "
                           "reads the reference, and parity.checks has no `engines`"))
    if p.workload is not None and not set(checks) & set(WORKLOAD_CHECKS):
        out.append(Problem(("parity", "workload"), "does nothing: no check in parity.checks "
                           f"runs on it ({', '.join(WORKLOAD_CHECKS)} do)"))
    return out


def _tokens(config: Config) -> list[Problem]:
    """`tokens` set where the workload's requests come from a file."""
    top = config.workload
    spots = [(("workload",), top)] + [(("cases", i, "workload"), c.workload) for i, c in
                                      enumerate(config.cases) if c.workload is not None]
    if config.parity is not None and config.parity.workload is not None:
        spots.append((("parity", "workload"), config.parity.workload))
    out = []
    for key, section in spots:
        requests = section.requests if "requests" in section.model_fields_set else top.requests
        if "tokens" in section.model_fields_set and requests is not None:
            out.append(Problem(key + ("tokens",), "does nothing: the requests come from "
                               f"{requests}, not from generated tokens"))
    return out


def notes(config: Config, cases) -> list[str]:
    """The idle keys as `note:` lines naming `file:line: key`."""
    return [f"note: {config.error(p.key, p.message)}" for p in idle_keys(config, cases)]
