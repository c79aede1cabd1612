"""The timing verdict of one case between two runs (pure: run times in, a record out).

**Why not the timed runs themselves.** A case's timed runs are taken back to back in one
process: they share its machine state (other load, clocks, the memory layout of that
process), so a test that treats them as independent samples calls any drift between two
runs significant. Measured on the 2-core development machine: four runs of one config at
one commit, all six pairs compared with Mann-Whitney U on the timed runs: 5 of 6 were
"significant" regressions of +13% to +30%.

**The sampling unit is one worker process.** Each process's median time per item is one
sample (`runs.processes: N` gives N per run; otherwise the run is one sample). On the log
scale, with m the process medians and k their count on a side:

- the change of time per item is exp(d) - 1, d = mean(ln m_new) - mean(ln m_base) (a ratio
  of geometric means of the process medians; for one process each, of the run medians);
- the variance of one sample on a side is v = max(s2, sf2 + (pi/2) w / n): s2 the spread
  of its process medians (measured with 2 or more processes), sf = ln(1 + noise floor) the
  between-run spread assumed when it cannot be measured, w the within-process variance of
  the log run times and n the runs per process ((pi/2) w / n is the variance of a median);
- se = sqrt(v_base / k_base + v_new / k_new), and the interval is d +- q se at level
  1 - alpha: q the normal quantile, or Student's t with k_base + k_new - 2 degrees of
  freedom where a measured spread s2 set a side's variance;
- the change is significant when the interval excludes 0 (the gate adds the threshold on
  the change itself, harness.judge.compare).

**Noise floor** (the relative standard deviation of one run's median between runs): 10% on
a CPU (`DEFAULT_FLOOR`; the measurement above: pairs of runs differing by up to 30% are
within 10% x sqrt(2) x 2.58), 3% on a GPU or TPU (assumed, not measured), or given
(`mibench compare --noise-floor`), or learnt from artifacts of one commit
(`--noise-from FOLDER`, harness.judge.history.aa_noise). With alpha 0.01 and one process
per run, a CPU case must slow down by about 42% (items/s -29%) to be a significant
regression; with 3 processes per run, by about 22%. No default covers an oversubscribed
machine: three runs of configs/cpu-smoke.yaml at one commit under a load average of 10 on
2 cores had case medians up to 2.7x apart (2 of 6 pairs flagged at the 10% floor); learnt
from those three runs, the floor is 65%.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

METHOD = "between-run interval of the log ratio of median time per item, with a noise floor"
DEFAULT_ALPHA = 0.01
DEFAULT_FLOOR = {"cpu": 0.10}  # by device platform
ACCELERATOR_FLOOR = 0.03  # gpu, tpu and anything else


@dataclasses.dataclass(frozen=True)
class NoiseFloor:
    """The between-run relative standard deviation of one run's median, and where it came
    from (`default for cpu`, `--noise-floor`, `learnt from ...`)."""

    value: float
    source: str


def default_floor(platform: str | None) -> NoiseFloor:
    value = DEFAULT_FLOOR.get(platform or "", ACCELERATOR_FLOOR)
    return NoiseFloor(value, f"default for {platform or 'unknown'} devices")


@dataclasses.dataclass(frozen=True)
class Test:
    """The change of time per item of `new` against `base` and its interval (as ratios)."""

    method: str
    n_base: int  # timed runs
    n_new: int
    k_base: int  # processes (samples of the between-run spread)
    k_new: int
    ratio: float  # exp(d): time per item new / base
    base_s: float  # exp(mean ln m_base): the base side's centre (of what was given, per run)
    new_s: float  # exp(mean ln m_new); new_s / base_s == ratio
    low: float  # interval of the ratio at level 1 - alpha
    high: float
    alpha: float
    floor: float  # the noise floor used
    quantile: str  # "normal" or "t(df)"
    significant: bool

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _log_medians(units: list[list[float]]) -> tuple[list[float], float, float]:
    """ln of each unit's median, the pooled within-unit variance of ln times (0 without
    replicates) and the mean of 1/n over units."""
    logs = [[math.log(t) for t in u] for u in units]
    df = sum(len(u) - 1 for u in logs)
    ss = sum(sum((x - statistics.fmean(u)) ** 2 for x in u) for u in logs if len(u) > 1)
    return ([math.log(statistics.median(u)) for u in units], ss / df if df else 0.0,
            statistics.fmean(1 / len(u) for u in units))


def between_runs(base: list[list[float]], new: list[list[float]], floor: float,
                 alpha: float = DEFAULT_ALPHA) -> Test:
    """The test above on times per item, grouped by worker process (each list one process;
    every time finite and > 0, at least one per process)."""
    from scipy.stats import norm
    from scipy.stats import t as student

    if not base or not new or not all(base) or not all(new):
        raise ValueError("between_runs needs at least one run in every process")
    sf2 = math.log1p(floor) ** 2
    parts, measured = [], False
    for units in (base, new):
        meds, within, inv_n = _log_medians(units)
        v = sf2 + math.pi / 2 * within * inv_n
        s2 = statistics.variance(meds) if len(meds) > 1 else 0.0
        measured |= s2 > v
        parts.append((meds, max(s2, v)))
    (mb, vb), (mn, vn) = parts
    d = statistics.fmean(mn) - statistics.fmean(mb)
    se = math.sqrt(vb / len(mb) + vn / len(mn))
    df = len(mb) + len(mn) - 2
    if se == 0:  # a zero noise floor and identical runs: no spread at all
        low, high = d, d
        quantile = "normal"
    elif measured and df > 0:
        low, high = student.interval(1 - alpha, df, loc=d, scale=se)
        quantile = f"t({df})"
    else:
        low, high = norm.interval(1 - alpha, loc=d, scale=se)
        quantile = "normal"
    low, high = float(low), float(high)
    return Test(method=METHOD, n_base=sum(map(len, base)), n_new=sum(map(len, new)),
                k_base=len(base), k_new=len(new), ratio=math.exp(d),
                base_s=math.exp(statistics.fmean(mb)), new_s=math.exp(statistics.fmean(mn)),
                low=math.exp(low),
                high=math.exp(high), alpha=alpha, floor=floor, quantile=quantile,
                significant=low > 0 or high < 0)
