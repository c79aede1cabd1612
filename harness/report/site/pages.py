"""The site's pages (Jinja2 templates in `site/templates/`, HTML autoescaped): the
overview, a page per measurement, the regressions page, and each night's Markdown report
rendered to a page beside its copy (the Markdown stays the review format; the rendered
page is there so a browser or a static host shows it, its links and plots rewritten to
the copies in the site).

Every function takes the site's records (site/model.py) and returns text; writing is
site/__init__.py's.
"""

from __future__ import annotations

import functools
import posixpath
import re
from pathlib import Path

from ...records.nightly import Regression
from ..marks import drawn_steps
from ..plots import verdict_class
from . import svg
from .model import Measurement, interval

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"
STATUS_ORDER = ("confirmed", "suspected", "accepted", "fixed", "disproved")


@functools.cache
def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters |= {"interval": interval, "vclass": lambda w: verdict_class(w) or "none",
                    "pct": lambda x: "-" if x is None else f"{x:+.1%}",
                    "share": lambda x: "-" if x is None else f"{x:.0%}",
                    "num": lambda x: "-" if x is None else f"{x:,.4g}",
                    "short": lambda c: (c or "")[:12]}
    return env


def render(name: str, **context) -> str:
    return _env().get_template(name).render(**context)


def reports_href(m_or_slug, path: str) -> str:
    """A history folder's file as the site holds it, from the site's root (a Markdown file
    as its rendered page)."""
    slug = m_or_slug if isinstance(m_or_slug, str) else m_or_slug.slug
    return f"reports/{slug}/{path}" + (".html" if path.endswith(".md") else "")


def overview(ms: list[Measurement], jobs: list, built: str) -> str:
    rows = [dict(m=m, spark=svg.sparkline([r.items_per_s for r in m.runs], m.verdict),
                 text=" ".join([m.config, m.case_id, m.label, m.what, m.verdict,
                                *(c.commit for r in m.regressions for c in r.culprits)]
                               ).lower())
            for m in ms]
    words = sorted({m.verdict for m in ms}, key=lambda w: [m.verdict for m in ms].index(w))
    return render("overview.html.j2", root="", title="Overview", rows=rows, words=words,
                  jobs=jobs, built=built, many=len(jobs) > 1,
                  open=sum(m.open is not None for m in ms))


def plotted_steps(m: Measurement) -> list:
    """The steps the case page's trend draws (marks.drawn_steps: found with a verdict,
    between two commits); the page's tables keep every one."""
    quiet = [r.items_per_s is not None and not r.busy for r in m.runs]
    return drawn_steps(m.steps, [r.commit or r.short for r in m.runs], quiet)


def case_page(m: Measurement, jobs: list, built: str) -> str:
    plot = svg.trend(m.runs, plotted_steps(m), m.flags, m.envs)
    return render("case.html.j2", root="../", title=m.case_id, m=m, plot=plot, jobs=jobs,
                  built=built, href=lambda p: "../" + reports_href(m, p))


def regressions_page(regs: list[tuple[str, Regression, Measurement | None]], jobs: list,
                     built: str, ab_of: dict[str, list]) -> str:
    """Every regression of every history, newest first: (slug, regression, its
    measurement's page or None)."""
    statuses = [s for s in STATUS_ORDER if any(r.status == s for _, r, _ in regs)]
    items = [dict(slug=slug, r=r, m=m, ab=ab_of.get(f"{slug}/{r.id}", []),
                  text=" ".join([r.case_id, r.id, r.status, r.kind, r.verdict,
                                 *(c.commit for c in r.culprits),
                                 r.accepted.by if r.accepted else "",
                                 r.accepted.why if r.accepted else ""]).lower())
             for slug, r, m in regs]
    return render("regressions.html.j2", root="", title="Regressions", items=items,
                  statuses=statuses, jobs=jobs, built=built, many=len(jobs) > 1,
                  href=reports_href)


def markdown_page(text: str, where: str, available: frozenset[str], slug: str,
                  jobs: list, built: str) -> str:
    """A history's Markdown file (`where`, relative to its folder) as a page of the site,
    its links and images pointing at the site's copies (`available`, relative to the
    history folder; a Markdown file at its rendered page), else left as plain text."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    for tok in tokens:
        for child in tok.children or []:
            key = {"link_open": "href", "image": "src"}.get(child.type)
            if key:
                new = _relink(child.attrGet(key) or "", where, available)
                if new is None and child.type == "link_open":
                    child.attrSet("href", "#")
                    child.attrSet("class", "gone")
                    child.attrSet("title", "not in this site")
                elif new is not None:
                    child.attrSet(key, new)
    body = md.renderer.render(tokens, md.options, {})
    depth = where.count("/") + 2  # reports/<slug>/<where>
    return render("markdown.html.j2", root="../" * depth, title=where, body=body,
                  source=posixpath.basename(where), jobs=jobs, built=built, slug=slug)


def _relink(href: str, where: str, available: frozenset[str]) -> str | None:
    """The link as the site holds it, relative to the page (None: not in the site)."""
    if not href or href.startswith("#") or re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I):
        return href
    path, _, anchor = href.partition("#")
    here = posixpath.dirname(where)
    for candidate in (posixpath.normpath(posixpath.join(here, path)), posixpath.normpath(path)):
        if candidate in available:
            out = posixpath.relpath(candidate, here or ".")
            out += ".html" if candidate.endswith(".md") else ""
            return out + (f"#{anchor}" if anchor else "")
    return None
