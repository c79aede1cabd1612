"""When a side of a comparison was measured on a busy machine (pure: recorded loads in,
reasons out).

A case's `load` (harness/host/load.py) is the share of the machine's CPU time that processes
outside mibench held while it was measured. Past `BUSY_LEVEL` the timing of that side is
not evidence of the code: between runs taken at different times (`compare`, `history`) a
timing change with a busy side is `inconclusive`, never a regression, an improvement or
unchanged, and the reason names the side and the share; `mibench ab`, which interleaves
both sides so that load falls on both, decides it (and is exempt: it records the load of
each round and says when it was high). mibench's own threads never count as load.

`BUSY_LEVEL`: chosen from measurements on the 2-core development machine (docs/verdicts.md,
"How busy is busy").
"""

from __future__ import annotations

BUSY_LEVEL = 0.25


def share(load) -> float | None:
    """Other processes' share of the CPU in a recorded load (a CaseLoad, or the share
    itself; None: not recorded)."""
    return load if load is None or isinstance(load, float | int) else load.other_share


def busy(load, level: float = BUSY_LEVEL) -> bool:
    s = share(load)
    return s is not None and s > level


DECIDER = "`mibench ab` decides it"


def busy_line(side: str, value: float, up_to: bool = False) -> str:
    """`new side: other processes held (up to) 65% of the CPU`."""
    return f"{side} side: other processes held {'up to ' if up_to else ''}{value:.0%} of the CPU"


def busy_reason(sides: dict[str, object], level: float = BUSY_LEVEL) -> str | None:
    """`base side: ...; new side: other processes held 65% of the CPU; `mibench ab` decides
    it` for the sides (name -> load) measured on a busy machine, None when none was."""
    lines = [busy_line(name, share(load)) for name, load in sides.items() if busy(load, level)]
    return "; ".join(lines + [DECIDER]) if lines else None


TIMED_OUT = "exceeded runs.timeout_s"  # in the error of a case its deadline cut short


def timeout_busy_reason(message: str, own, others, level: float = BUSY_LEVEL) -> str | None:
    """Why a case cut short by its deadline (`message`: its error) is no evidence of the
    code: its own recorded load, or where it recorded none (a killed worker) the busiest
    of its run's other cases (`others`: their loads), past `level`. None when the failure
    is no timeout or the machine was not busy: then it is a failure like any other."""
    if TIMED_OUT not in message:
        return None
    if busy(own, level):
        return f"{busy_line('new', share(own))}; {DECIDER}"
    shares = [s for s in map(share, others) if s is not None]
    if own is None and shares and max(shares) > level:
        return f"{busy_line('new', max(shares), up_to=True)} (its run's other cases); {DECIDER}"
    return None
