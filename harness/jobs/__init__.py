"""Prepared jobs, run as `mibench job ...` (the sub-app in `harness/jobs/cli.py`):
`gpu_job` (the GPU machine's check, run, report and profile, under a budget) and
`overhead` (what the harness adds to a direct timed loop)."""
