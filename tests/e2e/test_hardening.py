"""Hardening end to end: a subfolder host path, Stop latency, long soaks with the main thread kept
responsive and memory bounded, a worker that hangs, crashes or fails and is restarted with the
learner's settings kept, every runtime file hash-checked, no request outside the origin, a
strict Content-Security-Policy, and markup in every text input rendered as text.

Timing thresholds are the behaviour the issue asks for (Stop within 200 ms, no long task over
100 ms); these machines are shared and noisy, so each is measured with margins, not tuned."""

import json
import re
import shutil
from urllib.parse import urlencode, urlsplit

import pytest

from tests.e2e.conftest import BOOT_TIMEOUT_MS, OfflineGuard, open_page, serve, wait_ready
from tests.e2e.test_page import generate, generated_text, reset, set_fields, settle

pytestmark = pytest.mark.browser

LONG_TASKS = """() => {
    window.__long = [];
    window.__runs = [];  // [start, end] of each run, from the request to the first frames after it
    new PerformanceObserver(list => window.__long.push(...list.getEntries().map(e => [e.startTime, e.duration])))
        .observe({type: 'longtask'});
}"""

TIMED_RUN = """async (s) => {
    const t0 = performance.now();
    const result = await window.decodelab.generate(s);
    await new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok)));
    window.__runs.push([t0, performance.now()]);
    return result;
}"""


def long_tasks_during_runs(page):
    """Durations (ms) of the main-thread long tasks that overlapped a run (TIMED_RUN): the
    measuring between runs (a forced garbage collection, memory reports) is not the page's."""
    page.wait_for_timeout(200)  # long-task entries reach the observer a little later
    return page.evaluate("""() => window.__long.filter(([t, d]) => window.__runs.some(
        ([a, b]) => t < b && t + d > a)).map(([, d]) => Math.round(d))""")


def js_heap(page):
    """The page's live JS heap in bytes, after a full garbage collection (so garbage waiting
    for the collector, which depends on the machine's load, is not counted as growth)."""
    cdp = page.context.new_cdp_session(page)
    try:
        cdp.send("HeapProfiler.collectGarbage")
        return cdp.send("Runtime.getHeapUsage")["usedSize"]
    finally:
        cdp.detach()


def test_site_works_from_a_subfolder(chromium, site_root, tmp_path):
    shutil.copytree(site_root, tmp_path / "courses" / "week-3" / "decodelab")
    server, url = serve(tmp_path)
    try:
        page = wait_ready(open_page(chromium, url, "courses/week-3/decodelab/"))
        page.evaluate("s => window.decodelab.generate(s)", {"seed": 1, "max_new_tokens": 8,
                                                            "ignore_eos": True})
        page.wait_for_selector("html[data-state=ready]")
        assert len(generated_text(page)) == 8
        assert page.guard.blocked == [] and page.errors == []
        page.context.close()
    finally:
        server.shutdown()


def test_stop_ends_a_run_within_200_ms(app):
    reset(app, Seed=2, Max_new_tokens=10000, Ignore_EOS=True)
    app.get_by_role("button", name="Generate", exact=True).click()
    app.wait_for_function("() => document.querySelectorAll('#text-gen [data-step]').length > 50")
    elapsed = app.evaluate("""() => new Promise(resolve => {
        const t0 = performance.now();
        const watch = new MutationObserver(() => {
            if (document.documentElement.dataset.state === 'ready') {
                watch.disconnect(); resolve(performance.now() - t0);
            }
        });
        watch.observe(document.documentElement, {attributes: true});
        document.querySelector('#stop-button').click();
    })""")
    settle(app)
    assert "Stopped by you" in app.get_by_role("region", name="Finish reason").inner_text()
    assert elapsed < 200, f"Stop took {elapsed:.0f} ms"


def soak(page, runs):
    """Generate each of `runs` (EOS ignored, so one character per step) in one page session;
    return the JS heap and the worker's memory after each, and the long tasks during them."""
    page.evaluate(LONG_TASKS)
    heaps, memory = [], []
    for settings in runs:
        result = page.evaluate(TIMED_RUN, {**settings, "ignore_eos": True})
        page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
        steps = settings["max_new_tokens"]
        assert result["status"] == "done" and result["steps"] == steps
        assert len(generated_text(page)) == steps
        heaps.append(js_heap(page))
        memory.append(page.evaluate("() => window.decodelab.memory()"))
    long_tasks = long_tasks_during_runs(page)
    print(f"soak: JS heap after GC {heaps}, wasm {[m['wasm_bytes'] for m in memory]}, "
          f"long tasks {long_tasks}")
    return heaps, memory, long_tasks


def assert_responsive_and_bounded(heaps, memory, long_tasks, since):
    # the page stayed responsive: no task on the main thread took over 100 ms
    assert max(long_tasks, default=0) < 100, long_tasks
    # the page keeps one run on screen: over the later runs the live heap has not grown by
    # 2 MB (one bigram run of 5,000 steps holds about 4 MB of step records)
    assert heaps[-1] < heaps[since] + 2e6, heaps
    # the WebAssembly memory and Python's live objects do not grow with each run
    assert memory[-1]["wasm_bytes"] <= memory[since]["wasm_bytes"] * 1.1, memory
    assert memory[-1]["python_objects"] < memory[since]["python_objects"] + 2000, memory


def test_soak_keeps_the_main_thread_responsive_and_memory_bounded(app):
    reset(app)
    # 4 x 5,000 = 20,000 bigram tokens in one page session
    heaps, memory, long_tasks = soak(app, [{"seed": seed, "max_new_tokens": 5000}
                                           for seed in range(1, 5)])
    # the heap from the first run on; Python keeps the latest run and the one before it (for
    # the trace and the lesson), so its memory is compared from the second run
    assert heaps[-1] < heaps[0] + 2e6, heaps
    assert_responsive_and_bounded(heaps, memory, long_tasks, since=1)
    # long runs stream through the cheap path: most characters are sealed into plain text
    assert app.evaluate("() => window.decodelab.health.sealedText") > 0


FIRST_SEALED_CHAR = """n => {
    const stand = document.querySelectorAll('#text-gen .tok-sealed')[n];
    let offset = 0;  // characters before it: with EOS ignored, one character per step
    for (let node = stand.previousSibling; node; node = node.previousSibling) offset += node.textContent.length;
    const range = document.createRange();
    const text = [...stand.childNodes].find(c => c.nodeType === 3);
    range.setStart(text, 0);
    range.setEnd(text, 1);
    const r = range.getClientRects()[0];
    return {step: offset, x: r.x + r.width / 2, y: r.y + r.height / 2};
}"""


def test_a_sealed_character_of_a_long_run_can_still_be_inspected(app):
    reset(app)
    app.evaluate("s => window.decodelab.generate(s)", {"seed": 3, "max_new_tokens": 3000,
                                                       "ignore_eos": True})
    app.wait_for_selector("html[data-state=ready]")
    assert app.locator("#text-gen .tok-sealed").count() >= 2
    assert app.locator("#text-gen [data-step='0']").count() == 0  # sealed: not in the page now
    # the keyboard reaches sealed steps: Home from the last character selects the first
    app.locator("#text-gen [data-step='2999']").focus()
    app.keyboard.press("Home")
    assert app.locator("#step-count").inner_text() == "Step 1 of 3000"
    assert app.evaluate("() => document.activeElement.dataset.step") == "0"
    # a click on sealed text selects the character under the pointer
    app.locator("#text-gen .tok-sealed").first.scroll_into_view_if_needed()
    target = app.evaluate(FIRST_SEALED_CHAR, 0)
    app.mouse.click(target["x"], target["y"])
    assert app.locator("#step-count").inner_text() == f"Step {target['step'] + 1} of 3000"
    span = app.locator(f"#text-gen [data-step='{target['step']}']")
    assert span.get_attribute("aria-pressed") == "true"
    assert len(generated_text(app)) == 3000  # putting the spans back changed no text


def test_transformer_soak_keeps_the_main_thread_responsive_and_memory_bounded(app):
    # 4 x 1,250 = 5,000 transformer tokens, after the bigram soak
    runs = [{"model": "transformer", "max_new_tokens": 1250, "cache_check": False, "seed": seed}
            for seed in range(5, 9)]
    assert_responsive_and_bounded(*soak(app, runs), since=1)


# --- the worker stops answering, crashes, or Python fails: restarted, settings kept -------------

@pytest.fixture(scope="module")
def faulty(chromium, base_url):
    """A page whose worker accepts injected faults, with a short watchdog."""
    page = wait_ready(open_page(chromium, base_url, "?faults=1&watchdog=4000"))
    page.get_by_text("Train on your own text").click()
    page.get_by_label("Your text", exact=True).fill("abba\nbaab\nabab\nbbaa\n" * 10)
    page.get_by_role("button", name="Train bigram").click()
    page.wait_for_function("() => document.querySelector('#dataset').value === 'custom'")
    yield page
    page.context.close()


def form_values(page):
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll(
        '#settings [name]')].map(e => [e.name, e.type === 'checkbox' ? e.checked : e.value]))""")


def recover(page, kind):
    """Inject a fault and wait for the page to come back; return what the status says."""
    restarts = page.evaluate("() => window.decodelab.health.restarts")
    page.evaluate("k => window.decodelab.injectFault(k)", kind)
    page.wait_for_function("n => window.decodelab.health.restarts > n", arg=restarts,
                           timeout=30_000)
    wait_ready(page)
    return page.locator("#status").inner_text()


def test_a_hung_worker_is_restarted_and_the_run_in_flight_gives_way(faulty):
    page = faulty
    reset(page, Dataset="custom", Prompt="ab", Seed=7, Temperature=0.8, Max_new_tokens=10000,
          Ignore_EOS=True, Slow_motion=True)
    before = form_values(page)
    page.get_by_role("button", name="Generate", exact=True).click()
    page.wait_for_function("() => document.querySelectorAll('#text-gen [data-step]').length > 2")
    status = recover(page, "hang")
    assert "stopped answering" in status and "settings are kept" in status
    # a page from a plain static host is not isolated: no interrupt, the worker was replaced
    assert not page.evaluate("() => self.crossOriginIsolated")
    health = page.evaluate("() => window.decodelab.health")
    assert not health["interruptible"] and health["interrupts"] == 0
    assert page.evaluate("() => window.decodelab.lastRun")["status"] == "error"
    finish = page.get_by_role("region", name="Finish reason").inner_text()
    assert "stopped answering" in finish and "kept" in finish
    assert form_values(page) == before
    shown = generated_text(page)
    assert len(shown) > 2 and set(shown) <= {"a", "b"}  # the text so far stays on screen
    # the learner's own text was trained again in the new worker
    set_fields(page, Max_new_tokens=40, Slow_motion=False)
    page.get_by_role("button", name="Generate", exact=True).click()
    assert settle(page)["status"] == "done"
    assert set(generated_text(page)) <= {"a", "b"} and len(generated_text(page)) == 40


@pytest.mark.parametrize("kind, words", [("crash", "crashed"), ("fatal", "Python failed")])
def test_a_crashed_worker_is_restarted_with_settings_and_output_kept(faulty, kind, words):
    page = faulty
    reset(page, Dataset="custom", Prompt="ba", Seed=11, Max_new_tokens=30, Ignore_EOS=True)
    good = generate(page)
    assert good["status"] == "done"
    before, shown = form_values(page), generated_text(page)
    trace = page.evaluate("() => window.decodelab.trace()")
    status = recover(page, kind)
    assert "started again" in status
    assert words in page.get_by_role("region", name="Finish reason").inner_text()
    assert form_values(page) == before  # the settings, the trained dataset chosen
    assert generated_text(page) == shown  # the last good output stays on screen
    # the new worker made the run on screen again: its trace and the lesson's step view work
    page.wait_for_function("() => window.decodelab.lastRun && !document.querySelector('#export').disabled")
    assert page.evaluate("() => window.decodelab.trace()") == trace
    step = page.evaluate("() => window.decodelab.lesson.explain(4)")
    assert step["ok"] and step["matches_record"]
    page.get_by_role("button", name="Generate", exact=True).click()
    again = settle(page)
    assert again["status"] == "done" and again["text"] == good["text"]  # same seed, same text
    unexpected = [e for e in page.errors if "fatal" not in e.lower() and "on purpose" not in e]
    assert unexpected == []


def test_a_new_run_right_after_a_restart_wins_over_making_the_old_one_again(chromium, base_url):
    # a page of its own: the restarts of the tests above count towards giving up
    page = wait_ready(open_page(chromium, base_url, "?faults=1&watchdog=4000"))
    reset(page, Seed=5, Max_new_tokens=10000, Ignore_EOS=True)
    assert generate(page)["steps"] == 10000  # a long run: making it again takes a while
    recover(page, "crash")
    set_fields(page, Seed=6, Max_new_tokens=20)
    page.get_by_role("button", name="Generate", exact=True).click()  # while the restore runs
    new = settle(page)
    assert new["status"] == "done" and new["steps"] == 20
    trace = json.loads(page.evaluate("() => window.decodelab.trace()"))
    assert trace["text"] == new["text"] and len(trace["steps"]) == 20  # the new run, not the old
    assert not page.locator("#export").is_disabled()
    page.context.close()


def test_a_worker_that_fails_again_while_restarting_is_given_up_in_words(chromium, base_url):
    page = wait_ready(open_page(chromium, base_url, "?faults=1&watchdog=4000"))
    reset(page, Seed=9)
    page.evaluate("() => { window.decodelab.injectFault('crash'); }")
    page.wait_for_function("() => window.decodelab.health.recovering")
    page.evaluate("() => window.decodelab.injectFault('crash')")  # the new worker, while it starts
    page.wait_for_selector("html[data-state=error]", timeout=30_000)
    assert "stopped again while starting" in page.locator("#boot-error-message").inner_text()
    assert page.get_by_label("Seed", exact=True).input_value() == "9"  # the settings stay
    page.context.close()


@pytest.fixture(scope="module")
def isolated(chromium, site_root):
    """The page from a server that makes it cross-origin isolated (as `build.py serve` does),
    with faults injectable and a short watchdog."""
    server, url = serve(site_root, isolated=True)
    page = wait_ready(open_page(chromium, url, "?faults=1&watchdog=3000"))
    yield page
    page.context.close()
    server.shutdown()


def test_an_isolated_page_interrupts_a_stuck_python_call_instead_of_restarting(isolated):
    page = isolated
    assert page.evaluate("() => self.crossOriginIsolated && window.decodelab.health.interruptible")
    reset(page, Seed=4, Max_new_tokens=30, Ignore_EOS=True)
    good = generate(page)
    trace = page.evaluate("() => window.decodelab.trace()")
    # Python hangs while a slow-motion run is between steps
    set_fields(page, Slow_motion=True)
    page.get_by_role("button", name="Generate", exact=True).click()
    page.wait_for_function("() => document.querySelectorAll('#text-gen [data-step]').length > 1")
    before = form_values(page)
    page.evaluate("() => window.decodelab.injectFault('hang')")
    page.wait_for_function("() => window.decodelab.health.interrupts === 1", timeout=30_000)
    status = page.locator("#status").inner_text()
    assert "interrupted" in status and "kept" in status
    # nothing was restarted: the run in flight goes on to its end, the same text as before
    done = settle(page)
    assert done["status"] == "done" and done["text"] == good["text"]
    assert page.evaluate("() => window.decodelab.health.restarts") == 0
    assert form_values(page) == before
    # the same worker finished the run it was in: its trace is whole, step for step the same
    again = json.loads(page.evaluate("() => window.decodelab.trace()"))
    assert again["steps"] == json.loads(trace)["steps"]
    assert page.errors == []


def test_faults_cannot_be_injected_without_the_switch(app):
    assert app.evaluate("() => typeof window.decodelab.injectFault") == "undefined"
    assert app.evaluate("() => window.decodelab.health.restarts") == 0


# --- offline and integrity --------------------------------------------------------------------

def test_boot_and_run_attempt_no_request_outside_the_origin(chromium, base_url):
    context = chromium.new_context()
    guard = OfflineGuard(context, base_url)
    seen = []
    context.on("request", lambda r: seen.append(r.url))
    # the guard works: a request to another host is caught and recorded
    probe = context.new_page()
    probe.goto(base_url + "favicon.svg")
    probe.evaluate("() => fetch('http://192.0.2.1/probe').catch(() => null)")
    assert guard.blocked == ["http://192.0.2.1/probe"]
    guard.blocked.clear()
    probe.close()
    seen.clear()
    page = context.new_page()
    page.goto(base_url)
    wait_ready(page)
    result = page.evaluate("s => window.decodelab.generate(s)",
                           {"seed": 3, "max_new_tokens": 30, "model": "transformer"})
    assert result["status"] == "done"
    origin = "{0.scheme}://{0.netloc}/".format(urlsplit(base_url))
    assert guard.blocked == []
    assert [u for u in seen if not u.startswith((origin, "data:", "blob:"))] == []
    # the worker's own downloads were seen too, so nothing went unobserved
    assert any(u.endswith("pyodide.asm.wasm") for u in seen)
    assert any(u.endswith("integrity.json") for u in seen)
    context.close()


@pytest.mark.parametrize("name", ["pyodide.asm.wasm", "pyodide.asm.js", "python_stdlib.zip"])
def test_a_damaged_runtime_file_stops_the_start_naming_the_file(chromium, site_root, tmp_path, name):
    site = tmp_path / "site"
    shutil.copytree(site_root, site)
    target = site / "pyodide" / name
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit
    target.write_bytes(bytes(data))
    server, url = serve(site)
    try:
        page = open_page(chromium, url)
        page.wait_for_selector("html[data-state=error]", timeout=BOOT_TIMEOUT_MS)
        message = page.locator("#boot-error-message").inner_text()
        assert f"pyodide/{name}" in message and "integrity check" in message, message
        page.context.close()
    finally:
        server.shutdown()


def test_every_runtime_file_is_listed_with_its_hash(site_root):
    import hashlib
    import json

    listed = {f["path"]: f for f in json.loads((site_root / "pyodide" / "integrity.json").read_text())["files"]}
    on_disk = {p.name for p in (site_root / "pyodide").iterdir() if p.name != "integrity.json"}
    assert set(listed) == on_disk
    for name, row in listed.items():
        assert hashlib.sha256((site_root / "pyodide" / name).read_bytes()).hexdigest() == row["sha256"]


# --- content security -------------------------------------------------------------------------

CSP_WATCH = """window.__csp = [];
document.addEventListener('securitypolicyviolation',
    e => window.__csp.push([e.effectiveDirective, e.blockedURI, e.sourceFile, e.lineNumber]));"""


def policy(html):
    match = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert match, "no Content-Security-Policy meta"
    return {d.split()[0]: d.split()[1:] for d in match.group(1).split("; ")}


@pytest.mark.parametrize("page_name", ["index.html", "embed.html"])
def test_the_pages_carry_a_strict_policy(site_root, page_name):
    p = policy((site_root / page_name).read_text())
    assert p["default-src"] == ["'none'"] and p["object-src"] == ["'none'"]
    assert p["base-uri"] == ["'none'"]
    assert p["script-src"] == ["'self'"]  # no inline script, no eval (Pyodide runs in the worker)
    assert p["worker-src"] == ["'self'"] and p["style-src"] == ["'self'"]
    assert p["connect-src"] == ["'self'"]
    for page_html in ("index.html", "embed.html"):
        html = (site_root / page_html).read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html)  # every script from a file
        assert " style=" not in html and not re.search(r"\son[a-z]+=", html)


@pytest.mark.parametrize("isolated", [False, True], ids=["static-host", "cross-origin-isolated"])
def test_the_page_works_under_its_policy_with_no_violation(chromium, base_url, site_root, isolated):
    server = None
    if isolated:  # the headers `build.py serve` sends: COOP, COEP, CORP
        server, base_url = serve(site_root, isolated=True)
    try:
        check_page_under_policy(chromium, base_url, isolated)
    finally:
        if server:
            server.shutdown()


def check_page_under_policy(chromium, base_url, isolated):
    context = chromium.new_context(accept_downloads=True)
    OfflineGuard(context, base_url)
    context.add_init_script(CSP_WATCH)
    page = context.new_page()
    page.goto(base_url)
    wait_ready(page)
    reset(page, Seed=4, Max_new_tokens=40, Ignore_EOS=True, Stop_strings="xq")
    generate(page)
    page.locator("#text-gen [data-step='2']").click()
    with page.expect_download():
        page.get_by_role("button", name="Export trace", exact=True).click()
    page.get_by_text("Train on your own text").click()
    page.get_by_label("Your text", exact=True).fill("abc\ncab\n" * 5)
    page.get_by_role("button", name="Train bigram").click()
    page.wait_for_function("() => document.querySelector('#dataset').value === 'custom'")
    assert generate(page, Model="transformer", Dataset="names")["status"] == "done"
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__csp") == []
    assert page.evaluate("() => window.decodelab.health.violations") == []  # inside the worker
    # and the policy bites: an inline script put into the page does not run
    page.evaluate("""() => { const s = document.createElement('script');
        s.textContent = 'window.__inline = 1'; document.body.append(s); }""")
    page.wait_for_function("() => window.__csp.length > 0")
    assert page.evaluate("() => window.__inline") is None
    assert page.evaluate("() => window.__csp[0][0]") == "script-src-elem"
    assert page.evaluate("() => self.crossOriginIsolated") is isolated
    context.close()


def test_the_worker_is_served_with_its_own_policy(base_url):
    import urllib.request

    with urllib.request.urlopen(base_url + "worker.js") as response:
        header = response.headers.get("Content-Security-Policy", "")
    assert "script-src 'self' 'wasm-unsafe-eval'" in header and "connect-src 'self'" in header
    assert "'unsafe-eval'" not in header.replace("'wasm-unsafe-eval'", "")


# --- untrusted text is shown as text, never run -----------------------------------------------

PAYLOADS = ['<img src=x onerror="window.__pwned=1">', "<script>window.__pwned=1</script>",
            '"><svg onload=window.__pwned=1>']
INJECTED = "#text-gen img, #text-gen svg, #text-gen script, #inspector img, #inspector script"


def test_markup_in_inputs_is_only_ever_text(app):
    for payload in PAYLOADS:
        set_fields(app, Prompt=payload)
        app.get_by_role("button", name="Generate", exact=True).click()
        app.wait_for_function("() => document.body.innerText.includes('never seen')")
        set_fields(app, Prompt="", Stop_strings=payload + "\nab")
        app.get_by_role("button", name="Generate", exact=True).click()
        settle(app)
        app.get_by_text("Train on your own text").click() if not app.get_by_label(
            "Your text", exact=True).is_visible() else None
        app.get_by_label("Your text", exact=True).fill(payload + "\nabc abc\n")
        app.get_by_role("button", name="Train bigram").click()
        app.wait_for_function("() => document.querySelector('#dataset').value === 'custom'")
        result = app.evaluate("s => window.decodelab.generate(s)",
                              {"dataset": "custom", "seed": 3, "max_new_tokens": 40,
                               "ignore_eos": True, "stop": [payload]})
        app.wait_for_selector("html[data-state=ready]")
        assert result["status"] == "done"
        # the trained text's characters (markup included) come back as plain characters
        assert set(generated_text(app)) <= set(payload + "abc ")
    assert app.evaluate("() => window.__pwned") is None
    assert app.locator(INJECTED).count() == 0
    reset(app)


def test_markup_in_url_parameters_is_only_ever_text(chromium, base_url):
    payload = PAYLOADS[0]
    query = urlencode([("prompt", payload), ("stop", payload), ("stop", PAYLOADS[1]),
                       ("seed", payload), (payload, "1"), ("theme", payload), ("panels", payload),
                       ("host", payload), ("dataset", PAYLOADS[2])])
    page = wait_ready(open_page(chromium, base_url, "?" + query))
    notice = page.locator("#link-notice")
    notice.wait_for()
    assert payload in notice.inner_text()  # shown, as text, naming each setting
    for name in ("theme", "panels", "host", "Seed", "Dataset", "Unknown setting"):
        assert name in notice.inner_text()
    assert page.get_by_label("Stop strings", exact=True).input_value().split("\n") == PAYLOADS[:2]
    result = page.evaluate("s => window.decodelab.generate(s)", {"seed": 2, "max_new_tokens": 60,
                                                                  "stop": PAYLOADS})
    assert result["status"] == "done"
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("#link-notice img, #link-notice svg, #link-notice script").count() == 0
    assert page.locator(INJECTED).count() == 0
    assert page.errors == []
    page.context.close()


def test_markup_in_host_messages_is_only_ever_text(chromium, site_root, tmp_path):
    widget_server, widget = serve(site_root, host="localhost")
    (tmp_path / "host.html").write_text(
        '<!doctype html><meta charset="utf-8"><title>host</title>'
        f'<iframe src="{widget}index.html?embed=true" width="1000" height="900"></iframe>')
    host_server, host = serve(tmp_path, host="127.0.0.1")
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(host + "host.html")
        frame = page.frame_locator("iframe")
        frame.locator("html[data-state=ready]").wait_for(timeout=BOOT_TIMEOUT_MS)
        page.evaluate("""m => document.querySelector('iframe').contentWindow.postMessage(m, '*')""",
                      {"decodelab": 1, "type": "settings", "generate": True,
                       "settings": {"prompt": PAYLOADS[0], "stop": PAYLOADS, "seed": PAYLOADS[1],
                                    PAYLOADS[2]: 1, "max_new_tokens": 12}})
        notice = frame.locator("#link-notice")
        notice.wait_for()
        assert PAYLOADS[1] in notice.inner_text() and "Seed" in notice.inner_text()
        inner = [f for f in page.frames if f.url.startswith(widget)][0]
        assert inner.evaluate("() => window.__pwned") is None
        assert inner.evaluate(f"() => document.querySelectorAll('{INJECTED}, #link-notice img,"
                              " #link-notice svg, #link-notice script').length") == 0
        assert page.evaluate("() => window.__pwned") is None
    finally:
        context.close()
        host_server.shutdown()
        widget_server.shutdown()
