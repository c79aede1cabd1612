"""The between-run noise floor learnt from A/A runs (pure: records in, a NoiseFloor out):
`mibench compare --noise-from DIR` and `mibench history` learn it from repeated runs of one
commit in a folder, instead of assuming the platform's default.

Artifacts of one commit that measured the same case as the same measurement
(harness.stats.comparable.measurement; dirty checkouts too: what they changed can only
widen the spread, never narrow it) form a group. Each artifact's median run time of a case
is one value; s2 = the sum of squared deviations of their logs from their group's mean over
df = the sum of (group size - 1); the floor is exp(s) - 1 with s the 90% upper confidence
limit of the standard deviation, sqrt(s2 df / chi2_0.10(df)), so a few A/A runs give a
wide floor and many a tight one.

Left out, and said so in `NoiseFloor.source`: the artifacts being judged (`leave_out`: the
pair a comparison or a step is about, so its own difference never widens the floor that
judges it), and case runs measured on a busy machine (harness.stats.load: other processes
held more than the busy level of the CPU), whose spread is the neighbours', not the code's.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from mibench.errors import MibenchError

from ..records import RunRecord
from .comparable import code_git, measurement_id
from .load import BUSY_LEVEL, busy
from .significance import NoiseFloor, default_floor

AA_CONFIDENCE = 0.90  # the learnt floor is this one-sided upper confidence limit


def aa_noise(records: list[RunRecord], where: str, leave_out: frozenset[str] = frozenset(),
             busy_level: float = BUSY_LEVEL) -> NoiseFloor:
    """The floor learnt from the A/A runs among `records` (see the module docstring),
    leaving out the artifacts whose run id is in `leave_out`; a MibenchError naming
    `--noise-from WHERE` when no A/A group is left."""
    from scipy.stats import chi2

    groups: dict[tuple, list[float]] = defaultdict(list)
    left = {"judged": 0, "busy": 0}
    for r in records:
        if r.run_id in leave_out:
            left["judged"] += 1
            continue
        commit = code_git(r).commit
        if not commit:
            continue
        for c in r.cases:
            if c.status != "ok" or not c.timed_s or not all(t > 0 for t in c.timed_s):
                continue
            if busy(c.load, busy_level):
                left["busy"] += 1
                continue
            key = (commit, c.case_id, measurement_id(r, c))
            groups[key].append(math.log(statistics.median(c.timed_s)))
    used = [g for g in groups.values() if len(g) > 1]
    df = sum(len(g) - 1 for g in used)
    if not df:
        raise MibenchError("holds no A/A runs: two or more artifacts of one commit measuring "
                           f"the same case on a machine that was not busy{_left(left)}",
                           field=f"--noise-from {where}")
    ss = sum(sum((x - statistics.fmean(g)) ** 2 for x in g) for g in used)
    sd = math.sqrt(ss / chi2.ppf(1 - AA_CONFIDENCE, df))
    runs = sum(len(g) for g in used)
    return NoiseFloor(math.expm1(sd), f"learnt from A/A runs in {where}: {runs} case runs in "
                                      f"{len(used)} groups, {df} degrees of freedom, "
                                      f"{AA_CONFIDENCE:.0%} upper limit{_left(left)}")


def _left(left: dict[str, int]) -> str:
    """`; left out: the 2 artifacts judged, 3 case runs on a busy machine`."""
    parts = ([f"the {left['judged']} artifact(s) judged"] if left["judged"] else []) + (
        [f"{left['busy']} case run(s) on a busy machine"] if left["busy"] else [])
    return f"; left out: {', '.join(parts)}" if parts else ""


def floor_for(records: list[RunRecord], where: str, leave_out: frozenset[str],
              platform: str | None) -> NoiseFloor:
    """The learnt floor where the records hold A/A runs, else the platform's default (its
    source saying that none were found)."""
    try:
        return aa_noise(records, where, leave_out)
    except MibenchError:
        fallback = default_floor(platform)
        return NoiseFloor(fallback.value, f"{fallback.source} (no A/A runs in {where} to "
                                          "learn it from)")
