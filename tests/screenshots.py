"""Regenerate the screenshots of README.md and docs/ from the real page: python3 tests/screenshots.py

Boots the built site in headless Chromium, runs a generation with settings that show the
filters at work, selects a step, and saves docs/screenshot*.png: the top of the page (light,
1280 px; dark, 360 px), the step view with every rule in order (dark), and Compare runs. Then it serves the course page
of the embedding tests (tests/e2e/hosts/course.html) on 127.0.0.1 with the widget on localhost,
as a course site would embed it, and saves docs/screenshot-embed.png; the same with three one-idea
widgets, one picture of each, light and dark, 1280 and 360 px wide (docs/screenshot-idea-*.png); the
Embed this dialog (docs/screenshot-embed-dialog.png); and the course: its map and four chapters
(sampling, the cache, beam search and drafts, paging), 1280 px light and 360 px dark
(docs/screenshot-map-*.png, docs/screenshot-chapter-*.png); and the real model loaded and run in
the workbench, 1280 px light and 360 px dark, a two-turn chat with it, and two chapters on it
(a cache bug garbling its answer, the temperature experiment) and its two engines side by side,
1280 px light and 360 px dark (docs/screenshot-real-*.png; --real: those alone).
"""

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "py")]

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, open_page, serve, wait_ready  # noqa: E402

SETTINGS = {"dataset": "names", "prompt": "mar", "seed": 7, "temperature": 0.8, "top_k": 8,
            "top_p": 0.9}


def shoot(browser, url, out: Path, width: int, scheme: str) -> None:
    page = open_page(browser, url, viewport={"width": width, "height": 900}, color_scheme=scheme)
    wait_ready(page)
    for name, value in SETTINGS.items():
        control = page.locator(f"#{name}")
        control.fill(str(value)) if control.evaluate("e => e.tagName") != "SELECT" \
            else control.select_option(value)
    page.get_by_role("button", name="Generate", exact=True).click()
    page.evaluate("() => window.decodelab.lastRun")
    page.wait_for_selector("html[data-state=ready]")
    page.locator("#text-gen [data-step]").nth(1).click()
    page.evaluate("() => window.scrollTo(0, 0)")
    # the top of the page: title, controls, the generated text and the selected step (the clip
    # is measured on the whole page, not the window, hence full_page)
    page.screenshot(path=str(out), full_page=True,
                    clip={"x": 0, "y": 0, "width": width, "height": 1400 if width > 800 else 1180})
    page.context.close()


def shoot_step(browser, url, out: Path, scheme: str) -> None:
    """The one view of a step, with every rule in order opened below it."""
    page = open_page(browser, url, "?" + "&".join(f"{k}={v}" for k, v in SETTINGS.items()),
                     viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    wait_ready(page)
    page.get_by_role("button", name="Generate", exact=True).click()
    page.wait_for_selector("html[data-state=ready]")
    page.locator("#text-gen [data-step]").nth(1).click()
    page.locator("#pipeline > summary").click()
    page.wait_for_selector("#pipeline[data-state=ready]")
    page.locator("#inspector").screenshot(path=str(out))
    page.context.close()


def shoot_compare(browser, url, out: Path, scheme: str) -> None:
    """Compare runs: the same seed at T = 0.3 and T = 2, where they part ways."""
    page = open_page(browser, url, viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    wait_ready(page)
    for temperature in (0.3, 2):
        page.evaluate("s => window.decodelab.generate(s)",
                      {"dataset": "prose", "prompt": "The ", "seed": 5, "temperature": temperature,
                       "max_new_tokens": 80, "ignore_eos": True})
        page.wait_for_selector("html[data-state=ready]")
    page.locator("#runs").screenshot(path=str(out))
    page.context.close()


def course_pages(widget_url: str) -> Path:
    """The test course pages, pointing at the widget's address."""
    root = Path(tempfile.mkdtemp(prefix="decodelab-hosts-"))
    for path in (ROOT / "tests" / "e2e" / "hosts").iterdir():
        (root / path.name).write_text(path.read_text().replace("{{WIDGET}}", widget_url)
                                      .replace("{{ROGUE}}", widget_url))
    return root


def shoot_embed(browser, host_url: str, out: Path, width: int, scheme: str) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page.goto(host_url + "course.html")
    page.wait_for_function("() => window.seen.some((m) => m.type === 'ready')", timeout=120_000)
    page.evaluate("() => document.querySelector('decodelab-embed').generate()")
    frame = next(f for f in page.frames if f.url.startswith("http://localhost"))
    frame.locator("#text-gen [data-step]").nth(3).click()
    page.wait_for_timeout(400)  # the last height message, then the iframe's new height
    # A viewport as tall as the page, so the widget's own frame is drawn in full.
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_timeout(400)
    page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": min(height, 1500)})
    page.close()


CHAPTERS = ("sampling", "cache")  # the two chapters pictured in the docs (docs/course.md)


def shoot_course(browser, url, out: Path, width: int, scheme: str) -> None:
    """The course: the map of chapters at the top of the page, with the chapter after the
    workbench open and its progress shown; then each of CHAPTERS opened from the map, from its
    head down one window and a half (docs/screenshot-map-*.png, docs/screenshot-chapter-*.png)."""
    page = open_page(browser, url, viewport={"width": width, "height": 900}, color_scheme=scheme)
    wait_ready(page)
    page.get_by_role("button", name="Generate", exact=True).click()  # the workbench, used once
    page.evaluate("() => window.decodelab.lastRun")
    page.wait_for_selector("html[data-state=ready]")
    for name in CHAPTERS:
        page.locator(f"#course-map a[href='#{name}']").click()
        page.wait_for_timeout(400)
        head = page.locator(f"#{name}-chapter-title").bounding_box()
        top = max(page.evaluate("() => window.scrollY") + head["y"] - 40, 0)
        page.screenshot(path=str(out / f"screenshot-chapter-{name}-{width}-{scheme}.png"),
                        full_page=True, clip={"x": 0, "y": top, "width": width,
                                              "height": 1300 if width > 800 else 1500})
    page.locator(f"#course-map a[href='#{CHAPTERS[0]}']").click()
    page.evaluate("() => window.scrollTo(0, 0)")
    box = page.locator("#course-map").bounding_box()
    page.screenshot(path=str(out / f"screenshot-map-{width}-{scheme}.png"), full_page=True,
                    clip={"x": 0, "y": 0, "width": width, "height": box["y"] + box["height"] + 24})
    page.context.close()


def clip_from(page, selector: str, width: int, height: int) -> dict:
    """A picture's clip: from just above `selector`, `height` down, on the whole page."""
    box = page.locator(selector).bounding_box()
    top = max(page.evaluate("() => window.scrollY") + box["y"] - 24, 0)
    return {"x": 0, "y": top, "width": width, "height": height}


def shoot_search(browser, url, out: Path, width: int, scheme: str) -> None:
    """Chapter 6: at 1280 px, beam search on the names transformer (prompt "an", 4 beams): the
    settings it searches from, its result and its tree; on a phone, speculative decoding round by round
    (docs/screenshot-chapter-search-*.png)."""
    page = open_page(browser, url, "?model=transformer&dataset=names&prompt=an&num_beams=4#search",
                     viewport={"width": width, "height": 900}, color_scheme=scheme)
    wait_ready(page)
    if width > 800:
        page.get_by_role("button", name="Search", exact=True).click()
        page.wait_for_function("() => window.decodelab.search.last.beam", timeout=120_000)
        clip = clip_from(page, "#beam-form", width, 1750)  # its settings, the three texts, the tree
    else:
        page.get_by_role("button", name="Decode with the draft", exact=True).click()
        page.wait_for_function("() => window.decodelab.search.last.speculate", timeout=120_000)
        clip = clip_from(page, "#spec-run", width, 1500)  # the button, then round by round
    page.wait_for_timeout(400)
    page.screenshot(path=str(out / f"screenshot-chapter-search-{width}-{scheme}.png"),
                    full_page=True, clip=clip)
    page.context.close()


def shoot_paging(browser, url, out: Path, width: int, scheme: str) -> None:
    """Chapter 7: a workload of 10 prose prompts, 2 samples each, in 40 blocks of 8 (tight
    enough to preempt), shown at step 12 (docs/screenshot-chapter-paging-*.png)."""
    page = open_page(browser, url, "?block_size=8&parallel_samples=2&memory_blocks=40#paging",
                     viewport={"width": width, "height": 900}, color_scheme=scheme)
    wait_ready(page)
    page.locator("#serving-requests").fill("10")
    page.get_by_role("button", name="Serve the workload", exact=True).click()
    page.wait_for_function("() => document.querySelector('#serving-form').dataset.state "
                           "=== 'done'", timeout=120_000)
    page.locator("#serving-step").fill("12")
    page.wait_for_timeout(400)
    page.screenshot(path=str(out / f"screenshot-chapter-paging-{width}-{scheme}.png"),
                    full_page=True, clip=clip_from(page, "#serving-out", width,
                                                   1300 if width > 800 else 1500))
    page.context.close()


def shoot_ideas(browser, host_url: str, out: Path, width: int, scheme: str) -> None:
    """Three one-idea widgets on one course page: a control, a step taken apart, the experiment;
    one picture of each (the tall ones cut at 1150 px, 1500 px on a phone)."""
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page.goto(host_url + "ideas.html")
    widgets = page.locator("decodelab-embed")
    for i in range(3):  # each starts when it scrolls into view
        widgets.nth(i).scroll_into_view_if_needed()
        page.wait_for_function("(n) => window.seen.filter((m) => m.type === 'ready').length >= n",
                               arg=i + 1, timeout=120_000)
    page.wait_for_function("() => window.seen.filter((m) => m.type === 'finished').length >= 2",
                           timeout=120_000)  # the first samples of the two that show text
    frames = [f for f in page.frames if f.url.startswith("http://localhost") and "index.html" in f.url]
    step, experiment = frames[1], frames[2]
    step.locator("#text-gen [data-step]").nth(2).click()
    experiment.get_by_role("button", name="Run experiment").click()
    experiment.wait_for_selector("#experiment[data-state=done]", timeout=120_000)
    page.wait_for_timeout(600)  # the last height messages, then the iframes' new heights
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_timeout(600)
    for section, name in (("idea-temperature", "control"), ("idea-step", "step"), ("idea-experiment", "experiment")):
        box = page.locator(f"#{section}").bounding_box()
        top = box["y"] - 16
        page.screenshot(path=str(out / f"screenshot-idea-{name}-{width}-{scheme}.png"),
                        clip={"x": 0, "y": top, "width": width,
                              "height": min(box["height"] + 32, 1150 if width > 800 else 1500)})
    page.close()


def shoot_dialog(browser, url: str, out: Path) -> None:
    """Embed this: one control and the text, previewed at a course column's width."""
    page = open_page(browser, url, "?dataset=names&prompt=ma&seed=7&temperature=0.8&top_k=8",
                     viewport={"width": 1280, "height": 1000})
    wait_ready(page)
    page.get_by_role("button", name="Embed this…").click()
    dialog = page.get_by_role("dialog")
    dialog.locator("#embed-panel-inspector").uncheck()
    dialog.get_by_label("Only these (the others are fixed)").check()
    dialog.locator("#embed-control-temperature").check()
    dialog.get_by_label("Height", exact=True).fill("520")
    dialog.get_by_label("Preview width", exact=True).fill("760")
    inner = page.frame_locator("#embed-preview-box iframe")
    inner.locator("#finish:not(.idle)").wait_for(timeout=120_000)
    page.evaluate("() => { document.activeElement.blur(); document.getElementById('embed-dialog').scrollTop = 0; }")
    page.wait_for_timeout(500)
    page.screenshot(path=str(out))
    page.context.close()


REAL = {"prompt": "The capital of France is", "seed": 3, "temperature": 0.8, "top_p": 0.9,
        "max_new_tokens": 24}


def shoot_real(browser, url, out: Path, width: int, scheme: str) -> None:
    """The real model in the workbench: its card once loaded, a sampled run and the next-token
    view over its 49,152 tokens at a step it chose among several."""
    height = 1200 if width > 800 else 2400
    page = open_page(browser, url, viewport={"width": width, "height": height},
                     color_scheme=scheme)
    wait_ready(page)
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.evaluate("() => window.decodelab.pretrained.load()")
    for name, value in REAL.items():
        page.locator(f"#{name}").fill(str(value))
    page.get_by_role("button", name="Generate", exact=True).click()
    page.evaluate("() => window.decodelab.lastRun")
    page.wait_for_selector("html[data-state=ready]")
    page.locator("#text-gen [data-step]").nth(2).click()
    # the window itself (the stage keeps to the top of it while the controls scroll)
    page.locator("#workbench").evaluate("e => e.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(out))
    page.context.close()


def shoot_chat(browser, url, out: Path) -> None:
    """A two-turn chat with the real model: the conversation, the second turn's prompt as tokens
    (the special ones marked, those from the first turn's cache faded) and what it reused."""
    page = open_page(browser, url, viewport={"width": 1280, "height": 1400}, color_scheme="light")
    wait_ready(page)
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.evaluate("() => window.decodelab.pretrained.load()")
    page.get_by_label("Greedy", exact=True).check()
    for message in ("What is the capital of Japan?", "And of France?"):
        page.get_by_label("Your message", exact=True).fill(message)
        page.evaluate("() => window.decodelab.pretrained.send()")
    page.locator("#chat-template > summary").click()
    page.locator("#chat").screenshot(path=str(out))
    page.context.close()


def real_page(browser, url, width: int, scheme: str):
    """The page at this width and scheme, with SmolLM2 chosen and loaded."""
    page = open_page(browser, url, viewport={"width": width, "height": 1100 if width > 800 else 2000},
                     color_scheme=scheme)
    wait_ready(page)
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.evaluate("() => window.decodelab.pretrained.load()")
    return page


def shoot_real_chapters(browser, url, docs: Path, width: int, scheme: str) -> None:
    """Two chapters on the real model: a cache bug garbling its answer (Break it on purpose)
    and the temperature experiment on a haiku (docs/screenshot-real-bugs-*.png,
    docs/screenshot-real-experiment-*.png)."""
    from tests.e2e.conftest import reveal

    page = real_page(browser, url, width, scheme)
    reveal(page, "#break")
    page.get_by_label("Check steps", exact=True).fill("10")
    page.evaluate("() => window.decodelab.kv.lab.check({bug: 'frozen-position'})")
    page.locator("#break").screenshot(path=str(docs / f"screenshot-real-bugs-{width}-{scheme}.png"))
    reveal(page, page.get_by_label("Prompt", exact=True)).fill("Write a haiku about the sea.")
    reveal(page, page.locator("#max_new_tokens")).fill("24")
    reveal(page, "#xp-mode-repeated").check()
    section = reveal(page, "#experiment")
    section.get_by_label("T values", exact=True).fill("0, 0.7, 2")
    section.get_by_label("Samples per temperature", exact=True).fill("4")
    section.get_by_role("button", name="Run experiment", exact=True).click()
    page.wait_for_selector("#experiment[data-state=done]", timeout=300_000)
    page.locator("#experiment").screenshot(
        path=str(docs / f"screenshot-real-experiment-{width}-{scheme}.png"))
    page.context.close()


def shoot_real_serving_and_accuracy(browser, url, docs: Path, width: int, scheme: str) -> None:
    """Two more chapters on the real model: chats served from one pool (the serving chapter)
    and right answers against temperature on capitals and sums
    (docs/screenshot-real-serving-*.png, docs/screenshot-real-accuracy-*.png)."""
    from tests.e2e.conftest import reveal

    page = real_page(browser, url, width, scheme)
    reveal(page, "#accuracy")
    page.locator("#acc-model").select_option("smollm2")  # its own defaults
    page.locator("#acc-run").click()
    page.wait_for_selector("#accuracy[data-state=done]", timeout=600_000)
    page.locator("#accuracy").screenshot(path=str(docs / f"screenshot-real-accuracy-{width}-{scheme}.png"))
    reveal(page, "#serving")
    page.locator("#serving-model").select_option("smollm2")
    page.locator("#serving-run").click()
    page.wait_for_selector("#serving-form[data-state=done]", timeout=600_000)
    page.locator("#serving-step").fill("40")  # a later request finding the system message
    page.locator("#serving-step").dispatch_event("input")
    page.locator("#serving-out").screenshot(
        path=str(docs / f"screenshot-real-serving-{width}-{scheme}.png"))
    page.context.close()


def shoot_real_engines(browser, url, docs: Path, width: int, scheme: str) -> None:
    """The cache chapter's last panel: "What is the capital of France?" through both engines,
    where their greedy answers part at the first token (docs/screenshot-real-engines-*.png)."""
    from tests.e2e.conftest import reveal

    page = real_page(browser, url, width, scheme)
    reveal(page, "#twoengines-message").fill("What is the capital of France?")
    page.locator("#twoengines-run").click()
    page.wait_for_selector("#twoengines[data-state=done]", timeout=600_000)
    page.locator("#twoengines").screenshot(
        path=str(docs / f"screenshot-real-engines-{width}-{scheme}.png"))
    page.context.close()


def main() -> int:
    from playwright.sync_api import sync_playwright

    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    server, url = serve(ROOT / "static")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for width, scheme in ((1280, "light"), (360, "dark")):
                shoot_real(browser, url, docs / f"screenshot-real-{width}-{scheme}.png", width,
                           scheme)
            shoot_chat(browser, url, docs / "screenshot-real-chat.png")
            for width, scheme in ((1280, "light"), (360, "dark")):
                shoot_real_chapters(browser, url, docs, width, scheme)
                shoot_real_serving_and_accuracy(browser, url, docs, width, scheme)
                shoot_real_engines(browser, url, docs, width, scheme)
            if "--real" in sys.argv:  # the real model's pictures alone
                browser.close()
                return 0
            shoot(browser, url, docs / "screenshot.png", 1280, "light")
            shoot(browser, url, docs / "screenshot-dark-360.png", 360, "dark")
            shoot_step(browser, url, docs / "screenshot-step-dark.png", "dark")
            shoot_compare(browser, url, docs / "screenshot-compare.png", "light")
            shoot_dialog(browser, url, docs / "screenshot-embed-dialog.png")
            for width, scheme in ((1280, "light"), (360, "dark")):
                shoot_course(browser, url, docs, width, scheme)
                shoot_search(browser, url, docs, width, scheme)
                shoot_paging(browser, url, docs, width, scheme)
            widget, widget_url = serve(ROOT / "static", host="localhost")
            host, host_url = serve(course_pages(widget_url), host="127.0.0.1")
            try:
                shoot_embed(browser, host_url, docs / "screenshot-embed.png", 1100, "light")
                for width in (1280, 360):
                    for scheme in ("light", "dark"):
                        shoot_ideas(browser, host_url, docs, width, scheme)
            finally:
                host.shutdown()
                widget.shutdown()
            browser.close()
    finally:
        server.shutdown()
    print("wrote docs/screenshot.png, docs/screenshot-dark-360.png, docs/screenshot-step-dark.png, "
          "docs/screenshot-compare.png, docs/screenshot-embed-dialog.png, docs/screenshot-embed.png, "
          "docs/screenshot-map-*.png, docs/screenshot-chapter-*.png and docs/screenshot-idea-*.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
