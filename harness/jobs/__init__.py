"""Prepared jobs, run as `mibench job ...` (the sub-app in `harness/commands/job.py`):
`gpu_job` (the GPU machine's check, run, report and profile, under a budget), `overhead`
(what the harness adds to a direct timed loop) and `calibrate` (the A/B gate's false
alarms and detections on this machine)."""
