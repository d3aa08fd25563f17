"""The Sphinx and Jupyter Book recipes of docs/embedding.md, built into real sites by those tools,
served on another origin than the widget, and opened in Chromium: the widget starts and
generates what the command line generates for the same settings.

The snippets are read from the docs as written; only the placeholder address
(https://example.org/decodelab/) becomes the test widget's.
"""

import re
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import BOOT_TIMEOUT_MS, SitesGuard, serve
from tests.e2e.test_page import cli_trace

DOCS = (Path(__file__).resolve().parents[2] / "docs" / "embedding.md").read_text()
PLACEHOLDER = "https://example.org/decodelab/"


def snippet(after: str, fence: str) -> str:
    """The first fenced block of kind `fence` after the heading or sentence `after`."""
    start = DOCS.index(after)
    match = re.compile(rf"^```{re.escape(fence)}\n(.*?)^```$", re.M | re.S).search(DOCS, start)
    return match.group(1)


def myst_block() -> str:
    inner = snippet("### Jupyter Book and Sphinx", "`markdown")  # the block inside ````markdown
    return inner


def settings_of(html: str) -> dict:
    tag = re.search(r"<decodelab-embed ([^>]*)>", html).group(1)
    attrs = dict(re.findall(r'([a-z-]+)="([^"]*)"', tag))
    out = {"model": "bigram", "dataset": attrs["dataset"], "prompt": attrs["prompt"], "seed": int(attrs["seed"])}
    if "stop" in attrs:
        out["stop"] = attrs["stop"].split("\n")
    return out


def built(tmp_path: Path, command: list, out: Path) -> Path:
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (out / "index.html").exists()
    return out


def open_site(chromium, site: Path, widget_url: str, page_name: str):
    server, url = serve(site, host="127.0.0.1")  # another origin than the widget's (localhost)
    context = chromium.new_context(viewport={"width": 1100, "height": 1600}, service_workers="block")
    guard = SitesGuard(context, url, widget_url)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url + page_name)
    return server, context, page, guard, errors


def first_sample(page) -> dict:
    page.locator("decodelab-embed").first.scroll_into_view_if_needed()
    deadline = time.monotonic() + BOOT_TIMEOUT_MS / 1000
    frame = None
    while time.monotonic() < deadline and frame is None:
        frame = next((f for f in page.frames if f.url.startswith("http://localhost") and "index.html" in f.url), None)
        page.wait_for_timeout(100)
    assert frame is not None, [f.url for f in page.frames]
    frame.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    frame.wait_for_function("() => window.decodelab.lastRun", timeout=BOOT_TIMEOUT_MS)
    return frame.evaluate("() => window.decodelab.lastRun")


def test_a_sphinx_site_with_myst_and_rst_pages_embeds_the_widget(chromium, widget_url, tmp_path):
    myst = myst_block().replace(PLACEHOLDER, widget_url)
    rst = snippet("In reStructuredText:", "rst").replace(PLACEHOLDER, widget_url)
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('project = "Week 3"\nextensions = ["myst_parser"]\n')
    (src / "index.md").write_text("# Week 3: stop strings\n\nTry it:\n\n" + myst
                                  + "\n```{toctree}\nnames\n```\n")
    (src / "names.rst").write_text("Names\n=====\n\n" + rst)
    out = built(tmp_path, [sys.executable, "-m", "sphinx", "-q", "-b", "html", "src", "out"], tmp_path / "out")
    for page_name, html in (("index.html", myst), ("names.html", rst)):
        assert widget_url + "element.js" in (out / page_name).read_text()
        server, context, page, guard, errors = open_site(chromium, out, widget_url, page_name)
        try:
            run = first_sample(page)
            assert run["text"] == cli_trace(**settings_of(html))["text"]
            assert guard.blocked == [] and errors == []
        finally:
            context.close()
            server.shutdown()


def test_a_jupyter_book_loads_the_element_on_every_page(chromium, widget_url, tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    config = snippet("the same entry goes into `_config.yml`", "yaml").replace(PLACEHOLDER, widget_url)
    (book / "_config.yml").write_text('title: "Week 3"\nexecute:\n  execute_notebooks: "off"\n' + config)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    # the element itself, without the script tag: the book loads element.js on every page
    element = re.search(r"<decodelab-embed .*?</decodelab-embed>", myst_block()).group(0)
    (book / "intro.md").write_text("# How a model stops\n\n```{raw} html\n" + element + "\n```\n")
    # the jupyter-book command, run by this Python (its console script may not be on the PATH)
    command = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()", "build", "--quiet", "book"]
    out = built(tmp_path, command, book / "_build" / "html")
    assert widget_url + "element.js" in (out / "intro.html").read_text()
    server, context, page, guard, errors = open_site(chromium, out, widget_url, "intro.html")
    try:
        run = first_sample(page)
        assert run["text"] == cli_trace(**settings_of(element))["text"]
        # Jupyter Book 1.0's theme loads sphinx-thebe's script twice, and the second copy throws
        # on the book's own page ("THEBE_JS_URL has already been declared"); nothing else may
        assert guard.blocked == [] and [e for e in errors if "THEBE_JS_URL" not in e] == []
    finally:
        context.close()
        server.shutdown()
