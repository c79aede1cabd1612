"""The one verdict vocabulary (docs/verdicts.md): every word that `compare`, `ab`, `report`,
`history` and the nightly loop print or store for a case, a step or a whole comparison,
with what it means. Each command imports its words from here, so a word means the same on
screen, in Markdown and in JSON; a test checks docs/verdicts.md lists exactly these.

Every change that goes with a word is one convention: time per item (or per call), new /
base - 1, `+` = slower.
"""

from __future__ import annotations

from typing import NamedTuple

# --- a timing change between two sides ------------------------------------------------
REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
INCONCLUSIVE = "inconclusive"
UNTESTED = "untested"
NOT_COMPARABLE = "not comparable"
SUSPICIOUS_IMPROVEMENT = "suspicious improvement"

TIMING = {
    REGRESSION: "slower by more than the threshold, the interval above 0, both sides "
                "measured on a machine that was not busy (`ab`: paired rounds, exempt)",
    IMPROVEMENT: "faster by more than the threshold, the interval below 0, neither side busy",
    UNCHANGED: "the whole interval lies within +-threshold, neither side busy",
    NOT_COMPARABLE: "not the same measurement (case id, workload, model, dtype, topology, "
                    "hardware): the fields that differ are named",
    SUSPICIOUS_IMPROVEMENT: "an improvement of 2x or more (compare, ab, the nightly) without "
                            "the new side's `modes`/`engines` parity against the reference "
                            "having run and passed (a mode that scores nothing is fast): "
                            "named first, exit 0, never moves a nightly baseline without "
                            "`accept` (harness/judge/suspicious.py)",
}

# --- cannot tell: the undecided words, one definition each ------------------------------
INSUFFICIENT_DATA = "insufficient data"


class Undecided(NamedTuple):
    """A word for "cannot tell": when a case gets it, and what would decide it."""

    when: str
    decides: str


UNDECIDED = {
    INCONCLUSIVE: Undecided(
        "a change between two sides (`compare`, `report`, a `history` step, `ab`, a `bisect` "
        "step, a night) whose interval reaches beyond +-threshold, or (between runs) a side "
        "measured on a busy machine; its reason names which",
        "`mibench ab` (paired rounds on one machine, exempt from the busy rule); for `ab` and "
        "`bisect` more rounds (`--rounds`, `--max-rounds`); between runs also more "
        "`runs.processes` or a noise floor from A/A runs (`--noise-from`)"),
    UNTESTED: Undecided(
        "too few samples for an interval: fewer than 3 timed runs on a side (`compare`, "
        "`report`), fewer than 3 rounds (`ab`); `compare` fails the gate on it (exit 1)",
        "3 or more timed runs (`runs.timed`, e.g. `--set runs.timed=5`) or rounds (`ab "
        "--rounds 5`); `compare --allow-untested` passes the gate without deciding"),
    INSUFFICIENT_DATA: Undecided(
        "a night (`mibench nightly`): too few quiet runs of one commit of the measurement in "
        "the history to learn its noise (or a measurement new to the history), and `ab` did "
        "not decide it; the night keeps the baseline",
        "`ab` between the last passing commit and HEAD (the night runs it while its budget "
        "lasts), or more quiet nights of one commit"),
}
CANNOT_TELL = tuple(UNDECIDED)  # the words, in the order the docs' table lists them

# --- what else `compare` says of a case -------------------------------------------------
SCORES_MOVED = "scores moved"
MEMORY_REGRESSION = "memory regression"
TIMED_COMPILES = "timed compiles"
COLD_START_REGRESSION = "cold start regression"
FAILED = "failed"
MISSING = "missing"
ADDED = "added"
REMOVED = "removed"
FIXED = "fixed"
STILL_FAILING = "still failing"
SKIPPED = "skipped"

CASE = {
    SCORES_MOVED: "scores moved beyond the dtype's tolerance (log scores): a regression",
    MEMORY_REGRESSION: "the case's own peak memory grew beyond the memory threshold and its "
                       "kind's noise: a regression",
    TIMED_COMPILES: "XLA compiled during the new side's timed runs: a regression",
    COLD_START_REGRESSION: "a launched server's launch to ready or first request grew "
                           "beyond the threshold, the interval above 0, neither side busy "
                           "(at least 3 launches a side): a regression",
    FAILED: "ok in the baseline, failed now: a regression",
    MISSING: "ok in the baseline, not measured by a new run that did not finish: a "
             "regression",
    ADDED: "not in the baseline",
    REMOVED: "in the baseline, not in the new (finished) run",
    FIXED: "failed or skipped in the baseline, ok now",
    STILL_FAILING: "failed on both sides",
    SKIPPED: "skipped on a side (this machine lacks what it needs): nothing to compare",
}

# the case verdicts that fail the gate
FAILING = (REGRESSION, SCORES_MOVED, MEMORY_REGRESSION, TIMED_COMPILES, FAILED, MISSING,
           COLD_START_REGRESSION)

# --- the whole comparison (`compare`, `ab`): its outcome and exit code ------------------
PASS = "pass"
NOT_COMPARED = "not compared"

OUTCOME = {
    PASS: "no case failed the gate (exit 0); the headline counts what was compared",
    REGRESSION: "a case or parity check failed the gate (exit 1)",
    UNTESTED: "a case was `untested` (UNDECIDED) and --allow-untested was not given "
              "(exit 1)",
    NOT_COMPARED: "no case was measured ok on both sides as the same measurement (exit 2)",
}
EXIT_CODES = {PASS: 0, REGRESSION: 1, UNTESTED: 1, NOT_COMPARED: 2}

# --- a step in `history` ----------------------------------------------------------------
CHANGE_POINT = "change point"
SUSPECTED_STEP = "suspected step"

HISTORY = {
    CHANGE_POINT: "a change point of the series (binary segmentation, permutation test), "
                  "with at least 3 points on each side",
    SUSPECTED_STEP: "a step of 2x or more between two neighbouring points, beyond the "
                    "noise, with too few points around it for a change point",
}

# --- the nightly loop (a night's verdict per case) --------------------------------------
SUSPECTED_REGRESSION = "suspected regression"
CONFIRMED_REGRESSION = "confirmed regression"
KNOWN_REGRESSION = "known regression"
DISPROVED = "disproved"

NIGHTLY = {
    PASS: "`compare` (or `ab`) shows it within the threshold: the case passes; a night whose "
          "cases all pass moves the baseline",
    SUSPECTED_REGRESSION: "the history says slower beyond the threshold and its noise (or a "
                          "change point after the baseline); `ab` is to confirm it",
    CONFIRMED_REGRESSION: "`ab` between the last passing commit and HEAD confirmed it: the "
                          "night fails",
    KNOWN_REGRESSION: "a confirmed regression not yet fixed or accepted: failing, not "
                      "re-bisected",
    DISPROVED: "`ab` found no regression where the history suspected one: marked, not "
               "chased again",
    IMPROVEMENT: "`ab` confirmed it faster beyond the threshold: kept in the history for a "
                 "look; it moves the baseline only when the new run's `modes`/`engines` "
                 "parity against the reference passed, else it waits for `accept`",
}
# a night's words that decide nothing: the cannot-tell words a night carries, and a suspicion
# still open; the night keeps the baseline and says what would decide each
UNDECIDED_WORDS = (INCONCLUSIVE, INSUFFICIENT_DATA, SUSPECTED_REGRESSION)
# a night's words, the one that needs a look first (the summary's rows, the site's overview)
NIGHT_ORDER = (CONFIRMED_REGRESSION, KNOWN_REGRESSION, FAILED, MISSING, SCORES_MOVED,
               MEMORY_REGRESSION, TIMED_COMPILES, SUSPICIOUS_IMPROVEMENT, SUSPECTED_REGRESSION,
               INCONCLUSIVE, INSUFFICIENT_DATA, IMPROVEMENT, DISPROVED, PASS)

GROUPS = {"undecided": {w: u.when for w, u in UNDECIDED.items()}, "timing": TIMING,
          "case": CASE, "outcome": OUTCOME, "history": HISTORY,
          "nightly": NIGHTLY}
WORDS: dict[str, str] = {w: m for group in GROUPS.values() for w, m in group.items()}


def within(low: float | None, high: float | None, min_effect: float) -> str:
    """`unchanged` when the interval [low, high] of a change lies within +-min_effect,
    else `inconclusive` (no interval: inconclusive)."""
    if low is None or high is None:
        return INCONCLUSIVE
    return UNCHANGED if -min_effect <= low and high <= min_effect else INCONCLUSIVE


def legacy_verdict(verdict: str | None, low: float | None, high: float | None,
                   min_effect: float) -> str | None:
    """An older A/B artifact's `no change` (before mibench.ab/3) as the word it means
    (`within` its interval); every other word is itself."""
    return within(low, high, min_effect) if verdict == "no change" else verdict
