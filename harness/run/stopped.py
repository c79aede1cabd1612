"""What a run that stopped early kept, and how to go on: the line of an interrupted run
(Ctrl-C or SIGTERM, exit 130) and of one whose artifact could not be written (exit 4),
each naming the artifact, what it holds and the `--resume` command."""

from __future__ import annotations

import shlex
from pathlib import Path

from .plan import Plan


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a run; its message says what the artifact holds, where,
    and the command that resumes it."""


def resume_command(plan: Plan, path: Path) -> str:
    """The command that finishes an interrupted run of this plan into `path`."""
    if plan.config_path is None:  # the Python API: the same config, resume=path
        return f"the same config with resume={path}"
    sets = [w for s in plan.options.sets for w in ("--set", s)]
    cases = [w for c in plan.options.cases for w in ("--case", c)]
    mixed = ["--allow-mixed"] if plan.options.allow_mixed else []
    return shlex.join(["mibench", "run", plan.config_path, *sets, *cases, "--resume",
                       str(path), *mixed])


def after_failed_write(plan: Plan, path: Path, saved: list[str] | None,
                       measured: list[str]) -> tuple[str, str]:
    """(what is safe, how to go on) when the artifact could not be written."""
    lost = [i for i in measured if i not in (saved or [])]
    lost_words = (f"; not saved: {', '.join(lost[:3])}"
                  f"{f' and {len(lost) - 3} more' if len(lost) > 3 else ''} (measured, "
                  "measured again on resume)" if lost else "")
    if saved is None and plan.options.resume is None:
        return ("the run stopped before any artifact was written" + lost_words,
                "free space (or raise the limit) and run again")
    if saved is None:
        held = "what it held before this resume"
    else:
        last = f", the last {saved[-1]}" if saved else ""
        held = (f"{len(saved)} of {len(plan.all_cases)} case(s) (in the "
                f"config's order{last})")
    return (f"the run stopped; the artifact as last written is intact and holds {held}"
            f"{lost_words}", f"free space (or raise the limit) and go on with: "
            f"{resume_command(plan, path)}")


def held_after_interrupt(plan: Plan, path: Path, saved: list[str] | None, cases: list) -> str:
    """What an interrupted run kept, where, and how to go on (one line)."""
    if saved is None:
        return "interrupted before the artifact was first written: nothing was kept"
    total = len(plan.all_cases)
    ok = sum(1 for c in cases if c.status == "ok")
    again = resume_command(plan, path)
    if not cases:
        return (f"interrupted: no case finished; {path} holds none (resume with: "
                f"{again}, or delete it)")
    other = len(cases) - ok
    rest = (f"; {other} not ok: failed, skipped or interrupted, run again on resume"
            if other else "")
    return (f"interrupted: {path} holds {len(cases)} of {total} case(s) ({ok} ok"
            f"{rest}), kept; resume with: {again}")
