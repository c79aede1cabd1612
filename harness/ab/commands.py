"""Plain functions behind `mibench ab` and `mibench bisect`: they print and return the
exit code (0 no regression, 1 a regression, 2 nothing compared), or raise MibenchError."""

from __future__ import annotations

from pathlib import Path


def ab_command(base_rev: str, new_rev: str, config_path: Path, *, rounds: int,
               case_glob: str | None, out: Path, sets: list[str], argv: list[str],
               target: str | None = None, compile_: bool = True,
               cost_threshold: str = "5%") -> int:
    from mibench.engines import cache_dir
    from mibench.harness.ab.revisions import repository
    from mibench.harness.ab.rounds import exit_code, run_ab
    from mibench.harness.config import load_config
    from mibench.harness.report.ab import render_text
    from mibench.harness.report.commands import parse_threshold
    from mibench.harness.run.compile import resolve_target

    config = load_config(config_path, sets)
    limit = parse_threshold(cost_threshold, "--cost-threshold")
    tpu = (resolve_target(target, config)
           if compile_ and (target or config.topology.target) else None)
    record, path = run_ab(config, repository(), base_rev, new_rev, cache_dir(), rounds=rounds,
                          case_glob=case_glob, out=out, argv=argv, target=tpu,
                          cost_threshold=limit)
    print(render_text(record, path))
    return exit_code(record)


def bisect_command(good: str, bad: str, config_path: Path, *, case_glob: str, rounds: int,
                   sets: list[str]) -> int:
    from mibench.engines import cache_dir
    from mibench.harness.ab.bisect import bisect
    from mibench.harness.ab.revisions import repository
    from mibench.harness.config import load_config

    config = load_config(config_path, sets)
    found = bisect(config, repository(), good, bad, cache_dir(), case_glob=case_glob,
                   rounds=rounds)
    print(f"first bad commit: {found['first_bad']} {found['subject']!r} "
          f"({len(found['steps'])} A/B runs over {found['candidates']} commits)")
    for case_id, line in found["evidence"].items():
        print(f"  {case_id}: {line}")
    return 0
