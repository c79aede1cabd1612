"""Prepared jobs, run as `mibench job ...` (the sub-app in `harness/commands/job.py`; the
eleven jobs and their options: docs/cli.md, "job ..."), one module each: `gpu_job` (the GPU
machine's check, run, report and profile, under a budget), `overhead` and `http_overhead`
(what the harness and the http path add to a direct call), `calibrate` and `verdicts` (the
A/B gate's false alarms, detections and verdicts on this machine), `invariance` and
`score_checks` (parity properties beside their faults), `nightly_scenario` and
`nightly_suite` (the nightly loop on a scratch clone), `serve_flood` and `site_scale`.
`invariance_serve` and `verdicts_report` are helpers of their jobs."""
