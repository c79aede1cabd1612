"""Prepared jobs, run as `mibench job ...` (the sub-app in `harness/commands/job.py`; the
eleven jobs and their options: docs/cli.md, "job ..."), one module each: `gpu_job` (the GPU
machine's check, run, report and profile, under a budget), `overhead` (what the harness
adds to a direct call), `calibrate` and `verdicts` (the A/B gate's false alarms, detections
and verdicts on this machine), `invariance` and `score_checks` (parity properties beside
their faults), `nightly_scenario` and `nightly_suite` (the nightly loop on a scratch
clone), `site_scale`. `verdicts_report` is a helper of its job. The jobs that measure
servers under test live in their wing, harness/under_test/jobs/ (`http-overhead`,
`serve-flood`, and the servers' rows of `invariance` and `score-checks`, given to those
jobs as their `more`)."""
