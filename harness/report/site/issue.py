"""The body of the GitHub issue a nightly job opens (or updates) for a regression its last
night confirmed (`mibench site ... --issue-body FILE`; .github/workflows/nightly.yml
passes it to `gh`). Its first line is the issue's title (`### ...`): the workflow finds an
open issue of that title and updates it, else opens one, so a job run again on the same
night never opens a second issue."""

from __future__ import annotations

import dataclasses
import datetime as dt
import shlex

from ...records.nightly import NightlyIndex, Regression
from ...util import parse_time
from .model import interval


def newly_confirmed(index: NightlyIndex) -> list[Regression]:
    """The regressions the index's last night confirmed that are still open."""
    if not index.nights:
        return []
    last = index.nights[-1]
    since = _time(index.nights[-2].at) if len(index.nights) > 1 else None
    return [r for r in index.regressions if r.is_open and any(
        e.status == "confirmed" and e.commit == last.commit
        and (since is None or _time(e.at) > since) for e in r.events)]


def _time(iso: str) -> dt.datetime:
    t = parse_time(iso)
    if t is None:
        raise ValueError(f"not an ISO time: {iso!r}")
    return t


@dataclasses.dataclass(frozen=True)
class Found:
    """A job's newly confirmed regressions: its history folder (as given), its name in
    the site, its index, the regressions, and each one's case page in the site."""

    history: str
    slug: str
    index: NightlyIndex
    regs: list[Regression]
    pages: dict[str, str]  # regression id -> cases/<key>.html
    summary: str = ""  # the night's summary page in the site ("": not in it)


def issue_body(found: list[Found], site_url: str = "") -> str | None:
    """The issue's Markdown for the newly confirmed regressions of each job; None when
    there are none. Links are absolute with `site_url`, else relative to the site's
    folder."""
    found = [f for f in found if f.regs]
    if not found:
        return None
    base = site_url.rstrip("/") + "/" if site_url else ""
    heads = [f"`{f.index.config}` at `{f.index.nights[-1].commit[:12]}`" for f in found]
    n = sum(len(f.regs) for f in found)
    lines = [f"### mibench nightly: {n} regression(s) confirmed, {', '.join(heads)}", "",
             "<!-- written by `mibench site --issue-body`; the job updates this issue when it "
             "runs again on the same night -->"]
    for f in found:
        index, regs, pages, night = f.index, f.regs, f.pages, f.index.nights[-1]
        lines += ["", f"**`{index.config}`**, night of `{night.commit[:12]}` "
                      f"{night.subject!r} (judged against `{regs[0].good[:12]}`)", "",
                  "| case | change (time) [interval] | from | culprit |", "|---|---|---|---|"]
        for r in regs:
            culprit = ", ".join(f"`{c.commit[:12]}` {c.subject!r}" + (" (part)" if c.partial
                                                                     else "")
                                for c in r.culprits) or f"not named ({r.bisect or '-'})"
            page = pages.get(r.id)
            case = f"[`{r.case_id}`]({base}{page})" if page else f"`{r.case_id}`"
            lines.append(f"| {case} | {interval(r)} | {r.source or '-'} | {culprit} |")
        lines.append("")
        for r in regs:
            if r.reproduce:
                lines.append(f"- Reproduce `{r.case_id}`: `{r.reproduce}`")
        glob = shlex.quote(regs[0].case_id)
        lines.append(f"- Intended? `mibench accept {shlex.quote(f.history)} --case {glob} "
                     "--by WHO --why TEXT` (the nightly then judges it from this level)")
        if f.summary:
            lines.append(f"- The night's summary: [summary]({base}{f.summary})")
    lines += ["", f"Every regression and its life cycle: [regressions]({base}regressions.html)"
                  f" · [overview]({base}index.html)"]
    return "\n".join(lines) + "\n"
