"""The between-run noise floor learnt from A/A runs (pure: records in, a NoiseFloor out):
`mibench compare --noise-from DIR` and `mibench history` learn it from repeated runs of one
commit in a folder, instead of assuming the platform's default.

Artifacts of one commit that measured the same case as the same measurement
(harness.judge.comparable.measurement; dirty checkouts too: what they changed can only
widen the spread, never narrow it) form a group. Each artifact's median run time of a case
is one value; s2 = the sum of squared deviations of their logs from their group's mean over
df = the sum of (group size - 1); the floor is exp(s) - 1 with s the 90% upper confidence
limit of the standard deviation, sqrt(s2 df / chi2_0.10(df)), so a few A/A runs give a
wide floor and many a tight one.

Left out, and said so in `NoiseFloor.source`: the artifacts being judged (`leave_out`: the
pair a comparison or a step is about, so its own difference never widens the floor that
judges it), and case runs measured on a busy machine (harness.judge.busy: other processes
held more than the busy level of the CPU), whose spread is the neighbours', not the code's;
and a second artifact of one run (harness.judge.duplicates: a run and its copy would be an
A/A pair of no spread).
"""

from __future__ import annotations

import math
import operator
import statistics
from collections import Counter, defaultdict

from mibench.errors import MibenchError

from ..records import RunRecord
from ..stats.significance import NoiseFloor, default_floor
from .busy import BUSY_LEVEL, busy
from .comparable import code_git, measurement_id
from .duplicates import unique_runs

AA_CONFIDENCE = 0.90  # the learnt floor is this one-sided upper confidence limit


def aa_noise(records: list[RunRecord], where: str, leave_out: frozenset[str] = frozenset(),
             busy_level: float = BUSY_LEVEL) -> NoiseFloor:
    """The floor learnt from the A/A runs among `records` (see the module docstring),
    leaving out the artifacts whose run id is in `leave_out`; a MibenchError naming
    `--noise-from WHERE` when no A/A group is left."""
    return AAGroups(records, busy_level).floor(where, leave_out)


class AAGroups:
    """The A/A groups of `records`, read once: `floor(where, leave_out)` is `aa_noise`'s
    answer without reading the records again. Each group keeps its values and its sum of
    squared deviations; leaving out a pair recomputes only the groups that hold it, then
    adds one sum per group in the order `aa_noise` always added them (the order the groups
    first appear in), so the floor is the same to the last bit."""

    def __init__(self, records: list[RunRecord], busy_level: float = BUSY_LEVEL):
        # group -> [(its place among all values, run id, log of the case's median run time)]
        self.groups: dict[tuple, list[tuple[int, str, float]]] = defaultdict(list)
        self.keys: dict[str, set[tuple]] = defaultdict(set)  # run id -> its groups
        self.artifacts = {r.run_id for r in records}
        self.busy: Counter = Counter()  # run id -> its case runs on a busy machine
        place = 0
        records, self.again = unique_runs(records)  # one run is one point
        for r in records:
            commit = code_git(r).commit
            if not commit:
                continue
            for c in r.cases:
                if c.status != "ok" or not c.timed_s or not all(t > 0 for t in c.timed_s):
                    continue
                if busy(c.load, busy_level):
                    self.busy[r.run_id] += 1
                    continue
                key = (commit, c.case_id, measurement_id(r, c))
                self.groups[key].append((place, r.run_id,
                                         math.log(statistics.median(c.timed_s))))
                self.keys[r.run_id].add(key)
                place += 1
        # every group of two or more: (first place, sum of squares, size, key), by place
        self.used = [_term(k, g) for k, g in self.groups.items() if len(g) > 1]
        self.df = sum(n - 1 for _, _, n, _ in self.used)

    def floor(self, where: str, leave_out: frozenset[str] = frozenset()) -> NoiseFloor:
        """`aa_noise(records, where, leave_out)` (a MibenchError when no A/A group is
        left)."""
        from scipy.stats import chi2

        hit = set().union(*(self.keys.get(run, ()) for run in leave_out))
        used, df = self.used, self.df
        if hit:
            used = [u for u in self.used if u[3] not in hit]
            df -= sum(len(self.groups[k]) - 1 for k in hit if len(self.groups[k]) > 1)
            for k in hit:
                kept = [v for v in self.groups[k] if v[1] not in leave_out]
                if len(kept) > 1:
                    used.append(_term(k, kept))
                    df += len(kept) - 1
            used.sort(key=_first)  # the order the groups first appear in
        left = {"judged": len(self.artifacts.intersection(leave_out)), "again": len(self.again),
                "busy": sum(self.busy.values()) - sum(self.busy[run] for run in leave_out)}
        if not df:
            raise MibenchError("holds no A/A runs: two or more artifacts of one commit "
                               "measuring the same case on a machine that was not "
                               f"busy{_left(left)}", field=f"--noise-from {where}")
        ss = sum([s for _, s, _, _ in used])
        sd = math.sqrt(ss / chi2.ppf(1 - AA_CONFIDENCE, df))
        runs = df + len(used)
        return NoiseFloor(math.expm1(sd), f"learnt from A/A runs in {where}: {runs} case runs "
                                          f"in {len(used)} groups, {df} degrees of freedom, "
                                          f"{AA_CONFIDENCE:.0%} upper limit{_left(left)}")

    def floor_or_default(self, where: str, leave_out: frozenset[str],
                         platform: str | None) -> NoiseFloor:
        """`floor_for(records, ...)`: the learnt floor, else the platform's default."""
        try:
            return self.floor(where, leave_out)
        except MibenchError:
            fallback = default_floor(platform)
            return NoiseFloor(fallback.value, f"{fallback.source} (no A/A runs in {where} to "
                                              "learn it from)")


def _term(key: tuple, values: list[tuple[int, str, float]]) -> tuple[int, float, int, tuple]:
    """A group's (first place, sum of squared deviations from its mean, size, key), the sum
    taken as `aa_noise` always took it."""
    logs = [x for *_, x in values]
    mean = statistics.fmean(logs)
    return values[0][0], sum((x - mean) ** 2 for x in logs), len(logs), key


_first = operator.itemgetter(0)


def _left(left: dict[str, int]) -> str:
    """`; left out: the 2 artifacts judged, 3 case runs on a busy machine, 1 second
    artifact of a run`."""
    parts = ([f"the {left['judged']} artifact(s) judged"] if left["judged"] else []) + (
        [f"{left['busy']} case run(s) on a busy machine"] if left["busy"] else []) + (
        [f"{left['again']} second artifact(s) of a run"] if left.get("again") else [])
    return f"; left out: {', '.join(parts)}" if parts else ""


def floor_for(records: list[RunRecord], where: str, leave_out: frozenset[str],
              platform: str | None) -> NoiseFloor:
    """The learnt floor where the records hold A/A runs, else the platform's default (its
    source saying that none were found)."""
    return AAGroups(records).floor_or_default(where, leave_out, platform)
