"""The wing's developer jobs (`mibench job ...`, docs/cli.md): what exists to measure
servers under test. `http_overhead` and `serve_flood` are whole jobs; `invariance_serve`
and `score_checks_serve` are the servers' rows of two core jobs (harness/jobs/invariance.py,
score_checks.py), passed to them as their `more`.

`JOBS` names them by the job they serve; the requests case (requests_case.py) carries it as
its kind's `jobs`, so harness/commands/job.py reaches them through the one registration
point, harness/case_kinds.py (`kind_job`), never by an import."""

from __future__ import annotations

from mibench.registry import Registry

JOBS: Registry = Registry("server job", field="job")
JOBS.add("http-overhead", "mibench.harness.under_test.jobs.http_overhead:report")
JOBS.add("serve-flood", "mibench.harness.under_test.jobs.serve_flood:main")
JOBS.add("invariance", "mibench.harness.under_test.jobs.invariance_serve:serve_rows")
JOBS.add("score-checks", "mibench.harness.under_test.jobs.score_checks_serve:server_rows")
