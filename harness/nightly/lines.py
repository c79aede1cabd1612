"""What a night says beside its verdicts (pure: judgements and findings in, lines out):
what was left open and the command that decides it, the culprits, a run of undecided
nights, a noise floor wider than the threshold with the `ab` rounds that can judge at it,
and the report's section of `ab` evidence beside the unpaired figures."""

from __future__ import annotations

from ..judge.nightly import FIX, Judgement
from ..judge.noise import AAGroups
from ..judge.settle import Measured
from ..records import RunRecord
from ..records.nightly import Culprit, NightlyIndex
from ..stats import sequential as seq
from ..verdicts import KNOWN_REGRESSION, UNDECIDED_WORDS


def _rounds_to_decide(found: Measured, case_id: str, threshold: float, fallback: int) -> int:
    """The `ab` rounds that would decide a case: from the spread of its rounds so far (at
    least four times what it had), else `fallback`."""
    if case_id not in found.cases or found.cases[case_id][0].timing is None:
        return fallback
    d = found.cases[case_id][0].timing.round_log_ratios
    sd = seq.spread(list(d))
    if sd is None:
        return fallback
    return max(seq.rounds_needed(sd, threshold), 4 * len(d))


def left_open(steps, js: list[Judgement], found: Measured, commit: str, threshold: float,
              most_rounds: int) -> list[str]:
    """A line for each case no evidence decided (and each suspicion `ab` was to decide):
    why, and the command that decides it."""
    out = []
    for j in js:
        measured = j.case_id in found.cases
        unchecked_fix = j.verdict == KNOWN_REGRESSION and j.purpose == FIX and not measured
        if j.confirm is None or not (j.verdict in UNDECIDED_WORDS or unchecked_fix):
            continue
        if measured:
            rounds = found.cases[j.case_id][1].rounds
            why = f"`ab` left it {found.cases[j.case_id][0].verdict} at {rounds} rounds"
        else:
            why = found.stopped.get(j.case_id, "not measured")
        more = _rounds_to_decide(found, j.case_id, threshold, most_rounds * 4)
        out.append(f"`{j.case_id}`: {why}; decide with "
                   f"`{steps.ab_command(j.confirm, commit, [j.case_id], more)}`")
    return out


def blind_note(streak: int, js: list[Judgement], found: Measured, steps, commit: str,
               threshold: float, most_rounds: int) -> str:
    """The line of a night that ends a run of undecided nights (the job fails)."""
    cases = [j for j in js if j.verdict in UNDECIDED_WORDS]
    named = ", ".join(
        f"`{j.case_id}` ({_rounds_to_decide(found, j.case_id, threshold, most_rounds * 4)} "
        "rounds)" for j in cases[:3]) + (", ..." if len(cases) > 3 else "")
    first = cases[0]
    command = steps.ab_command(first.confirm or commit, commit, [first.case_id],
                               _rounds_to_decide(found, first.case_id, threshold,
                                                 most_rounds * 4)) if first.confirm else ""
    return (f"**Blind for {streak} nights**: each left cases undecided, so no night could "
            f"vouch for them and the baseline has not moved: {named} (the `ab` rounds that "
            f"would decide each at {threshold:.0%})" + (f"; e.g. `{command}`" if command
                                                        else "") + " (exit 5)")


def noise_note(aa: AAGroups, new: RunRecord, where: str, threshold: float,
               found: Measured) -> list[str]:
    """A line when the noise floor learnt from the history (`aa`: its A/A groups) is wider
    than the threshold: `compare` cannot judge at it, so every case goes to `ab`; with the
    rounds that can."""
    floor = aa.floor_or_default(where, frozenset({new.run_id}),
                                new.provenance.devices.platform)
    if floor.value <= threshold:
        return []
    sds = [sd for case, _ in found.cases.values() if case.timing is not None
           and (sd := seq.spread(list(case.timing.round_log_ratios))) is not None]
    rounds = (f"; at the spread of tonight's `ab` rounds (log-sd {max(sds):.3f} a round) "
              f"about {seq.rounds_needed(max(sds), threshold)} rounds judge at "
              f"{threshold:.0%}" if sds else "")
    return [f"The noise floor learnt from the history, {floor.value:.0%} ({floor.source}), is "
            f"wider than the {threshold:.0%} threshold: between runs `compare` cannot tell a "
            f"change of that size, so every case goes to `ab`{rounds}"]


def culprit_lines(index: NightlyIndex, js: list[Judgement], known: list) -> list[Culprit]:
    """The new culprits, then the known regressions still present (one line a commit)."""
    out: dict[tuple, Culprit] = {}
    present = {j.case_id for j in js if j.verdict == KNOWN_REGRESSION}
    new_ids = {k.id for k in known}
    entries = [(k, False) for k in known] + [(k, True) for k in index.open_known()
                                             if k.id not in new_ids and k.case_id in present]
    for k, old in entries:
        named = k.culprits or ([None] if k.culprit is None else [])
        for c in named:
            commit = c.commit if c is not None else f"{k.good[:12]}..{k.bad[:12]}"
            key = (commit, old)
            if key not in out:
                out[key] = Culprit(
                    commit=commit, subject=(c.subject if c is not None else None)
                    or k.subject or "no first bad commit named", known=old,
                    partial=c.partial if c is not None else False,
                    bisect=k.bisect if not old else
                    f"confirmed {k.confirmed_at[:10]}; not bisected again")
            out[key].cases.append(k.case_id)
    return list(out.values())


def evidence_section(js: list[Judgement]) -> str:
    """The night's report's section: each case `ab` measured, its unpaired figure (the run
    against the baseline) beside `ab`'s paired one."""
    rows = [j for j in js if j.source.startswith("ab")]
    if not rows:
        return ""
    lines = ["", "## The night's A/B evidence", "",
             "The run against the baseline (`compare`: two runs of different nights, "
             "unpaired) beside `ab` (both commits interleaved on this machine, paired "
             "rounds): the night's word comes from `ab` where it measured the case. Time per "
             "item (per call for `ab`), `+` = slower.", "",
             "| case | the run vs the baseline | `ab` | from | word |",
             "|---|---:|---:|---|---|"]
    for j in rows:
        lines.append(f"| `{j.case_id}` | {_span(j.run_change, j.run_low, j.run_high)} | "
                     f"{_span(j.change, j.low, j.high)} | {j.source} | {j.verdict} |")
    return "\n".join(lines) + "\n"


def _span(x: float | None, lo: float | None, hi: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:+.1%} [{lo:+.1%}, {hi:+.1%}]" if lo is not None else f"{x:+.1%}"
