"""`mibench site HISTORY... --out DIR`: the nightly's history as a self-contained static site
(harness/report/site/), and with `--issue-body FILE` the body of the GitHub issue for the
regressions the last night confirmed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import folder_out, guarded


@guarded
def site(histories: Annotated[list[Path], typer.Argument(
            help="Nightly history folders (`mibench nightly --history DIR`), one per job.")],
         out: Annotated[Path, typer.Option(
             help="The site's folder (replaced whole; a folder of other files is refused).",
             callback=folder_out)],
         issue_body: Annotated[Path | None, typer.Option(
             help="Also write the body of the GitHub issue for the regressions the last "
                  "night confirmed (its first line is the title); no file when there are "
                  "none.")] = None,
         site_url: Annotated[str, typer.Option(
             help="Where the site is published (absolute links in the issue body).")] = ""):
    """The nightly's record as a static site: an overview of every measurement, a page per
    measurement (trend, steps, regressions, ab evidence, runs), every regression with its
    life cycle, and the nights' reports. Works from file:// and any static host."""
    from ..records.io import write_output
    from ..report.renderers import RENDERERS

    built = RENDERERS.lookup("site")(histories, out, site_url=site_url)
    for line in built.notes:
        print(line, file=sys.stderr)
    print(f"site: {built.out / 'index.html'} ({built.measurements} measurement(s), "
          f"{built.regressions} regression(s), {built.pages} page(s))")
    if issue_body is not None:
        if built.issue is None:
            issue_body.unlink(missing_ok=True)
            print("issue: no regression newly confirmed by the last night")
        else:
            write_output(issue_body, built.issue, "the issue body")
            print(f"issue: {issue_body}")
