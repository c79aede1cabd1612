"""`mibench site` in a real browser (issue 42): Debian's chromium driven by Playwright's
Python package (`executable_path`: Playwright never downloads a browser here), one browser
for the module, on a site built from the made-up history of tests/site_world.py (an open
regression, an accepted one, a fixed one, a disproved suspicion). Every test runs twice:
over file:// and over a local HTTP server (127.0.0.1, a free port, stopped by the fixture).

Without chromium (or Playwright) the tests skip with the reason; `.ci/run` sets
MIBENCH_REQUIRE_BROWSER=1, which turns that skip into a failure."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest
from nightly_fakes import EXTEND, PACKED
from site_world import CULPRIT, RUNS, SECOND, WHO, WHY, make_history

from mibench.harness.report.site import build_site

# a browser and the site's server: the fast tier starts neither (tests/conftest.py)
pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("MIBENCH_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REQUIRED = os.environ.get("MIBENCH_REQUIRE_BROWSER") == "1"


def why_no_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the module."""
    why = why_no_browser()
    if why is not None:
        if REQUIRED:
            pytest.fail(f"MIBENCH_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    out = folder / "site"
    build_site([make_history(folder)], out)
    return out


@pytest.fixture(scope="module")
def server(site):
    """The site over HTTP on 127.0.0.1 (a free port), stopped at the end."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


@pytest.fixture(params=["file", "http"])
def root(request, site, server) -> str:
    return site.as_uri() + "/" if request.param == "file" else server


class Visit:
    """A page that records console errors, page errors, failed requests and every request
    that leaves the site's root (those are refused)."""

    def __init__(self, browser, root: str):
        self.root, self.errors, self.outside = root, [], []
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("requestfailed", lambda r: self.errors.append(f"failed: {r.url}"))
        self.page.on("request", self._seen)
        self.page.route("**/*", self._route)

    def _seen(self, request):
        if not request.url.startswith(self.root) and not request.url.startswith("data:"):
            self.outside.append(request.url)

    def _route(self, route):
        if route.request.url.startswith(self.root):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def go(self, path: str):
        self.page.goto(self.root + path)
        self.page.wait_for_load_state("load")
        resources = self.page.evaluate(
            "performance.getEntriesByType('resource').map(e => e.name)")
        self.outside += [r for r in resources if not r.startswith(self.root)]
        return self.page

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, root):
    v = Visit(browser, root)
    yield v
    v.close()


def test_every_page_loads_with_no_console_error_and_no_request_leaving_the_site(visit, site):
    pages = ["index.html", "regressions.html"]
    pages += [f"cases/{p.name}" for p in sorted((site / "cases").iterdir())]
    pages += [str(p.relative_to(site)) for p in sorted(site.glob("reports/*/nights/*/*.md.html"))
              ][:4]
    assert len(pages) >= 6
    for path in pages:
        page = visit.go(path)
        assert page.locator("main").count() == 1, path
    assert visit.errors == [] and visit.outside == []


def test_the_overview_shows_one_row_per_measurement_with_its_verdict(visit):
    page = visit.go("index.html")
    rows = page.locator("#overview tbody tr")
    assert rows.count() == 2
    words = {rows.nth(i).locator("a.case").inner_text():
             rows.nth(i).locator("[data-verdict-cell]").inner_text() for i in range(2)}
    assert words == {EXTEND: "confirmed regression", PACKED: "pass"}
    first = rows.nth(0)  # the open regression first, with its culprit
    assert first.locator("a.case").inner_text() == EXTEND
    assert SECOND[:12] in first.inner_text()
    assert rows.nth(0).locator("svg.spark").count() == 1


def test_clicking_a_case_opens_its_page_whose_plot_has_one_point_per_run(visit):
    page = visit.go("index.html")
    page.get_by_role("link", name=EXTEND).click()
    page.wait_for_load_state("load")
    assert "/cases/" in page.url and page.locator("h1").inner_text().startswith(EXTEND)
    points = page.locator("svg.trend .pt")
    assert points.count() == RUNS
    assert page.locator("svg.trend .pt.busy").count() == 1  # the busy night 8
    assert page.locator("#runs tbody tr").count() == RUNS
    assert page.locator("svg.trend .flag.culprit").count() == 2
    assert page.locator("svg.trend .flag.accepted text").text_content().endswith(WHO)
    assert page.locator("#ab tbody tr").count() >= 2  # the A/B runs behind its findings
    assert visit.errors == [] and visit.outside == []


def test_the_regressions_page_lists_the_culprits_sha_and_the_acceptance(visit):
    page = visit.go("regressions.html")
    articles = page.locator("article.reg")
    statuses = sorted(articles.nth(i).get_attribute("data-status")
                      for i in range(articles.count()))
    assert statuses == ["accepted", "confirmed", "disproved", "fixed"]
    text = page.locator("#regressions").inner_text()
    assert CULPRIT in text and SECOND in text  # the culprits' full shas
    accepted = page.locator("article.reg[data-status=accepted]")
    assert accepted.locator(".who").inner_text() == WHO
    assert accepted.locator(".why").inner_text() == WHY


def test_the_filters_work(visit):
    page = visit.go("index.html")
    shown = page.locator("#overview tbody tr:visible")
    page.select_option("[data-filter=verdict]", "pass")
    assert shown.count() == 1 and PACKED in shown.inner_text()
    assert page.locator("[data-count]").inner_text() == "1 of 2"
    page.select_option("[data-filter=verdict]", "")
    page.fill("[data-filter=text]", "prefill")
    assert shown.count() == 1 and EXTEND in shown.inner_text()
    page.fill("[data-filter=text]", "no such case")
    assert shown.count() == 0
    page.fill("[data-filter=text]", "")
    assert shown.count() == 2
    page = visit.go("regressions.html")
    page.select_option("[data-filter=status]", "accepted")
    assert page.locator("article.reg:visible").count() == 1
    page.select_option("[data-filter=status]", "")
    page.fill("[data-filter=text]", WHO)
    assert page.locator("article.reg:visible").count() == 1
    assert visit.errors == [] and visit.outside == []
