"""Bisect's sequential test (harness/stats/sequential.py) and its search (harness/ab/search.py
`Searcher`), on thousands of seeded synthetic searches: pure Python, no process started.

Each search has 8 commits after GOOD; the culprit's position is drawn at random, and each
round of a commit against GOOD is its level (0 before the culprit, D from it on) plus noise
(normal, or Student's t with 3 degrees of freedom: heavy tails as a noisy machine gives).
The rates are the test's error rates: a wrong culprit named, none named (undecided)."""

from __future__ import annotations

import math
import random

import pytest

from mibench.errors import MibenchError
from mibench.harness.ab.search import Searcher, search
from mibench.harness.stats import sequential as seq

BAD_2_8X = math.log(2.8)  # the nightly scenario's regression


def noise(rng: random.Random, sigma: float, heavy: bool) -> float:
    if not heavy:
        return rng.gauss(0, sigma)
    chi = sum(rng.gauss(0, 1) ** 2 for _ in range(3))  # t(3), scaled to sd sigma
    return sigma * rng.gauss(0, 1) / math.sqrt(chi / 3) / math.sqrt(3)


def simulate(n: int, *, sigma: float, heavy: bool = False, seed: int = 0, d: float = BAD_2_8X,
             culprits: tuple[float, ...] | None = None, rule=None, rounds: int = 5,
             most: int = 20, threshold: float = 0.10) -> dict:
    """`n` searches; `culprits`: fixed (position, level) steps instead of one random one;
    `rule`: a step classifier other than the sequential test's (a control)."""
    rng = random.Random(seed)
    out = {"right": 0, "wrong": 0, "undecided": 0, "rounds": 0}
    for _ in range(n):
        steps = culprits or ((rng.randint(1, 8), d),)
        shas = [f"c{i}" for i in range(9)]

        def measure(commit: str, k: int, steps=steps, shas=shas) -> tuple[dict, dict]:
            out["rounds"] += k
            i = shas.index(commit)
            level = sum(jump for at, jump in steps if i >= at)
            return {"x": [level + noise(rng, sigma, heavy) for _ in range(k)]}, {}

        s = Searcher(good="c0", commits=shas[1:], measure=measure, tree=lambda c: c,
                     rounds=rounds, most_rounds=most, threshold=threshold)
        if rule is not None:
            s.judge_step = rule.__get__(s)
        found = search(s, ["x"])
        named = [c["commit"] for c in found["culprits"]]
        if found["verdict"] != "found":
            out["undecided"] += 1
        elif named == [f"c{at}" for at, _ in steps]:
            out["right"] += 1
        else:
            out["wrong"] += 1
    return out


@pytest.mark.parametrize("sigma,heavy", [(0.05, False), (0.3, False), (0.3, True)])
def test_the_culprit_is_named_with_few_wrong_under_noise(sigma, heavy):
    """A 2.8x regression, rounds with a log-sd of 5% or 30% (normal or heavy-tailed): no
    more wrong culprits than the test's bound (a search of about 4 steps, alpha 0.01 each:
    4%), measured far below it; and most searches decide."""
    got = simulate(1000, sigma=sigma, heavy=heavy, seed=int(sigma * 100) + heavy)
    assert got["wrong"] <= 5, got  # 0.5%: the measured rate is 0-0.1%
    assert got["right"] >= 950, got


def test_a_small_change_is_found_too():
    got = simulate(500, sigma=0.1, d=math.log(1.3), seed=7)
    assert got["wrong"] <= 3 and got["right"] >= 450, got


def test_two_regressing_commits_are_both_named():
    """+40% at commit 3 and +40% more at commit 6: the commit between them sits at the
    midpoint, the case a search by midpoint alone gets wrong."""
    steps = ((3, math.log(1.4)), (6, math.log(1.4)))
    got = simulate(500, sigma=0.1, culprits=steps, seed=3)
    assert got["wrong"] <= 5 and got["right"] >= 475, got


def test_a_very_noisy_machine_leaves_it_undecided_rather_than_wrong():
    got = simulate(300, sigma=0.6, heavy=True, seed=11)
    assert got["wrong"] <= 2, got
    assert got["undecided"] > 0


def equivalence_rule(self, commit, levels, cases):
    """The control: the rule before (a step cleared only when its interval lies within the
    threshold of GOOD, a regression when surely beyond it), on the same rounds."""
    margin = self.margin

    def judge():
        d = self.evidence.get(self.tree(commit), {}).get("x", [])
        found = seq.interval(d, self.alpha)
        if found is None:
            return seq.UNDECIDED
        _, lo, hi = found
        if lo > margin:
            return seq.HIGH
        if -margin <= lo and hi <= margin:
            return seq.LOW
        return seq.UNDECIDED

    word = self.decide(commit, cases, judge)
    self.record(commit, word, cases)
    return word


def test_the_control_proving_equivalence_to_good_stays_undecided_on_a_noisy_machine():
    """What the issue measured: telling +0% from +183% is easy on a noisy machine, proving
    a no-op commit within 10% of GOOD is not. The same searches with the old rule name far
    fewer culprits, so the rates above are the new test's."""
    new = simulate(300, sigma=0.3, seed=5)
    old = simulate(300, sigma=0.3, seed=5, rule=equivalence_rule)
    assert new["right"] >= 285
    assert old["undecided"] > 100 and old["right"] < new["right"] - 100, (old, new)


def make(levels: list[float], trees: list[str] | None = None, sigma: float = 0.02):
    """A searcher over fixed levels (commit i at levels[i]; levels[0] is GOOD's)."""
    rng = random.Random(0)
    shas = [f"c{i}" for i in range(len(levels))]
    measured: list[str] = []

    def measure(commit, k):
        measured.append(commit)
        return {"x": [levels[shas.index(commit)] + rng.gauss(0, sigma) for _ in range(k)]}, \
            {"x": "ab line"}

    tree = (lambda c: trees[shas.index(c)]) if trees else (lambda c: c)
    return Searcher(good="c0", commits=shas[1:], measure=measure, tree=tree, rounds=5,
                    most_rounds=20, threshold=0.05), measured


def test_commits_that_do_not_change_the_measured_code_are_not_measured():
    d = math.log(2)
    s, measured = make([0, 0, 0, d, d, d, d], trees=["a", "a", "b", "c", "c", "c", "c"])
    found = search(s, ["x"])
    # candidates: c2 (a -> b) and c3 (b -> c); c1, c4-c6 sit at their parent's level
    assert found["first_bad"] == "c3" and found["skipped"] == 4
    assert set(measured) <= {"c6", "c2"}  # BAD (c6, tree c) and the one step between


def test_the_only_candidate_is_named_without_a_run():
    d = math.log(2)
    s, measured = make([0, 0, d, d], trees=["a", "a", "b", "b"])
    found = search(s, ["x"])
    assert found["first_bad"] == "c2" and measured == ["c3"]  # BAD's own rounds only
    assert found["how"] == "the only commit that changes the measured code"


def test_a_revert_to_goods_code_takes_goods_level_and_bad_with_goods_code_is_refused():
    d = math.log(2)
    s, measured = make([0, d, 0, d, d], trees=["a", "b", "a", "c", "c"])
    found = search(s, ["x"])
    assert found["first_bad"] == "c3"
    assert any(st["same_as"] == "c0" for st in found["steps"])  # c2: GOOD's code
    s, _ = make([0, 0, 0], trees=["a", "b", "a"])
    with pytest.raises(MibenchError, match="same measured code"):
        search(s, ["x"])


@pytest.mark.parametrize("mean,word", [(0.0, seq.LOW), (1.0, seq.HIGH), (0.5, seq.BETWEEN)])
def test_classify_by_level_with_a_wide_step_undecided(mean, word):
    good, bad = seq.GOOD_LEVEL, seq.Level(1.0, 0.95, 1.05)
    tight = [mean + x for x in (-0.01, 0.0, 0.01, 0.005, -0.005)]
    assert seq.classify(tight, good, bad, math.log1p(0.05), 0.01, 3) == word
    wide = [mean + x for x in (-0.9, 0.9, 0.0)]
    assert seq.classify(wide, good, bad, math.log1p(0.05), 0.01, 3) == seq.UNDECIDED


def test_looks_double_up_to_the_most_rounds():
    assert seq.looks(5, 20) == [5, 10, 20] and seq.looks(5, 39) == [5, 10, 20]
    assert seq.looks(2, 8) == [3, 6]  # at least 3 rounds for an interval
