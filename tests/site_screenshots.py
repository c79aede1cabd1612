"""The screenshots of docs/site.md (docs/img/site-*.png): a site built from a nightly history
and photographed in headless chromium (Playwright driving the system's chromium).

    python tests/site_screenshots.py HISTORY docs/img      # a real night's history
    python tests/site_screenshots.py - docs/img            # the made-up one (site_world.py)

The case page shown is the measurement with the most regressions (an open one first)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # site_world, nightly_fakes

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTH = 1280


def main(history: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    from mibench.harness.report.site import build_site

    work = Path(tempfile.mkdtemp(prefix="site-shots-"))
    if history == "-":
        from site_world import make_history

        history = make_history(work)
    built = build_site([Path(history)], work / "site")
    site = built.out
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": WIDTH, "height": 800},
                                device_scale_factor=1)
        page.goto((site / "index.html").as_uri())
        page.screenshot(path=str(out / "site-overview.png"), full_page=True)
        page.locator("#overview a.case").first.click()  # open regressions first
        page.wait_for_load_state("load")
        page.screenshot(path=str(out / "site-case.png"), full_page=True)
        page.goto((site / "regressions.html").as_uri())
        page.screenshot(path=str(out / "site-regressions.png"), full_page=True)
        browser.close()
    print(f"wrote {out}/site-overview.png, site-case.png, site-regressions.png from {history}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
