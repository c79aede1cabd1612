"""`mibench job ...`: the prepared jobs (harness/jobs/; those that measure servers under test
in their wing, harness/under_test/jobs/, reached through their case kind: `kind_job`). Each
only parses arguments and calls the job's plain function (imported on call, so `mibench
--help` stays light).

    mibench job gpu --out DIR [--budget-s 420] [--dry-run]
    mibench job overhead [CONFIG] [--rounds 3] [--set key=value] [--out FILE.json]
    mibench job calibrate --out DIR [--trials 20] [--rounds 5] [--no-load]
    mibench job verdicts --out DIR [--part level|aa|slow|memory ...] [--pairs 10]
    mibench job http-overhead [--calls 40]
    mibench job invariance [--out DIR] [--no-serve]
    mibench job score-checks [--out DIR] [--no-servers]
    mibench job nightly-scenario --out DIR [--seed-runs 5] [--rounds 5] [--threshold 10%]
                                 [--unseen-noise]
    mibench job nightly-suite --out DIR [--scenario first|last|partial|none|none-beside|degenerate]
    mibench job serve-flood [--sockets 300 --sockets 1000] [--requests 30] [--out FILE.json]
    mibench job site-scale --out DIR [--measurements 20 --measurements 200] [--nights 365]

On a machine without the console script: `python -m mibench.harness.cli job ...`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError

from .common import Sets, choices, folder_out, guarded

PARTS = ("level", "aa", "slow", "memory")  # harness/jobs/verdicts.py's parts, in order

job_app = typer.Typer(no_args_is_help=True, help="Prepared jobs: the GPU job, overhead "
                      "benchmarks, the A/B gate's calibration and verdicts, parity and "
                      "nightly scenarios, scale and flood tests.")


@job_app.command("gpu")
@guarded
def gpu(out: Annotated[Path, typer.Option(help="Folder for the artifact, report and "
                                               "summary.json.", callback=folder_out)],
        budget_s: Annotated[float, typer.Option(help="Seconds for the run step (the child "
                                                     "`mibench run` is stopped after).")]
        = 420.0,
        dry_run: Annotated[bool, typer.Option(help="The tiny preset on any machine, no GPU "
                                                   "needed.")] = False):
    """Check a GPU machine, run configs/gpu.yaml under a budget, report, profile.

    Exit code: the run's (0 ok, 3 a case or parity failed, 124 stopped at the budget).
    """
    from ..jobs import gpu_job

    raise typer.Exit(gpu_job.main(out, budget_s, dry_run))


@job_app.command("overhead")
@guarded
def overhead(config: Annotated[Path | None, typer.Argument(
                 help="A one-case config without parity checks (default: "
                      "configs/overhead.yaml).")] = None,
             rounds: Annotated[int, typer.Option(help="Rounds of direct and harness "
                                                      "sides.")] = 3,
             set_: Sets = None,
             out: Annotated[Path | None, typer.Option(help="Also write the JSON result to "
                                                          "FILE.json (or a folder: "
                                                          "overhead.json there).")] = None):
    """What the harness adds to a direct timed loop of the same call; JSON on stdout."""
    from ..config.bounds import check_flag
    from ..jobs import overhead as job
    from .common import out_file

    check_flag(rounds, "--rounds")
    job.main(config if config is not None else job.CONFIG, rounds, set_ or [],
             out_file(out, "overhead.json"))


@job_app.command("http-overhead")
@guarded
def http_overhead(calls: Annotated[int, typer.Option(help="Alternating pairs of calls "
                                                         "timed.")] = 40):
    """What the http path adds to a call of the same engine: mibench serve, launched, vs
    the JAX engine in process, one request at a time; JSON on stdout."""
    from ..case_kinds import kind_job

    kind_job("http-overhead")(calls)


@job_app.command("calibrate")
@guarded
def calibrate(out: Annotated[Path, typer.Option(help="Folder for the scratch repository, "
                                                     "caches and calibrate.json.",
                                                     callback=folder_out)],
              trials: Annotated[int, typer.Option(help="A/B runs per kind (A/A, 20% and "
                                                       "50% slower).")] = 20,
              rounds: Annotated[int, typer.Option(help="Rounds of each A/B run.")] = 5,
              load: Annotated[bool, typer.Option(help="Load one core half of the time "
                                                      "meanwhile.")] = True):
    """Calibrate the A/B gate here: false regressions of A/A runs and detections of a 20%
    and a 50% slower prefill_extend (not part of CI; tens of minutes)."""
    from ..config.bounds import check_flag
    from ..jobs import calibrate as job

    check_flag(rounds, "--rounds")
    job.main(out, trials, rounds, load)


@job_app.command("verdicts")
@guarded
def verdicts(out: Annotated[Path, typer.Option(help="Folder for the runs, the scratch "
                                                   "repository, verdicts.json and "
                                                   "verdicts.md.", callback=folder_out)],
             part: Annotated[list[str] | None, typer.Option(
                 metavar=choices(PARTS), help="A part of the job; repeatable (default: all "
                                              "four).")] = None,
             pairs: Annotated[int, typer.Option(help="Pairs of separate runs per "
                                                     "slowdown (1.2x, 1.5x, 2x).")] = 10,
             aa_runs: Annotated[int, typer.Option(help="Runs of configs/cpu-smoke.yaml in "
                                                       "the A/A matrix (every second one "
                                                       "busy).")] = 6,
             level_runs: Annotated[int, typer.Option(help="Runs per load in the busy "
                                                          "level's table.")] = 3):
    """The verdicts between runs on this machine: the busy level's measurements, the A/A
    matrix, separate runs at injected slowdowns, memory by case order (tables in
    OUT/verdicts.md; not part of CI; about 1.5 hours on 2 cores)."""
    from ..jobs import verdicts as job

    for p in part or []:
        if p not in PARTS:
            raise MibenchError(f"unknown part {p!r} ({', '.join(PARTS)})", field="--part")
    job.main(out, list(part or PARTS), pairs, aa_runs, level_runs)


@job_app.command("invariance")
@guarded
def invariance(out: Annotated[Path | None, typer.Option(help="Folder for invariance.json "
                                                            "and invariance.md.",
                                                            callback=folder_out)] = None,
               model: Annotated[str, typer.Option(help="The model (float32).")]
               = "embedded:tiny",
               serve: Annotated[bool, typer.Option(help="Also the serve rows (launches "
                                                        "mibench serve per mode).")] = True):
    """Batch invariance of mibench's engines, every mode: an item alone against the same
    item among others in the mode's batching, with its negative controls (docs/parity.md;
    a few minutes on 2 cores). Exit 1 when a stated property does not hold."""
    from ..case_kinds import kind_job
    from ..jobs import invariance as job

    result = job.main(out, model, kind_job("invariance") if serve else None)
    raise typer.Exit(0 if result["all_hold"] else 1)


@job_app.command("score-checks")
@guarded
def score_checks(out: Annotated[Path | None, typer.Option(help="Folder for score-checks.json "
                                                              "and score-checks.md.",
                                                              callback=folder_out)] = None,
                 servers: Annotated[bool, typer.Option(help="Also mibench serve in each mode "
                                                            "and the fake server's prefix "
                                                            "cache (launches them).")] = True):
    """Parity's order, duplicates, degenerate and prefix_cache checks on every engine and
    mode, each beside the fault it must catch (docs/parity.md; a few minutes on 2 cores).
    Exit 1 when a check fails on a clean engine or misses its fault."""
    from ..case_kinds import kind_job
    from ..jobs import score_checks as job

    result = job.main(out, kind_job("score-checks") if servers else None)
    raise typer.Exit(0 if result["all_hold"] else 1)


@job_app.command("nightly-scenario")
@guarded
def nightly_scenario(out: Annotated[Path, typer.Option(help="Folder for the scratch "
                                                           "repository, the history, "
                                                           "scenario.md and .json.",
                                                           callback=folder_out)],
                     seed_runs: Annotated[int, typer.Option(help="Runs of the seeding "
                                                                 "night.")] = 5,
                     rounds: Annotated[int, typer.Option(help="Rounds of each A/B.")] = 5,
                     max_rounds: Annotated[int, typer.Option(help="The most rounds of one "
                                                                  "A/B.")] = 20,
                     budget: Annotated[str, typer.Option(help="Each night's budget for "
                                                              "ab and bisect.")] = "1h",
                     noise: Annotated[bool, typer.Option(help="Also the noise night (busy "
                                                              "loops beside its run).")]
                     = True,
                     threshold: Annotated[str, typer.Option(help="The nights' threshold (and "
                                                                 "ab's minimum effect).")]
                     = "10%",
                     unseen_noise: Annotated[bool, typer.Option(
                         help="A busy loop on every core through every night, the load "
                              "measurement faked quiet: noise no load measurement sees.")]
                     = False):
    """The nightly loop on a scratch clone: eight commits, commit 4 makes prefill_extend
    2x slower; nights at commits 0 (seed), 2, 5 and 8, and a night beside busy loops
    (OUT/scenario.md; not part of CI; minutes on 2 cores). Exit 1 when a check fails."""
    from ..config.bounds import check_flag
    from ..jobs import nightly_scenario as job
    from .common import parse_threshold

    for value, flag in ((seed_runs, "--seed-runs"), (rounds, "--rounds"),
                        (max_rounds, "--max-rounds")):
        check_flag(value, flag)

    raise typer.Exit(job.main(out, seed_runs, rounds, max_rounds, budget, noise,
                              parse_threshold(threshold), unseen_noise))


@job_app.command("nightly-suite")
@guarded
def nightly_suite(out: Annotated[Path, typer.Option(help="Folder for the scratch repository, "
                                                         "the histories, suite.md and .json.",
                                                         callback=folder_out)],
                  seed_runs: Annotated[int, typer.Option(help="Runs of the seeding night.")] = 5,
                  rounds: Annotated[int, typer.Option(help="Rounds of each A/B.")] = 5,
                  max_rounds: Annotated[int, typer.Option(help="The most rounds of one "
                                                               "A/B.")] = 20,
                  budget: Annotated[str, typer.Option(help="Each night's budget.")] = "1h",
                  threshold: Annotated[str, typer.Option(help="The nights' threshold.")]
                  = "10%",
                  scenario: Annotated[list[str] | None, typer.Option(
                      help="Only these scenarios (first, last, partial, none, "
                           "none-beside, degenerate); repeatable.")] = None):
    """Short nightly scenarios sharing one seeded history, beside a busy loop per core with
    the load faked quiet: the culprit first and last in its range, a partial step, two
    runs with no regression, a mode that scores nothing (OUT/suite.md; not part of CI).
    Exit 1 when a check fails."""
    from ..config.bounds import check_flag
    from ..jobs import nightly_suite as job
    from .common import parse_threshold

    unknown = [s for s in scenario or [] if s not in job.SCENARIOS]
    if unknown:
        raise MibenchError(f"{unknown[0]!r} is not one of {', '.join(job.SCENARIOS)}",
                           field="--scenario")
    for value, flag in ((seed_runs, "--seed-runs"), (rounds, "--rounds"),
                        (max_rounds, "--max-rounds")):
        check_flag(value, flag)
    raise typer.Exit(job.main(out, seed_runs, rounds, max_rounds, budget,
                              parse_threshold(threshold), scenario))


@job_app.command("serve-flood")
@guarded
def serve_flood(sockets: Annotated[list[int] | None, typer.Option(
                    help="Silent sockets reconnecting as fast as they are closed; "
                         "repeatable (default: 300 and 1000).")] = None,
                requests: Annotated[int, typer.Option(help="Well-formed requests per "
                                                           "crowd, one every --interval.")]
                = 30,
                interval: Annotated[float, typer.Option(help="Seconds between them.")] = 1.0,
                server_arg: Annotated[list[str] | None, typer.Option(
                    help="A flag of mibench serve as KEY=VALUE (max_connections=64); "
                         "repeatable.")] = None,
                out: Annotated[Path | None, typer.Option(help="Also write the JSON result "
                                                             "to FILE.json (or a folder: "
                                                             "serve-flood.json there).")]
                = None):
    """mibench serve under silent sockets that reconnect as fast as it closes them: the
    well-formed requests answered and their latency p50/p99 per crowd (not part of CI;
    about a minute a crowd)."""
    import json

    from ..case_kinds import kind_job
    from ..config.bounds import check_flag
    from ..records.io import write_output
    from .common import out_file, parse_options

    out = out_file(out, "serve-flood.json")
    crowds = sockets or [300, 1000]
    for n in crowds:
        check_flag(n, "--sockets")
    check_flag(requests, "--requests")
    result = kind_job("serve-flood")(crowds, requests, interval,
                                     server_args=parse_options(server_arg or []) or None)
    text = json.dumps(result, indent=1)
    print(text)
    if out is not None:
        write_output(out, text + "\n")


@job_app.command("site-scale")
@guarded
def site_scale(out: Annotated[Path, typer.Option(help="Folder for the synthetic histories, "
                                                      "their sites, scale.md and .json.",
                                                      callback=folder_out)],
               measurements: Annotated[list[int] | None, typer.Option(
                   help="Measurements of a synthetic history; repeatable (default 20 and "
                        "200).")] = None,
               nights: Annotated[int, typer.Option(help="Nights of each history.")] = 365,
               browser: Annotated[Path, typer.Option(
                   help="The chromium that times the overview's first render.")]
               = Path("/usr/bin/chromium")):
    """How `mibench site` scales: synthetic histories (M measurements x N nights) built into
    sites, the build time, the overview's size and its first render in headless chromium
    (OUT/scale.md; not part of CI). Exit 1 when 200 x N takes more than 10x the time of
    20 x N, the overview is 5 MB or more, or its first render takes 1 s or more."""
    from ..jobs import site_scale as job

    sizes = measurements or [20, 200]
    if any(m < 1 for m in sizes) or nights < 2:
        raise MibenchError("needs at least 1 measurement and 2 nights",
                           field="--measurements" if any(m < 1 for m in sizes) else "--nights")
    raise typer.Exit(job.main(out, sizes, nights, str(browser)))
