"""`mibench site HISTORY... --out DIR`: the nightly's record as a self-contained static site
(docs/site.md): HTML pages with their plots as inline SVG, one stylesheet and one small
script in `assets/`, and each night's Markdown reports copied beside their rendered pages.
Nothing is fetched (no CDN, no font, no data request): it works from file:// and from any
static host.

    DIR/index.html                  the overview: a row per measurement
    DIR/cases/<key>.html            a measurement's page
    DIR/regressions.html            every regression with its life cycle
    DIR/assets/                     site.css, site.js
    DIR/reports/<job>/              index.json, ab/*.json, nights/<time>-<sha>/ (*.md, their
                                    pages *.md.html, plots)

`build_site` reads (site/read.py), gathers (site/model.py: the series are `mibench
history`'s) and renders (site/pages.py); the site is written into a folder beside DIR and
moved into place at the end, so DIR holds a whole site or what it held before.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
from pathlib import Path

from mibench.errors import EnvironmentFailed, MibenchError

from ...records.io import why_not_written
from . import pages
from .issue import Found, issue_body, newly_confirmed
from .model import Measurement, measurements, rank
from .read import Job, read_job

MARK = ".mibench-site"  # the file that says a folder is a site mibench may replace


@dataclasses.dataclass(frozen=True)
class Built:
    out: Path
    runs: int
    measurements: int
    regressions: int
    pages: int
    notes: list[str]  # what was left out, one line each
    issue: str | None  # the issue body (None: no regression newly confirmed)


def build_site(histories: list[Path], out: Path, site_url: str = "",
               built: str | None = None) -> Built:
    """The site of the history folders at `out` (the module docstring)."""
    from ...judge.history import build_history

    built = built or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    taken: set[str] = set()
    jobs = [read_job(Path(h), taken) for h in histories]
    ms: list[Measurement] = []
    for job in jobs:
        if job.runs:
            hist = build_history(job.runs, where=str(job.root / "runs"))
            ms += measurements(job, hist.series, hist.floor)
    ms.sort(key=rank)
    by_reg = {(m.slug, r.id): m for m in ms for r in m.regressions}
    regs = [(j.slug, r, by_reg.get((j.slug, r.id))) for j in jobs
            for r in reversed(j.index.regressions)]
    ab_of = {f"{m.slug}/{rid}": [a for a in m.ab if rid in a.behind]
             for m in ms for rid in {i for a in m.ab for i in a.behind}}
    files = {"index.html": pages.overview(ms, jobs, built),
             "regressions.html": pages.regressions_page(regs, jobs, built, ab_of)}
    files |= {f"cases/{m.key}.html": pages.case_page(m, jobs, built) for m in ms}
    tmp = _fresh(out)
    try:
        for name, text in files.items():
            _write(tmp / name, text)
        for f in pages.STATIC.iterdir():
            _copy(f, tmp / "assets" / f.name)
        for job in jobs:
            _reports(job, tmp / "reports" / job.slug, jobs, built)
        _write(tmp / MARK, "a site written by `mibench site`: it replaces this folder whole\n")
        _swap(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    found = [Found(history=str(j.root), slug=j.slug, index=j.index,
                   regs=newly_confirmed(j.index),
                   pages={r.id: f"cases/{by_reg[(j.slug, r.id)].key}.html"
                          for r in j.index.regressions if (j.slug, r.id) in by_reg},
                   summary=_summary_page(j)) for j in jobs]
    return Built(out=out, runs=sum(len(j.runs) for j in jobs), measurements=len(ms),
                 regressions=len(regs), pages=len(files),
                 notes=[f"{j.root}: {line}" for j in jobs for line in j.notes],
                 issue=issue_body(found, site_url))


def _summary_page(job: Job) -> str:
    night = job.index.nights[-1] if job.index.nights else None
    if night is None or night.summary not in job.files:
        return ""
    return pages.reports_href(job.slug, night.summary)


def _reports(job: Job, to: Path, jobs: list[Job], built: str) -> None:
    """The job's index, A/B runs and nights' files, each Markdown file with its page."""
    _copy(job.root / "index.json", to / "index.json")
    available = job.files | {p for p, _ in job.ab} | {"index.json"}
    for rel, _ in job.ab:
        _copy(job.root / rel, to / rel)
    for rel in sorted(job.files):
        _copy(job.root / rel, to / rel)
        if rel.endswith(".md"):
            text = (job.root / rel).read_text(errors="replace")
            _write(to / f"{rel}.html",
                   pages.markdown_page(text, rel, available, job.slug, jobs, built))


def _fresh(out: Path) -> Path:
    """A new folder beside `out` to build in; a MibenchError when `out` is something other
    than a site mibench wrote (a file, or a folder with other files in it)."""
    out = Path(out)
    if out.exists() and not (out.is_dir() and ((out / MARK).is_file() or not any(out.iterdir()))):
        raise MibenchError("exists and is not a site `mibench site` wrote (it would be "
                           "replaced whole): give a new folder or an earlier site's",
                           field="--out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f".{out.name}.part-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as e:
        raise EnvironmentFailed(f"cannot write the site: {why_not_written(e)}",
                                field=str(out)) from None
    return tmp


def _swap(tmp: Path, out: Path) -> None:
    """`tmp` becomes `out`; what `out` held goes (it was a site: `_fresh` checked)."""
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    try:
        if out.exists():
            out.rename(old)
        tmp.rename(out)
    except OSError as e:
        if old.exists() and not out.exists():
            old.rename(out)
        raise EnvironmentFailed(f"cannot write the site: {why_not_written(e)}; it holds "
                                "what it held before", field=str(out)) from None
    shutil.rmtree(old, ignore_errors=True)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise EnvironmentFailed(f"cannot write the site: {why_not_written(e)}; the site "
                                "folder holds what it held before", field=str(path)) from None


def _copy(src: Path, dst: Path) -> None:
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    except OSError as e:
        raise EnvironmentFailed(f"cannot copy {src} into the site: {why_not_written(e)}",
                                field=str(dst)) from None
