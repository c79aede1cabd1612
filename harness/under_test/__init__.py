"""Servers under test (`engine: http`): one wing of the harness, plugged into the core by
one registration point. Not to be confused with harness/serve/, mibench's own server.

The wing holds what only http cases need: the requests case (`requests_case.py`, the case
kind `RequestsCase`), their expansion and config checks (`expansion.py`,
`config_problems.py`), sending requests (`feed.py`, `send.py`, `client_sizes.py`),
launching and pooling servers (`launch.py`, `pool.py`), their checks and measures
(`concurrency.py`, `prefix_cache.py`, `parity_checks.py`, `cold_start.py`, `slo.py`), the
A/B of two server versions (`ab.py`, `metrics.py`), its report section
(`report_latency.py`, `report_servers.py`), and the developer jobs that measure servers
(`jobs/`: `mibench job http-overhead`, `serve-flood`, the servers' rows of `invariance`
and `score-checks`), which its kind brings to harness/commands/job.py (`CaseKind.jobs`).

How it plugs in: the core offers hooks, the wing fills them. harness/case_kinds.py declares
`CaseKind` (every hook, with an in-process engine's answers as defaults) and registers each
engine's kind in `CASE_KINDS`, the wing's as a lazy "module:attribute" entry: that is the
one place outside the wing that names it (tests/test_layering.py). The core asks a case's
kind (`kind_of(case.engine)`) and never imports the wing; the wing imports the core.

What stays in the core, read by the wing: the config's section models of http cases
(config/server.py, config/server_measures.py, config/cases.py `HttpPlan`), because the
config's pydantic model is parsed and checked before any kind is asked (`mibench validate`
needs the keys' types and defaults); the records of their measures (records/servers.py),
because every artifact schema lives in records/; the pure maths of a capacity search and
of a server A/B's figures (stats/capacity.py, judge/server_compare.py).
"""
