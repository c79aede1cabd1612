"""The config's problems with the keys of http cases (the servers under test): what
`mibench validate` finds, through the case kind's hooks (harness/case_kinds.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from mibench.engines import WIRES, MibenchError, parse_base_url

from ..config.cases import CaseSpec
from ..config.spec import HTTP_FIELDS, Case
from ..config.yamlsource import Problem


def host_problems(case: CaseSpec) -> list[Problem]:
    """A launched server's folder and interpreter exist here (a `$VARIABLE` interpreter that
    is not set skips the case at run time instead)."""
    launch = case.http.launch
    if launch is None:
        return []
    if launch.cwd is not None and not Path(launch.cwd).is_dir():
        return [Problem(("cases", case.index, "launch", "cwd"),
                        f"{launch.cwd} is not a folder here (the server starts in it)")]
    python = launch.interpreter()
    if launch.python is not None and python is not None and shutil.which(python) is None:
        return [Problem(("cases", case.index, "launch", "python"),
                        f"{python} is not an executable file here")]
    return []


def key_problems(i: int, case: Case, mine: bool) -> list[Problem]:
    """The http keys: only on http cases (`mine`: case `i` is one); an http case has
    base_url (a URL) or launch (how mibench starts the server; server_args only with it),
    and one load shape, clients, rate or slo."""
    def at(key: str, message: str) -> list[Problem]:
        return [Problem(("cases", i, key), message)]

    given = [k for k in HTTP_FIELDS if getattr(case, k) is not None]
    if not mine:
        return at(given[0], f"{given[0]} is a key of http cases (engine: http), not of "
                  f"engine {case.engine}") if given else []
    if case.base_url is not None and case.launch is not None:
        return at("launch", "give base_url (a server that is running) or launch (mibench "
                  "starts it on a free port), not both")
    if case.base_url is None and case.launch is None:
        return at("engine", "an http case needs base_url: the server's address, e.g. "
                  "http://127.0.0.1:8000, or launch: how mibench starts the server")
    if case.server_args is not None and case.launch is None:
        return at("server_args", "server_args are the flags of a server mibench launches: "
                  "give launch too")
    if case.base_url is not None:
        try:
            parse_base_url(case.base_url)
        except MibenchError as e:
            return at("base_url", e.message)
    if case.wire is not None and case.wire not in WIRES:
        try:
            WIRES.lookup(case.wire)
        except MibenchError as e:  # the registry's one "unknown wire" message
            return at("wire", e.message)
    if case.slo is not None:
        given = [k for k in ("clients", "rate", "requests") if getattr(case, k) is not None]
        if given:
            return at(given[0], f"{given[0]} is not used with slo: the search picks the "
                      "open-loop rates (slo.start_rate ... max_rate) and slo.requests per "
                      "step")
    elif (case.clients is None) == (case.rate is None):
        return at("rate" if case.rate is not None else "engine", "an http case takes "
                  "clients: N (closed loop, N requests in flight), rate: R (open loop, R "
                  "requests/s) or slo (the highest rate that meets a latency budget), "
                  + ("not both" if case.rate is not None else "one of them"))
    if case.cold_start is not None and case.launch is None:
        return at("cold_start", "cold starts are fresh launches of a server mibench "
                  "starts: give launch too")
    if case.prefix_cache is not None and case.launch is None:
        return at("prefix_cache", "the prefix_cache check compares fresh launches of a "
                  "server mibench starts, cache on and off: give launch too")
    return []
