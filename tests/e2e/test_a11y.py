"""Accessibility and small screens, in headless Chromium: keyboard-only operation with a visible
focus, one polite announcement per run (never one per character), the themes, no sideways
scrolling at 360 px, and axe-core (from npm, injected from node_modules) finding no serious or
critical violation on the full page, the embedded page and the poster, light and dark."""

import json
import re

import pytest

from tests.e2e.conftest import ROOT, open_page, wait_ready
from tests.e2e.test_page import generated_text, reset, set_fields, settle
from tools.page import stylesheet

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
SETTINGS_IDS = ["model", "dataset", "prompt", "seed", "temperature", "greedy", "top_k", "top_p",
                "min_p", "repetition_penalty", "order", "max_new_tokens", "min_new_tokens", "stop",
                "include_stop", "ignore_eos"]


def focused(page):
    return page.evaluate("""() => {
        const e = document.activeElement;
        if (!e || e === document.body) return null;
        const s = getComputedStyle(e);
        return {id: e.id, cls: e.className, tag: e.tagName,
                ring: (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 1) || s.boxShadow !== 'none'};
    }""")


def tab_until(page, test, limit=80):
    visited = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = focused(page)
        if now:
            visited.append(now)
            if test(now):
                return visited
    pytest.fail(f"Tab never reached the target; visited {[v['id'] or v['tag'] for v in visited]}")


def test_keyboard_alone_reaches_every_control_generates_and_walks_the_tokens(fresh_page):
    page = wait_ready(fresh_page)
    reset(page, Seed=8, Max_new_tokens=6, Ignore_EOS=True)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.mouse.click(5, 5)  # start from the top of the page, as a keyboard user would
    visited = tab_until(page, lambda f: f["id"] == "generate")
    assert visited[0]["cls"] == "skip-link"
    # Generate comes first, then the controls; the rules folded under More rules open with Enter
    visited += tab_until(page, lambda f: f["tag"] == "SUMMARY" and page.evaluate(
        "() => document.activeElement.parentElement.id") == "more-rules")
    if not page.locator("#more-rules").evaluate("(e) => e.open"):
        page.keyboard.press("Enter")
    assert page.locator("#more-rules").evaluate("(e) => e.open")
    visited += tab_until(page, lambda f: f["id"] == "reset")
    ids = [v["id"] for v in visited]
    for name in SETTINGS_IDS:
        assert name in ids, f"{name} not reachable by Tab"
    missing_ring = [v["id"] or v["tag"] for v in visited if not v["ring"]]
    assert not missing_ring, f"no visible focus on {missing_ring}"
    page.get_by_role("button", name="Generate", exact=True).focus()

    # Space on Generate runs, and the focus is not dropped while the button is disabled
    page.keyboard.press("Space")
    assert settle(page)["status"] == "done"
    first = generated_text(page)
    assert len(first) == 6
    page.wait_for_function("() => document.activeElement.id === 'generate'")
    # a long run: the focus waits on Stop, Enter stops it, the focus comes back to Generate.
    # The transformer checking its cache at every step takes tens of seconds for 10,000
    # tokens, so the run is still going when the keys arrive, even on a busy machine.
    set_fields(page, Model="transformer", Max_new_tokens=10000)
    page.get_by_label("Cache check", exact=True).set_checked(True)
    page.get_by_role("button", name="Generate", exact=True).focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.activeElement.id === 'stop-button'")
    page.keyboard.press("Enter")
    assert settle(page)["finish_reason"] == "cancelled"
    page.wait_for_function("() => document.activeElement.id === 'generate'")
    set_fields(page, Model="bigram", Max_new_tokens=6)
    # Enter in a text field runs too
    page.get_by_label("Seed", exact=True).focus()
    page.keyboard.press("Control+A")
    page.keyboard.type("9")
    page.keyboard.press("Enter")
    assert settle(page)["status"] == "done"
    assert generated_text(page) != first

    # from Generate, Tab reaches the text; the arrow keys walk through the characters
    page.get_by_role("button", name="Generate", exact=True).focus()
    tab_until(page, lambda f: "tok" in f["cls"].split())
    assert focused(page)["ring"]
    start = page.locator("#step-count").inner_text()
    page.keyboard.press("Home")
    assert page.locator("#step-count").inner_text() == "Step 1 of 6"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.locator("#step-count").inner_text() == "Step 3 of 6"
    assert page.evaluate("() => document.activeElement.dataset.step") == "2"
    page.keyboard.press("End")
    assert page.locator("#step-count").inner_text() == "Step 6 of 6"
    assert start  # a step was selected before the keys were used
    page.wait_for_function("() => document.querySelector('#announce').textContent.startsWith('Step 6 of 6')")


def test_one_polite_announcement_per_run_not_per_character(app):
    reset(app, Seed=2, Max_new_tokens=300, Ignore_EOS=True)
    region = app.locator("#announce")
    assert region.get_attribute("role") == "status"
    assert app.locator("#text-gen").get_attribute("aria-live") is None
    # nothing that changes with every step is live
    live = app.evaluate("""() => [...document.querySelectorAll('[aria-live], [role=status], [role=alert]')]
        .map((e) => e.id)""")
    for busy in ("step-count", "finish", "text-gen", "output", "inspector"):
        assert busy not in live
    app.evaluate("""() => { window.changes = 0; new MutationObserver(() => window.changes++)
        .observe(document.querySelector('#announce'), {childList: true, characterData: true, subtree: true}); }""")
    app.get_by_role("button", name="Generate", exact=True).click()
    settle(app)
    app.wait_for_function("() => document.querySelector('#announce').textContent.startsWith('Generated text:')")
    words = region.text_content()
    assert generated_text(app)[:100] in words and "limit of 300 new tokens" in words
    assert app.evaluate("() => window.changes") <= 6  # "Generating…" and the result, each cleared first


@pytest.fixture(scope="module")
def pages(chromium, base_url, widgets):
    """Ready pages this module's tests share, one per address and width: the full page in a
    browser of its own, a widget (embed=true) joining the widgets' shared Python. What a test
    looks at is its own doing: the settings (reset), the colour scheme (emulate_media)."""
    opened = {}

    def page(path="", width=1280):
        if (path, width) not in opened:
            viewport = {"width": width, "height": 900}
            opened[path, width] = wait_ready(widgets.open(path, viewport) if "embed=true" in path
                                             else open_page(chromium, base_url, path, viewport))
        return opened[path, width]
    yield page
    for shown in opened.values():
        shown.close() if shown.context is widgets.context else shown.context.close()


PALETTE = ['--bg', '--surface', '--text', '--muted', '--faint', '--border', '--accent',
           '--on-accent', '--raw', '--temp', '--final', '--chosen', '--danger', '--danger-soft',
           '--hatch', '--field', '--note-bg', '--chosen-bg', '--xp-0', '--xp-5']


def palette(page):
    """Each palette colour as the browser resolves it on the page (rgb(...)), not as written."""
    return page.evaluate("""names => { const probe = document.createElement('i');
        document.body.append(probe);
        const out = Object.fromEntries(names.map((n) => { probe.style.color = `var(${n})`;
            return [n, getComputedStyle(probe).color]; }));
        probe.remove(); return out; }""", PALETTE)


@pytest.mark.parametrize("theme,system", [("dark", "light"), ("light", "dark")])
def test_theme_parameter_gives_the_same_palette_as_the_system_setting(chromium, base_url, pages, theme, system):
    forced = open_page(chromium, base_url, path=f"?theme={theme}", color_scheme=system)
    plain = pages()  # the system's setting, one then the other
    try:
        plain.emulate_media(color_scheme=theme)
        wanted = palette(plain)
        assert palette(forced) == wanted
        assert forced.evaluate("() => getComputedStyle(document.documentElement).colorScheme") == theme
        # and the two palettes really differ, colour by colour
        plain.emulate_media(color_scheme=system)
        unlike = palette(plain)
        assert all(wanted[n] != unlike[n] for n in PALETTE), (wanted, unlike)
        dark = wanted if theme == "dark" else unlike
        assert dark['--bg'] == "rgb(19, 21, 23)" and dark['--text'] == "rgb(230, 228, 223)"
    finally:
        forced.context.close()


def test_browsers_without_light_dark_get_the_whole_light_palette():
    """Where light-dark() is unknown, every palette colour would be dropped; the fallback block
    in style.css (as the build assembles it from its parts) must give each one, equal to its light
    value, and nothing after it may redefine the palette."""
    css = stylesheet(ROOT / "web")
    marker = "@supports not (color: light-dark(#000, #fff))"
    assert css.count(marker) == 1
    head, fallback = css.split(marker)
    assert "light-dark(" not in fallback  # nothing after it redefines the palette
    given = dict(re.findall(r"^    (--[\w-]+): (.+);$", fallback, flags=re.M))
    palette = [(name, value) for name, value in
               re.findall(r"^  (--[\w-]+): ([^;]*);", head, flags=re.M) if "light-dark(" in value]
    assert len(palette) >= 25
    for name, value in palette:
        light = re.sub(r"light-dark\(((?:[^(),]|\([^()]*\))*),(?:[^()]|\([^()]*\))*\)",
                       lambda m: m.group(1).strip(), value)
        assert given.get(name) == " ".join(light.split()), name


@pytest.mark.parametrize("path", ["", "index.html?embed=true&panels=controls,text,inspector,share,lesson"])
def test_nothing_scrolls_sideways_at_360px(pages, path):
    page = pages(path, 360)
    page.emulate_media(color_scheme="light")
    reset(page, Dataset="prose", Prompt="The ", Seed=3, Max_new_tokens=120, Top_k=5)
    page.get_by_role("button", name="Generate", exact=True).click()
    settle(page)
    page.locator("#text-gen [data-step]").nth(2).click()
    # what sticks out past the right edge without a scrolling box of its own around it
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')].filter((e) => {
        const r = e.getBoundingClientRect();
        if (!r.width || r.right <= document.documentElement.clientWidth + 1) return false;
        for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
            if (getComputedStyle(a).overflowX !== 'visible') return false;
        }
        return true;
    }).map((e) => e.id || e.className || e.tagName).slice(0, 10)""")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 360, wide
    assert wide == []
    for name in ("Generate", "Copy link", "Export CSV"):
        button = page.get_by_role("button", name=name, exact=True)
        if button.is_visible():
            box = button.bounding_box()
            assert box["height"] >= 24 and box["width"] >= 24, name


def axe_violations(page):
    # boxes that scroll sideways join the tab order by themselves, a moment after a change
    page.wait_for_function("""() => [...document.querySelectorAll('.table-wrap')].every(
        (b) => b.scrollWidth <= b.clientWidth + 1 || b.tabIndex === 0)""")
    page.evaluate(AXE.read_text())  # not a <script> tag: the page's CSP allows no inline script
    found = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 4).map((n) => n.target.join(' ') + ' :: ' + n.failureSummary)}));
    }""")
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("path,width", [
    ("", 1280),
    ("", 360),
    ("index.html?embed=true&panels=controls,text,inspector,share,train,lesson", 720),
])
def test_axe_finds_no_serious_violation_on_the_page(pages, scheme, path, width):
    if not AXE.exists():
        pytest.fail("node_modules/axe-core is missing: run npm ci")
    page = pages(path, width)
    page.emulate_media(color_scheme=scheme)
    reset(page, Dataset="names", Prompt="ma", Seed=7, Temperature=0.8, Top_k=5, Max_new_tokens=12,
          Ignore_EOS=True)
    page.get_by_role("button", name="Generate", exact=True).click()
    settle(page)
    page.locator("#text-gen [data-step]").nth(1).click()  # the inspector, with removed rows
    page.get_by_role("button", name="Copy link", exact=True).click()
    page.get_by_label("Greedy", exact=True).check()  # fields marked "not used"
    page.get_by_label("Top-p", exact=True).fill("7")  # an error next to its field
    page.locator("#top_p").blur()
    page.wait_for_selector("#top_p-error:not([hidden])")
    violations = axe_violations(page)
    assert violations == [], json.dumps(violations, indent=1)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violation_on_the_poster_or_a_bad_link(chromium, base_url, pages, scheme):
    poster = open_page(chromium, base_url, path="embed.html?lazy=click&dataset=names&prompt=ma",
                       color_scheme=scheme, viewport={"width": 640, "height": 480})
    bad = pages("?top_p=9&theme=x&frobnicate=1")
    bad.emulate_media(color_scheme=scheme)
    try:
        poster.wait_for_selector("#poster-start")
        violations = axe_violations(poster)
        assert violations == [], json.dumps(violations, indent=1)
        bad.locator("#link-notice").wait_for()
        violations = axe_violations(bad)
        assert violations == [], json.dumps(violations, indent=1)
    finally:
        poster.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violation_in_the_embed_dialog(pages, scheme):
    page = pages()
    page.emulate_media(color_scheme=scheme)
    page.get_by_role("button", name="Embed this…").click()
    dialog = page.get_by_role("dialog", name="Embed this in a course page")
    dialog.get_by_label("Only these (the others are fixed)").check()
    dialog.get_by_label("Show the Temperature control").check()
    dialog.get_by_label("Height", exact=True).fill("90")  # an error next to its field
    page.wait_for_selector("#embed-height-error:not([hidden])")
    assert page.evaluate("() => document.activeElement.closest('dialog') !== null")  # focus inside
    violations = axe_violations(page)
    assert violations == [], json.dumps(violations, indent=1)
    page.keyboard.press("Escape")  # a dialog closes with Escape, and focus goes back
    assert not dialog.is_visible()
    assert page.evaluate("() => document.activeElement.id") == "embed-open"
