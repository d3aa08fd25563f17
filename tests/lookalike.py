"""Screenshots of the page in a fixed list of states, and a pixel-by-pixel comparison of two sets.

For a change that should not change how anything looks (the stylesheet, class names):

    python3 tests/lookalike.py capture /tmp/look/before      # the site as it was
    python3 build.py build                                    # with the change
    python3 tests/lookalike.py capture /tmp/look/after
    python3 tests/lookalike.py compare /tmp/look/before /tmp/look/after

`capture` builds nothing: it serves the built site in static/ (or `--site DIR`, a copy of an
older build) as the browser tests do and, in headless Chromium, brings the page and the widget
into each state and saves one PNG per state (`--only WORD`: the states whose name holds WORD;
`--styles`: also every element's computed style). Every state is made the same way each time:
fixed settings and seeds, measured timings replaced by fixed numbers or text, no animation, the
pointer outside the page, the page drawn afresh for the shot. `compare` reports, state by state,
whether the two PNGs (and the styles, if saved) are identical and, where not, how many pixels
differ, where and by how much, with images of the differences (`--diffs DIR`, default
AFTER/../diffs). The PNGs are decoded in Chromium, so nothing beyond Playwright is needed.
"""

import argparse
import base64
import gzip
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "py")]

from tests.e2e.conftest import (  # noqa: E402
    BOOT_TIMEOUT_MS,
    CHROMIUM,
    CHROMIUM_ARGS,
    STATIC,
    OfflineGuard,
    serve,
    wait_ready,
)
from tests.e2e.test_page import set_fields, settle  # noqa: E402

HOSTS = ROOT / "tests" / "e2e" / "hosts"

# The cost panel shows milliseconds measured in the browser. Before the page sees the worker's
# reply, each row's times are replaced by fixed ones that grow with the context, as real ones do.
FIXED_COSTS = """
(() => {
  const Native = window.Worker;
  if (!Native) return;
  const fix = (m) => {
    // the cost sweep's reply: rows of measured milliseconds per context length
    const rows = m && m.result && m.result.rows;
    if (!Array.isArray(rows) || !rows.length || !("cached_ms" in rows[0])) return;
    for (const r of rows) {
      r.cached_ms = 0.05 + 0.002 * r.context;
      r.uncached_ms = 0.3 + 0.06 * r.context;
      r.speedup = r.uncached_ms / r.cached_ms;
    }
  };
  window.Worker = class extends Native {
    addEventListener(type, listener, options) {
      if (type !== "message") return super.addEventListener(type, listener, options);
      const fixed = (event) => { fix(event.data); listener(event); };
      return super.addEventListener(type, fixed, options);
    }
  };
})();
"""

# Text that changes from run to run: start-up and run durations, the server's port.
STEADY = r"""
() => {
  const digits = (t) => t.replace(/\d+(?:\.\d+)? ?m?s\b/g, "9.9 s")
    .replace(/\d+(?:\.\d+)?/g, "9.9");
  const at = (id) => document.getElementById(id);
  if (at("boot-time")) at("boot-time").textContent = digits(at("boot-time").textContent);
  const status = at("status");
  if (status && /^(Ready|Loading|Checking)/.test(status.textContent)) {
    status.textContent = digits(status.textContent);
  }
  const meta = at("run-meta");
  if (meta && / · /.test(meta.textContent)) {
    // its time, and the rate measured
    meta.textContent = meta.textContent.replace(/ · [^·]*( · .*)?$/, (_, rate) => " · 9.9 s" + (rate ? " · 99 steps a second" : ""));
  }
  for (const node of document.querySelectorAll(".xp-status")) {
    if (/^Done/.test(node.textContent)) node.textContent = digits(node.textContent);
  }
  const link = at("share-link");
  if (link) link.value = link.value.replace(/^http:\/\/[^/]+\//, "http://127.0.0.1:8000/");
}
"""

# The computed style of an element and everything in it (with ::before and ::after where they
# exist): [property names, labels, unique style texts, each element's style index]. The properties
# are the longhands the page's stylesheets set, plus those that place and size a box: what a
# stylesheet change can change. Two captures with the same styles look the same everywhere in
# that element, on screen or not.
STYLES = """
(root) => {
  const names = new Set(["display", "position", "width", "height", "top", "left", "visibility"]);
  const collect = (rules) => {
    for (const rule of rules) {
      if (rule.style) for (let i = 0; i < rule.style.length; i++) names.add(rule.style[i]);
      if (rule.cssRules) collect(rule.cssRules);
    }
  };
  for (const sheet of document.styleSheets) collect(sheet.cssRules);
  const props = [...names].filter((name) => !name.startsWith("--")).sort();
  // running animations (a start-up spinner) are read at their start, then go on as they were
  const running = document.getAnimations().map((a) => [a, a.currentTime, a.playState]);
  for (const [a] of running) { a.pause(); a.currentTime = 0; }
  const texts = [], seen = new Map(), labels = [], index = [];
  const add = (label, cs) => {
    const t = props.map((name) => cs.getPropertyValue(name)).join("\\n");
    if (!seen.has(t)) { seen.set(t, texts.length); texts.push(t); }
    labels.push(label);
    index.push(seen.get(t));
  };
  let n = 0;
  for (const el of [root, ...root.querySelectorAll("*")]) {
    const label = `${n++} ${el.localName}${el.id ? "#" + el.id : ""}`;
    add(label, getComputedStyle(el));
    for (const pseudo of ["::before", "::after"]) {
      const cs = getComputedStyle(el, pseudo);
      if (cs.content !== "none" && cs.content !== "normal") add(label + pseudo, cs);
    }
  }
  for (const [a, time, state] of running) {
    a.currentTime = time;
    if (state === "running") a.play();
  }
  return [props, labels, texts, index];
}
"""

# Two frames and a short pause: every pending layout, chart and height message has landed.
QUIET = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"

# Everything hidden for a frame, then shown: the whole page is drawn afresh for the shot, so no
# pixel depends on what was drawn there before (a part drawn again over itself can differ in the
# anti-aliasing of its edges).
REDRAW = """
() => new Promise((done) => {
  const style = document.documentElement.style;
  style.visibility = "hidden";
  requestAnimationFrame(() => {
    style.visibility = "";
    requestAnimationFrame(() => requestAnimationFrame(done));
  });
})
"""


class Shooter:
    def __init__(self, out: Path, only: str | None, styles: bool = False):
        self.out, self.only, self.styles, self.names = out, only, styles, []

    def wanted(self, name: str) -> bool:
        return not self.only or self.only in name

    def __call__(self, page, name: str, target=None, full_page=False, frames=()):
        """Save one state: `target` (a locator) alone, or the page (the whole page if
        full_page, else the window, as it is)."""
        if not self.wanted(name):
            return
        for frame in (page, *frames):
            # the next-token view redraws after every change of the rules: let it land
            frame.wait_for_function("() => !(window.decodelab && window.decodelab.lesson"
                                    " && window.decodelab.lesson.preview.busy)")
            frame.evaluate(STEADY)
        page.mouse.move(0, 0)
        # The window as tall as the page: a tall shot is then taken in one piece, without
        # scrolling (which leaves sticky table columns a pixel off now and then).
        window = page.viewport_size
        if full_page or target is not None:
            height = page.evaluate("() => document.documentElement.scrollHeight")
            page.set_viewport_size({"width": window["width"],
                                    "height": max(window["height"], height)})
        page.evaluate(QUIET)
        page.wait_for_timeout(600)  # the longest transition (0.3 s) has ended
        for frame in (*frames, page):
            frame.evaluate(REDRAW)
        path = self.out / f"{name}.png"
        options = dict(path=str(path), animations="disabled", caret="hide")
        if target is not None:
            target.screenshot(**options)
        else:
            page.screenshot(**options)
        if self.styles:
            whole = f"() => ({STYLES})(document.documentElement)"
            dump = ([target.evaluate(STYLES)] if target is not None
                    else [frame.evaluate(whole) for frame in (page, *frames)])
            with gzip.open(self.out / f"{name}.styles.json.gz", "wt") as f:
                json.dump(dump, f)
        page.set_viewport_size(window)
        self.names.append(name)
        print(f"  {name}", flush=True)


def new_page(browser, url, width, scheme="light", height=900):
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    context.add_init_script(FIXED_COSTS)
    OfflineGuard(context, url)
    page = context.new_page()
    page.set_default_timeout(BOOT_TIMEOUT_MS)
    return page


def generate(page, **fields):
    set_fields(page, **fields)
    page.get_by_role("button", name="Generate", exact=True).click()
    return settle(page)


def kv_reply(page, panel, button):
    """Press a lab's button and wait for its new reply (hooks.kv.last)."""
    before = page.evaluate(f"() => JSON.stringify(window.decodelab.kv.last.{panel} || null)")
    page.get_by_role("button", name=button, exact=True).click()
    page.wait_for_function(f"b => window.decodelab.kv.last.{panel} && "
                           f"JSON.stringify(window.decodelab.kv.last.{panel}) !== b", arg=before)


MAIN = dict(Model="transformer", Dataset="names", Prompt="mar", Seed=7, Temperature=2, Greedy=False,
            Top_k=8, Top_p=0.8, Min_p=0, Repetition_penalty=1, Order="temperature-first",
            Max_new_tokens=16, Min_new_tokens=0, Stop_strings="", Ignore_EOS=True,
            Include_stop_string=False)


def workbench(browser, url, shoot, tag, width, scheme, theme=None):
    """One page through every panel's states; `tag` names the width and theme."""
    page = new_page(browser, url, width, scheme)
    page.goto(url + (f"?theme={theme}" if theme else ""))
    wait_ready(page)
    section = page.locator
    shoot(page, f"{tag}-ready", section("header.masthead"))

    # A finished transformer run with a step selected, where the two orders keep different sets.
    page.get_by_label("Cache check", exact=True).set_checked(True)
    generate(page, **MAIN)
    trace = json.loads(page.evaluate("() => window.decodelab.trace()"))
    differ = [i for i, s in enumerate(trace["steps"]) if i > 0 and s.get("orders_differ")]
    step = differ[0] if differ else 2  # a decode step
    page.locator(f"#text-gen [data-step='{step}']").click()
    # the rules in order are worked out only while their box is open
    page.locator("#pipeline").evaluate("d => { if (!d.open) d.querySelector('summary').click(); }")
    page.wait_for_selector(f"#pipeline[data-state=ready][data-step='{step}']")
    shoot(page, f"{tag}-run-page", full_page=True)
    shoot(page, f"{tag}-run-workbench", section("#workbench"))
    shoot(page, f"{tag}-run-pipeline", section("#pipeline"))

    # The live check with its table open.
    page.locator("#cache-table summary").click()
    shoot(page, f"{tag}-cache-card", section("#cache-card"))
    page.locator("#cache-table summary").click()

    # The other order's stages (no draw to show for it).
    section("#pipeline").get_by_label("filter-first", exact=True).check()
    shoot(page, f"{tag}-pipeline-other-order", section("#pipeline"))
    section("#pipeline").get_by_label("temperature-first (used)", exact=True).check()

    # Step-through: back at the prefill step, then part-way through a replay, with its table open.
    card = section("#stepthrough")
    card.get_by_role("button", name="Reset", exact=True).click()
    page.wait_for_selector("#pipeline[data-state=ready][data-step='0']")
    shoot(page, f"{tag}-stepthrough-prefill", card)
    shoot(page, f"{tag}-pipeline-prefill", section("#pipeline"))
    card.get_by_role("button", name="Step", exact=True).click()
    card.get_by_role("button", name="Step", exact=True).click()
    page.wait_for_selector("#pipeline[data-state=ready][data-step='2']")
    page.get_by_text("All the steps as a table", exact=True).click()
    shoot(page, f"{tag}-stepthrough", card)
    shoot(page, f"{tag}-stepthrough-table", section("#inspector-body details.st-table"))
    shoot(page, f"{tag}-stepthrough-text", section("#output"))
    page.get_by_text("All the steps as a table", exact=True).click()

    # A run longer than the names model's window: the check card marks the context shift.
    generate(page, Max_new_tokens=70, Seed=2, Prompt="")
    shoot(page, f"{tag}-cache-shift", section("#cache-card"))
    set_fields(page, **MAIN)

    # Field errors next to their fields; the form stays as it was.
    set_fields(page, Temperature=-1, Top_p=1.5)
    page.get_by_role("button", name="Generate", exact=True).click()
    page.wait_for_selector("#temperature-error:not([hidden])")
    page.wait_for_selector("#top_p-error:not([hidden])")
    shoot(page, f"{tag}-field-errors", section("#settings"))
    set_fields(page, Temperature=2, Top_p=0.8)

    # Settings that do not apply: greedy with the bigram (no cache to check).
    set_fields(page, Model="bigram", Greedy=True)
    shoot(page, f"{tag}-not-applying", section("#settings"))
    set_fields(page, Model="transformer", Greedy=False)

    # The playground: a temperature sweep, the two orders, a bad number.
    presets = section("#pg-presets")
    for label, name in (("[2, 1] at T = 0.5, 1, 2", "sweep"),
                        ("The same at T = 2: the orders differ", "orders")):
        presets.get_by_role("button", name=label, exact=True).click()
        page.wait_for_selector("#playground[data-state=ready]")
        shoot(page, f"{tag}-playground-{name}", section("#playground"))
    section("#playground").get_by_label("Numbers", exact=True).fill("2, x")
    page.wait_for_selector("#playground[data-state=invalid]")
    shoot(page, f"{tag}-playground-error", section("#playground"))
    presets.get_by_role("button", name="[2, 1] at T = 0.5, 1, 2", exact=True).click()
    page.wait_for_selector("#playground[data-state=ready]")

    # The temperature experiment: one run each, then repeated samples, then bad input.
    xp = section("#experiment")
    set_fields(page, Model="bigram", Dataset="prose", Prompt="The ", Seed=11, Temperature=1,
               Top_k=0, Top_p=1, Max_new_tokens=120, Ignore_EOS=False)
    page.locator("#xp-mode-single").check()
    xp.get_by_label("T values", exact=True).fill("0.3, 0.6, 1, 1.5, 2, 3")
    xp.get_by_role("button", name="Run experiment", exact=True).click()
    page.wait_for_selector("#experiment[data-state=done]")
    shoot(page, f"{tag}-experiment-single", xp)
    set_fields(page, Dataset="names", Prompt="", Seed=1, Max_new_tokens=50)
    page.locator("#xp-mode-repeated").check()
    xp.get_by_label("T values", exact=True).fill("0.3, 2")
    xp.get_by_label("Samples per temperature", exact=True).fill("20")
    xp.get_by_role("button", name="Run experiment", exact=True).click()
    page.wait_for_selector("#experiment[data-state=done]")
    shoot(page, f"{tag}-experiment-repeated", xp)
    xp.get_by_label("T values", exact=True).fill("0.3, hot")
    xp.get_by_label("Samples per temperature", exact=True).fill("500")
    xp.get_by_role("button", name="Run experiment", exact=True).click()
    page.wait_for_selector("#experiment[data-state=invalid]")
    shoot(page, f"{tag}-experiment-errors", xp)

    # Questions: one wrong choice, one right, a wrong number.
    quiz = section("#quiz")
    q1 = quiz.locator("#q-knowledge")
    q1.get_by_label("At the lower temperature the model knew more about names.").check()
    q1.get_by_role("button", name="Check answer").click()
    q7 = quiz.locator("#q-length")
    q7.locator("#q-length-2").check()
    q7.get_by_role("button", name="Check answer").click()
    q3 = quiz.locator("#q-top_p")
    q3.get_by_label("Your answer (candidates)", exact=True).fill("2")
    q3.get_by_role("button", name="Check answer").click()
    shoot(page, f"{tag}-questions", quiz)

    # Both models side by side, with the training curve.
    set_fields(page, Dataset="names", Prompt="el", Seed=11, Temperature=0.9, Max_new_tokens=12)
    kv_reply(page, "compare", "Run both models")
    shoot(page, f"{tag}-compare", section("#compare"))

    # The batch view.
    set_fields(page, Dataset="names", Seed=4)
    page.get_by_label("Batch prompts", exact=True).fill("al\n\nmar\nkimberly")
    page.get_by_label("Batch steps", exact=True).fill("6")
    kv_reply(page, "batch", "Run the batch")
    shoot(page, f"{tag}-batch", section("#batch"))

    # Break it: a cache bug, the padding bug, and the correct cache.
    set_fields(page, Seed=1)
    page.get_by_label("Batch prompts", exact=True).fill("al\nmar\nkimberly")
    page.get_by_label("Test prompt", exact=True).fill("mar")
    page.get_by_label("Check steps", exact=True).fill("10")
    for bug, result in (("frozen-position", "failed"), ("unmasked-padding", "failed"),
                        ("none", "passed")):
        page.get_by_label("Inject a bug", exact=True).select_option(bug)
        kv_reply(page, "breakIt", "Run the check")
        page.wait_for_selector(f"#break-out[data-result={result}]")
        shoot(page, f"{tag}-break-{bug}", section("#break"))

    # Memory: the worked example for 8 sequences, a bad number, this page's own model live.
    costs = section("#costs")
    page.get_by_label("Model shape", exact=True).select_option("seed")
    page.get_by_label("Sequences", exact=True).fill("8")
    page.wait_for_function("() => document.querySelector('#mem-total').textContent === '4 GiB'")
    shoot(page, f"{tag}-memory", section("#costs .mem-layout"))
    page.get_by_label("Layers", exact=True).fill("0")
    page.wait_for_selector("#mem-layers-error:not([hidden])")
    shoot(page, f"{tag}-memory-error", section("#costs .mem-layout"))
    page.get_by_label("Model shape", exact=True).select_option("tiny")
    section("#mem-live").wait_for()

    # The measured cost (with fixed timings), then the whole section.
    kv_reply(page, "costs", "Measure on this model")
    costs.locator("details.kv-table summary").click()
    shoot(page, f"{tag}-costs", costs)

    # Train on pasted text.
    page.locator("#train summary").click()
    page.get_by_label("Your text", exact=True).fill("anna\nbob\ncarla\ndave\nemma\nfrank")
    page.get_by_role("button", name="Train bigram", exact=True).click()
    page.wait_for_function("() => document.querySelector('#train-result').textContent.length > 0")
    shoot(page, f"{tag}-train", section("#train"))

    # Everything filled in.
    shoot(page, f"{tag}-end-page", full_page=True)
    page.context.close()


def lesson(browser, url, shoot, tag, width, scheme, theme=None):
    """The lesson's panels below the workbench: Try this and its answer, the runs compared, the
    next token under the rules, tokens (BPE, a stop inside a token, the prefill's rows), tool
    calls (the calculator in the text, an appended step, what a cache is not, the accuracy
    experiment), answers with a shape (JSON mode, one card four ways, the validity experiment)
    and the Embed this dialog."""
    page = new_page(browser, url, width, scheme)
    page.goto(url + (f"?theme={theme}" if theme else ""))
    wait_ready(page)
    section = page.locator
    page.wait_for_function("() => document.querySelector('#next-bars').childElementCount > 0")
    shoot(page, f"{tag}-next", section("#next"))

    # Try this, by its button: top-k 1 against greedy, the answer open, both runs compared.
    item = section("#try-top-k-1")
    item.get_by_role("button", name="Try it").click()
    page.wait_for_selector("#try-top-k-1[data-state=done]")
    item.locator("details.try-answer summary").click()
    shoot(page, f"{tag}-try-answer", item)
    shoot(page, f"{tag}-runs-compare", section("#runs"))

    # Tokens: a BPE run with the tokens shown, then a stop string inside a token.
    set_fields(page, Model="transformer", Dataset="prose", Tokenizer="bpe", Prompt="", Seed=3,
               Temperature=1, Top_k=0, Top_p=1, Max_new_tokens=40, Stop_strings="")
    page.get_by_label("Show tokens", exact=True).set_checked(True)
    generate(page)
    shoot(page, f"{tag}-bpe-text", section("#output"))
    generate(page, Stop_strings="e")
    shoot(page, f"{tag}-bpe-stop-inside", section("#output"))
    page.get_by_label("Show tokens", exact=True).set_checked(False)
    set_fields(page, Stop_strings="", Prompt="The man ")
    section("#prefill-run").click()
    page.wait_for_selector("#prefill-out:not([hidden])")
    shoot(page, f"{tag}-prefill", section("#prefill"))

    # Tool calls: the calculator in the text, a step the tool appended, the cache card.
    generate(page, Dataset="tasks", Prompt="What is 512 plus 399?", Greedy=True,
             Max_new_tokens=40)
    shoot(page, f"{tag}-tool-text", section("#output"))
    trace = json.loads(page.evaluate("() => window.decodelab.trace()"))
    tool = next(i for i, st in enumerate(trace["steps"]) if st["source"] == "tool")
    page.locator(f"#text-gen [data-step='{tool}']").click()
    page.wait_for_function(f"() => document.querySelector('#step-count').textContent"
                           f".startsWith('Step {tool + 1} ')")
    shoot(page, f"{tag}-tool-step", section("#inspector"))
    shoot(page, f"{tag}-tool-cache", section("#cache-card"))
    section("#reuse-run").click()
    page.wait_for_selector("#reuse-out:not([hidden])")
    shoot(page, f"{tag}-reuse", section("#reuse"))
    acc = section("#accuracy")
    acc.get_by_label("T values", exact=True).fill("0, 1")
    acc.get_by_label("Questions", exact=True).fill("3")
    acc.get_by_label("Samples per question", exact=True).fill("2")
    acc.get_by_role("button", name="Run experiment", exact=True).click()
    page.wait_for_selector("#accuracy:not([data-state=running]) #acc-results:not([hidden])")
    page.wait_for_function("() => /^Done/.test(document.querySelector('#acc-status').textContent)")
    shoot(page, f"{tag}-accuracy", acc)

    # Answers with a shape: a card in JSON mode, one card four ways, the validity experiment.
    generate(page, Greedy=False, Temperature=2, Seed=1, JSON_mode=True,
             Prompt='Card for "Ada", age 31, from "Paris".', Max_new_tokens=60)
    shoot(page, f"{tag}-json-run", section("#output"))
    set_fields(page, JSON_mode=False)
    section("#shapes-run").click()
    page.wait_for_selector("#shapes-out:not([hidden])")
    page.wait_for_function("() => document.querySelector('#shapes-status').textContent === ''")
    shoot(page, f"{tag}-shapes", section("#shapes-demo"))
    val = section("#validity")
    val.get_by_label("T values", exact=True).fill("0, 2")
    val.get_by_label("Token budgets", exact=True).fill("8, 40")
    val.get_by_label("Cards", exact=True).fill("2")
    val.get_by_label("Samples per card", exact=True).fill("2")
    val.get_by_role("button", name="Run experiment", exact=True).click()
    page.wait_for_function("() => /^Done/.test(document.querySelector('#validity-status').textContent)")
    shoot(page, f"{tag}-validity", val)

    # The Embed this dialog, for the workbench as it is now.
    section("#embed-open").click()
    page.wait_for_selector("#embed-dialog[open]")
    page.wait_for_function("() => document.querySelector('#embed-iframe').value.length > 0")
    shoot(page, f"{tag}-embed-dialog", section("#embed-dialog .ed-form"))
    page.keyboard.press("Escape")
    shoot(page, f"{tag}-lesson-page", full_page=True)
    page.context.close()


def start_up(browser, url, shoot):
    """The start-up screen while Python loads, a notice for bad link settings, a boot error."""
    page = new_page(browser, url, 1280)
    held = []
    # numpy's wheel is never answered: the start-up waits at "numpy" for ever
    page.context.route("**/pyodide/numpy-*.whl", lambda route: held.append(route))
    page.goto(url)
    page.wait_for_selector("[data-phase=numpy][data-state=active]")
    page.wait_for_timeout(500)
    shoot(page, "boot-loading", page.locator("header.masthead"))
    page.context.close()

    page = new_page(browser, url, 1280)

    def damaged(route):
        body = bytearray(route.fetch().body())
        body[len(body) // 2] ^= 0x01
        route.fulfill(status=200, body=bytes(body), headers={"content-type": "application/zip"})

    page.context.route("**/pyodide/python_stdlib.zip", damaged)
    page.goto(url)
    page.wait_for_selector("html[data-state=error]")
    shoot(page, "boot-error", page.locator("header.masthead"))
    page.context.close()

    for width, scheme in ((1280, "light"), (360, "dark")):
        page = new_page(browser, url, width, scheme)
        page.goto(url + "?temperature=hot&top_k=3&seed=5")
        wait_ready(page)
        shoot(page, f"link-notice-{width}-{scheme}", page.locator("#main"))
        page.context.close()


def course_pages(widget_url: str) -> Path:
    """The embedding tests' host pages, plus one with a dark, narrow widget, for `widget_url`."""
    root = Path(tempfile.mkdtemp(prefix="decodelab-look-"))
    for path in HOSTS.iterdir():
        root.joinpath(path.name).write_text(path.read_text().replace("{{WIDGET}}", widget_url)
                                            .replace("{{ROGUE}}", widget_url))
    root.joinpath("dark.html").write_text(f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Dark widget</title>
<link rel="stylesheet" href="host.css"><script type="module" src="{widget_url}element.js"></script>
</head><body><main><h1>The widget, dark</h1>
<decodelab-embed theme="dark" lazy="none" dataset="names" prompt="ka" seed="9" max-new-tokens="10"
  ignore-eos="true" panels="controls,text,inspector"></decodelab-embed>
</main><script type="module" src="host.js"></script></body></html>
""")
    return root


def widget(page):
    return next(f for f in page.frames
                if f.url.startswith("http://localhost") and "index.html" in f.url)


def fit(page):
    """Wait until the iframe's height has stopped following the widget, then show all of it."""
    last = None
    for _ in range(40):
        page.wait_for_timeout(250)
        now = page.evaluate("() => document.querySelector('decodelab-embed iframe').offsetHeight")
        if now == last:
            break
        last = now
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.set_viewport_size({"width": page.viewport_size["width"], "height": height})
    page.wait_for_timeout(300)


def embedding(browser, static, shoot):
    """The widget in course pages (another origin), and its poster."""
    widget_server, widget_url = serve(static, host="localhost")
    host_server, host_url = serve(course_pages(widget_url), host="127.0.0.1")
    try:
        for name, width, scheme, step in (("course", 1100, "light", 3), ("dark", 420, "dark", 2)):
            context = browser.new_context(viewport={"width": width, "height": 900},
                                          color_scheme=scheme)
            page = context.new_page()
            page.set_default_timeout(BOOT_TIMEOUT_MS)
            page.goto(host_url + f"{name}.html")
            page.wait_for_function("() => window.seen.some((m) => m.type === 'ready')")
            page.evaluate("() => document.querySelector('decodelab-embed').generate()")
            frame = widget(page)
            frame.locator("#text-gen [data-step]").nth(step).click()
            fit(page)
            shoot(page, f"embed-{name}-{width}-{scheme}", frames=[frame])
            context.close()

        context = browser.new_context(viewport={"width": 1100, "height": 900})
        page = context.new_page()
        page.goto(host_url + "click.html")
        page.wait_for_function("() => window.seen.some((m) => m.type === 'height')")
        fit(page)
        shoot(page, "embed-poster-in-host-1100-light")
        context.close()

        for width, theme in ((1100, "light"), (360, "dark"), (700, "dark")):
            context = browser.new_context(viewport={"width": width, "height": 600})
            page = context.new_page()
            page.goto(widget_url + "embed.html?lazy=click&dataset=names&prompt=ma&seed=3"
                      f"&temperature=0.8&theme={theme}")
            page.wait_for_selector("#poster-settings:not([hidden])")
            shoot(page, f"poster-{width}-{theme}", page.locator("body"))
            context.close()
    finally:
        host_server.shutdown()
        widget_server.shutdown()


# The names of the states start_up() and embedding() save, for --only.
START_UP = ("boot-loading", "boot-error", "link-notice-1280-light", "link-notice-360-dark")
EMBEDDING = ("embed-course-1100-light", "embed-dark-420-dark", "embed-poster-in-host-1100-light",
             "poster-1100-light", "poster-360-dark", "poster-700-dark")

LESSON_COMBOS = ("w1280-light", "w360-dark")  # the lesson's panels: two of the four
COMBOS = (("w1280-light", 1280, "light", None), ("w1280-dark", 1280, "dark", None),
          ("w360-light", 360, "light", None), ("w360-dark", 360, "light", "dark"))


def capture(out: Path, only: str | None, styles: bool = False, site: Path = STATIC) -> int:
    from playwright.sync_api import sync_playwright

    if not (site / "index.html").exists():
        print(f"{site} holds no built site (python3 build.py build makes static/)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    shoot = Shooter(out, only, styles)
    server, url = serve(site)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            tags = [tag for tag, *_ in COMBOS]
            elsewhere = any(map(shoot.wanted, START_UP + EMBEDDING))
            for tag, width, scheme, theme in COMBOS:
                named = any(only in t or t in only for t in tags) if only else False
                if not only or only in tag or tag in only or not (named or elsewhere):
                    print(f"{tag}:", flush=True)
                    workbench(browser, url, shoot, tag, width, scheme, theme)
                    if tag in LESSON_COMBOS:
                        lesson(browser, url, shoot, tag, width, scheme, theme)
            if any(map(shoot.wanted, START_UP)):
                print("start-up:", flush=True)
                start_up(browser, url, shoot)
            if any(map(shoot.wanted, EMBEDDING)):
                print("embedding:", flush=True)
                embedding(browser, site, shoot)
            browser.close()
    finally:
        server.shutdown()
    print(f"{len(shoot.names)} states in {out}")
    return 0


# --- comparing ---------------------------------------------------------------------------------

# Decodes two PNGs in the page and compares them pixel by pixel, in bands of rows (a canvas has
# a size limit, a tall full-page shot does not). Returns the size, the number of pixels that
# differ, the largest difference in any channel, and the places where they differ (rows less than
# 40 pixels apart count as one place), each with its box and a PNG of it: the "after" image
# faded, changed pixels in red.
DIFF = """
async ([a, b]) => {
  const load = async (b64) => {
    const blob = await (await fetch("data:image/png;base64," + b64)).blob();
    return createImageBitmap(blob, { colorSpaceConversion: "none", premultiplyAlpha: "none" });
  };
  const [one, two] = await Promise.all([load(a), load(b)]);
  const size = (i) => [i.width, i.height];
  if (one.width !== two.width || one.height !== two.height) return { size: [size(one), size(two)] };
  const w = one.width, band = 2048;
  const read = (image, y0, h) => {
    const c = new OffscreenCanvas(w, h).getContext("2d", { willReadFrequently: true });
    c.drawImage(image, 0, y0, w, h, 0, 0, w, h);
    return c.getImageData(0, 0, w, h);
  };
  let count = 0, max = 0;
  const places = [];
  for (let y0 = 0; y0 < one.height; y0 += band) {
    const h = Math.min(band, one.height - y0);
    const d1 = read(one, y0, h).data, d2 = read(two, y0, h).data;
    for (let i = 0; i < d1.length; i += 4) {
      const d = Math.max(Math.abs(d1[i] - d2[i]), Math.abs(d1[i + 1] - d2[i + 1]),
                         Math.abs(d1[i + 2] - d2[i + 2]), Math.abs(d1[i + 3] - d2[i + 3]));
      if (!d) continue;
      count += 1;
      max = Math.max(max, d);
      const x = (i / 4) % w, y = y0 + Math.floor(i / 4 / w);
      const last = places[places.length - 1];
      if (last && y - last.box[3] < 40) {
        last.count += 1;
        last.box = [Math.min(last.box[0], x), last.box[1], Math.max(last.box[2], x), y];
      } else {
        places.push({ count: 1, box: [x, y, x, y] });
      }
    }
  }
  for (const place of places.slice(0, 6)) {
    const [x0, y0, x1, y1] = place.box, m = 12;
    const bx = Math.max(0, x0 - m), by = Math.max(0, y0 - m);
    const bw = Math.min(w, x1 + m + 1) - bx, bh = Math.min(one.height, y1 + m + 1, by + 2000) - by;
    const out = new OffscreenCanvas(bw, bh);
    const ox = out.getContext("2d", { willReadFrequently: true });
    ox.drawImage(two, bx, by, bw, bh, 0, 0, bw, bh);
    const rc = new OffscreenCanvas(bw, bh).getContext("2d", { willReadFrequently: true });
    rc.drawImage(one, bx, by, bw, bh, 0, 0, bw, bh);
    const img = ox.getImageData(0, 0, bw, bh), p = img.data;
    const ref = rc.getImageData(0, 0, bw, bh).data;
    for (let i = 0; i < p.length; i += 4) {
      if (p[i] === ref[i] && p[i + 1] === ref[i + 1] && p[i + 2] === ref[i + 2]
          && p[i + 3] === ref[i + 3]) {
        for (let k = 0; k < 3; k++) p[i + k] = 255 - (255 - p[i + k]) * 0.25;
      } else {
        p.set([230, 0, 0, 255], i);
      }
    }
    ox.putImageData(img, 0, 0);
    const blob = await out.convertToBlob({ type: "image/png" });
    const bytes = new Uint8Array(await blob.arrayBuffer());
    let text = "";
    for (let i = 0; i < bytes.length; i += 32768) {
      text += String.fromCharCode(...bytes.subarray(i, i + 32768));
    }
    place.png = btoa(text);
  }
  return { size: [size(one)], count, max, places };
}
"""


def style_changes(a: Path, b: Path, show: int = 6) -> list[str]:
    """The computed styles that differ between two captures of a state, as lines of text."""
    def load(path):
        with gzip.open(path, "rt") as f:
            return json.load(f)

    out = []
    for frame, (one, two) in enumerate(zip(load(a), load(b))):
        if one[1] != two[1]:
            out.append(f"frame {frame}: the elements differ ({len(one[1])} -> {len(two[1])})")
            continue
        props = sorted(set(one[0]) & set(two[0]))
        if set(one[0]) ^ set(two[0]):
            out.append(f"frame {frame}: properties set in one stylesheet only, not compared: "
                       + ", ".join(sorted(set(one[0]) ^ set(two[0]))))

        def values(dump, i):
            return dict(zip(dump[0], dump[2][dump[3][i]].split("\n")))

        changed = []
        for i in range(len(one[1])):
            if one[0] == two[0] and one[2][one[3][i]] == two[2][two[3][i]]:
                continue
            x, y = values(one, i), values(two, i)
            diff = [f"{k}: {x[k]} -> {y[k]}" for k in props if x[k] != y[k]]
            if diff:
                changed.append(f"frame {frame} {one[1][i]}: " + "; ".join(diff[:6]))
        out += changed[:show]
        if len(changed) > show:
            out.append(f"frame {frame}: {len(changed) - show} more elements with other styles")
    return out


def pixels(page, name: str, one: bytes, two: bytes, diffs: Path) -> str | None:
    """None if two PNGs show the same pixels, else what differs (with images of it in diffs)."""
    if one == two:
        return None
    r = page.evaluate(DIFF, [base64.b64encode(one).decode(), base64.b64encode(two).decode()])
    if len(r["size"]) == 2:
        return f"size {r['size'][0]} -> {r['size'][1]}"
    if r["count"] == 0:
        return None
    diffs.mkdir(parents=True, exist_ok=True)
    where = []
    for n, place in enumerate(r["places"], 1):
        x0, y0, x1, y1 = place["box"]
        text = f"{place['count']} in x {x0}-{x1}, y {y0}-{y1}"
        if "png" in place:
            (diffs / f"{name}-{n}.png").write_bytes(base64.b64decode(place["png"]))
            text += f" ({name}-{n}.png)"
        where.append(text)
    return (f"{r['count']} pixels, largest channel difference {r['max']}: " + "; ".join(where))


def compare(before: Path, after: Path, diffs: Path) -> int:
    from playwright.sync_api import sync_playwright

    names = sorted({p.stem for p in before.glob("*.png")} | {p.stem for p in after.glob("*.png")})
    if not names:
        print(f"no PNGs in {before} or {after}", file=sys.stderr)
        return 2
    same = 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        for name in names:
            a, b = before / f"{name}.png", after / f"{name}.png"
            if not a.exists() or not b.exists():
                print(f"{name}: only in {(a if a.exists() else b).parent}")
                continue
            shown = pixels(page, name, a.read_bytes(), b.read_bytes(), diffs)
            sa, sb = (d / f"{name}.styles.json.gz" for d in (before, after))
            styles = style_changes(sa, sb) if sa.exists() and sb.exists() else None
            verdict = "identical pixels" if shown is None else f"DIFFERENT: {shown}"
            if styles is not None:
                verdict += ", computed styles " + ("identical" if not styles else "DIFFERENT")
            print(f"{name}: {verdict}")
            for line in styles or ():
                print(f"    {line}")
            same += shown is None and not styles
        browser.close()
    print(f"{same} of {len(names)} states identical")
    return 0 if same == len(names) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="screenshot every state of the built site into DIR")
    cap.add_argument("dir", type=Path)
    cap.add_argument("--only", help="only the states whose name contains this")
    cap.add_argument("--site", type=Path, default=STATIC,
                     help="the built site to serve (default: static/), e.g. a copy of an older build")
    cap.add_argument("--styles", action="store_true",
                     help="also save every element's computed style in each state "
                          "(compare then checks them too)")
    cmp_ = sub.add_parser("compare", help="compare two capture folders pixel by pixel")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    cmp_.add_argument("--diffs", type=Path, help="where to write images of the differences")
    args = parser.parse_args()
    if args.command == "capture":
        return capture(args.dir, args.only, args.styles, args.site)
    return compare(args.before, args.after, args.diffs or args.after.parent / "diffs")


if __name__ == "__main__":
    sys.exit(main())
