"""The documentation site as a reader sees it at 1,280 px in headless Chromium: no code block cut
(commands wrap; diagrams and trees fit), the asset graph whole on the home page, and nothing
loaded from the network, so the site reads the same offline."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.dagster_services import REPO_ROOT, HeadlessChromium, find_chromium, wait_for
from fw_assets_tests.support.extras import in_ci

pytestmark = [pytest.mark.e2e, pytest.mark.needs_extra("docs")]

WIDTH, HEIGHT = 1280, 900
PAGES = sorted(path.stem for path in (REPO_ROOT / "docs").glob("*.md"))
# The code blocks whose lines are wider than the block, by their first line.
CUT_CODE_BLOCKS = """[...document.querySelectorAll('.md-typeset pre > code')]
    .filter(code => code.scrollWidth > code.clientWidth + 1)
    .map(code => code.innerText.split('\\n')[0].slice(0, 80))"""
# The home page's drawing of the asset graph: whether it keeps its lines, and its words that lie
# outside the block's visible box.
ASSET_GRAPH = """(() => {
    const code = document.querySelector('.drawing pre > code');
    const box = code.getBoundingClientRect();
    const hidden = [];
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (const word of node.textContent.matchAll(/[a-z_]+/g)) {
            const range = document.createRange();
            range.setStart(node, word.index);
            range.setEnd(node, word.index + word[0].length);
            const rect = range.getBoundingClientRect();
            if (rect.left < box.left || rect.right > box.right) hidden.push(word[0]);
        }
    }
    return {whiteSpace: getComputedStyle(code).whiteSpace, text: code.innerText, hidden: hidden};
})()"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as `mkdocs build --strict` writes it."""
    folder = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=REPO_ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, check=True, capture_output=True,
    )
    return folder


@pytest.fixture(scope="module")
def chromium():
    executable = find_chromium()
    if executable is None:
        if in_ci():
            pytest.fail("Chromium not found: `apt-get install -y chromium` (.ci/run installs it)")
        pytest.skip("needs Chromium to look at the site: apt-get install -y chromium")
    browser = HeadlessChromium(executable, width=WIDTH, height=HEIGHT)
    browser.command("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1,
                    mobile=False)
    browser.command("Network.enable")
    yield browser
    browser.close()


def open_page(chromium: HeadlessChromium, site: Path, page: str) -> None:
    url = (site / ("index.html" if page == "index" else f"{page}/index.html")).as_uri()
    chromium.open(url)
    wait_for(f"{page} to load", lambda: chromium.evaluate("document.readyState") == "complete", 30, 0.1)


def test_no_code_block_is_cut_at_1280_px(site, chromium):
    cut = {}
    for page in PAGES:
        open_page(chromium, site, page)
        if blocks := chromium.evaluate(CUT_CODE_BLOCKS):
            cut[page] = blocks
    assert not cut, f"code blocks wider than their column at {WIDTH} px, by their first line: {cut}"


def test_the_home_pages_asset_graph_is_whole_at_1280_px(site, chromium):
    open_page(chromium, site, "index")
    graph = chromium.evaluate(ASSET_GRAPH)
    assert graph["whiteSpace"] == "pre", "the drawing's lines must not wrap"
    assert "probe_loss" in graph["text"] and "mixture_inputs" in graph["text"]
    assert not graph["hidden"], f"the asset graph hides {graph['hidden']} at {WIDTH} px"


def test_the_site_loads_nothing_from_the_network(site, chromium):
    """No web fonts, no script or style from a CDN: every request stays in the built site."""
    chromium.events.clear()
    for page in PAGES:
        open_page(chromium, site, page)
    time.sleep(1)  # requests a page makes after it loaded (the search index) are reported too
    chromium.evaluate("1")
    requested = {event["params"]["request"]["url"] for event in chromium.events
                 if event["method"] == "Network.requestWillBeSent"}
    assert any(url.startswith("file://") for url in requested)
    remote = sorted(url for url in requested if not url.startswith(("file://", "data:", "blob:")))
    assert not remote, f"the site asks the network for {remote}"
