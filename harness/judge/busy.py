"""When a side of a comparison was measured on a busy machine (pure: recorded loads in,
reasons out).

A case's `load` (harness/host/busy.py) is the share of the machine's CPU time that processes
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
# how much a busy side's load can explain: a share s of the CPU held by others stretches
# a run of XLA's multi-threaded programs by at most 1 / (1 - s) (the model of
# docs/verdicts.md, "How busy is busy"; measured 2.21x at s = 77% where it allows 4.35x),
# times this margin; s is capped so that no load explains more than 25x
LOAD_MARGIN = 1.25
MAX_SHARE = 0.95


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


def explained(load) -> float:
    """The largest slowdown (a ratio of times) a side's recorded load can explain:
    LOAD_MARGIN / (1 - s); 1.0 when it recorded none."""
    s = share(load)
    return 1.0 if s is None else LOAD_MARGIN / (1 - min(max(s, 0.0), MAX_SHARE))


def beyond_load(low: float, high: float, base_load, new_load) -> str | None:
    """Why a change of time whose interval is [low, high] (ratios, new / base) is evidence
    of the code although a side was busy: its low end is slower than the new side's load
    can explain (a regression), or its high end faster than the base side's can (an
    improvement); None when the load could explain it."""
    slower, faster = explained(new_load), explained(base_load)
    if low > slower:
        return (f"slower than the new side's load can explain (other processes held "
                f"{share(new_load):.0%} of the CPU: at most {slower:.2f}x, "
                f"{LOAD_MARGIN:g} / (1 - share); the interval's low end is {low:.2f}x)")
    if high < 1 / faster:
        return (f"faster than the base side's load can explain (other processes held "
                f"{share(base_load):.0%} of the CPU: at most {faster:.2f}x; the "
                f"interval's high end is {high:.2f}x)")
    return None


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
