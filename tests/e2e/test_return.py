"""A return visit: the first start keeps a snapshot of Python's memory, and numpy's and the
package's bytecode and installed files (web/runtime/kept.js, snapshot.js, bytecode.js,
installed.js); the next start uses them and answers exactly as before; anything kept that is
damaged is replaced, never trusted."""

import json
import re
import struct
import time

from tests.e2e.conftest import kept, open_page, wait_kept, wait_ready
from tests.e2e.test_offline import RECORD_STATUS, STARTUP_FILES
from tests.e2e.test_page import assert_same_trace, cli_trace

SETTINGS = {"model": "transformer", "dataset": "prose", "prompt": "The ", "seed": 4,
            "temperature": 0.9, "top_k": 30, "max_new_tokens": 24, "ignore_eos": True}


def start(page) -> dict:
    """The timings of the page's start, once it is ready."""
    wait_ready(page)
    return page.evaluate("() => window.decodelab.timings")


def used(timings) -> tuple:
    """What a start did with each kept copy: snapshot, bytecode, installed packages."""
    return timings["snapshot"], timings["bytecode"], timings["installed"]


def run(page) -> dict:
    result = page.evaluate("s => window.decodelab.generate(s)", SETTINGS)
    assert result["status"] == "done", result
    return json.loads(page.evaluate("() => window.decodelab.trace()"))


def sizes(page, urls) -> list:
    return page.evaluate("urls => Promise.all(urls.map((u) => caches.match(u).then((r) => r.arrayBuffer())))"
                         ".then((bs) => bs.map((b) => b.byteLength))", urls)


# A JavaScript function (url, bytes): put bytes in place of the kept copy at url, with their
# SHA-256 in the header kept.js checks, so the copy passes that check.
PUT_CHECKED = """async (u, bytes) => {
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    for (const name of await caches.keys()) {
        const cache = await caches.open(name);
        if (await cache.match(u)) await cache.put(u, new Response(bytes, {headers: {"X-Decodelab-SHA256": hex}}));
    }
}"""


def byte16(page, url) -> int:
    """The first byte of the runtime's build id in the kept snapshot."""
    return page.evaluate("u => caches.match(u).then((r) => r.arrayBuffer()).then((b) => new Uint8Array(b)[16])", url)


def test_a_return_visit_restores_python_and_reads_kept_bytecode_and_answers_the_same(chromium, base_url, site_root):
    page = open_page(chromium, base_url)
    try:
        first = start(page)
        assert used(first) == ("made", "none", "none"), first
        assert "kept" not in page.locator("#status").inner_text()
        expected = cli_trace(**SETTINGS)
        assert_same_trace(run(page), expected)
        found = wait_kept(page)
        # one of each, and the snapshot is the runtime's memory (tens of MB), the installed
        # packages numpy's 12 MB and more, not stubs
        assert [len(urls) for urls in found.values()] == [1, 1, 1]
        got = sizes(page, found["runtime-snapshot"] + found["bytecode"] + found["installed"])
        assert got[0] > 10_000_000 and got[1] > 500_000 and got[2] > 12_000_000, got

        page.add_init_script(RECORD_STATUS)
        page.reload()
        again = start(page)
        assert used(again) == ("restored", "kept", "kept"), again
        # the bytes it counts are the runtime's without the wheels, not fetched this time (then
        # the lesson files' too)
        listed = json.loads((site_root / "pyodide" / "integrity.json").read_text())["files"]
        runtime = sum(f["bytes"] for f in listed if STARTUP_FILES.fullmatch(f["path"]) and not f["path"].endswith(".whl"))
        lesson = sum(f["bytes"] for f in json.loads((site_root / "assets" / "manifest.json").read_text())["files"])
        totals = {m[1] for text, _ in page.evaluate("() => window.__statuses") if (m := re.search(r"of ([\d.]+) MiB$", text))}
        assert f"{runtime / 2**20:.1f}" in totals and totals <= {f"{runtime / 2**20:.1f}", f"{(runtime + lesson) / 2**20:.1f}"}, totals
        # the standard library the start needs came with the snapshot (snapshot.js)
        assert again["imported_after_snapshot"] == [], again
        # the learner is told where the quick start came from
        assert page.locator("#status").inner_text().endswith(", from what this browser kept of its last start.")
        assert_same_trace(run(page), expected)
        # a start from what was kept keeps nothing new: the same three copies
        assert kept(page) == found
        assert page.errors == []
    finally:
        page.context.close()


def test_damaged_copies_are_not_used_and_are_replaced(chromium, base_url):
    page = open_page(chromium, base_url, warm=True)  # a return: the copies are there
    try:
        start(page)
        found = wait_kept(page)
        urls = found["runtime-snapshot"] + found["bytecode"] + found["installed"]
        page.evaluate("""urls => Promise.all(urls.map(async (u) => {
            for (const name of await caches.keys()) {
                const cache = await caches.open(name);
                if (await cache.match(u)) await cache.put(u, new Response(new Uint8Array([7, 0, 0, 0, 1, 2, 3])));
            }
        }))""", urls)
        assert sizes(page, urls) == [7, 7, 7]

        page.reload()
        timings = start(page)
        # neither damaged copy was used: Python started afresh and compiled its modules...
        assert used(timings) == ("made", "none", "none"), timings
        assert_same_trace(run(page), cli_trace(**SETTINGS))
        # ...and kept good copies in their place, which the next start uses
        assert wait_kept(page) == found
        deadline = time.monotonic() + 60
        while min(sizes(page, urls)) <= 7:
            assert time.monotonic() < deadline, "the damaged copies were not replaced"
            time.sleep(0.25)
        # a copy whose checksum matches but which Pyodide refuses (as it would one made by
        # another build of the runtime): Python starts afresh and a new one is kept
        original = byte16(page, found["runtime-snapshot"][0])
        page.evaluate("""async (u) => {
            const bytes = new Uint8Array(await (await caches.match(u)).arrayBuffer());
            bytes[16] ^= 0xff;  // the runtime's build id
            await (""" + PUT_CHECKED + """)(u, bytes);
        }""", found["runtime-snapshot"][0])
        page.reload()
        timings = start(page)
        assert used(timings) == ("made", "kept", "kept"), timings
        assert_same_trace(run(page), cli_trace(**SETTINGS))
        deadline = time.monotonic() + 60  # the new copy is saved while the start goes on
        while byte16(page, found["runtime-snapshot"][0]) != original:
            assert time.monotonic() < deadline, "no new snapshot was kept"
            time.sleep(0.25)
        page.reload()
        timings = start(page)
        assert used(timings) == ("restored", "kept", "kept"), timings
        assert page.errors == []
    finally:
        page.context.close()


def test_kept_packages_that_name_a_file_outside_site_packages_are_not_written(chromium, base_url):
    page = open_page(chromium, base_url, warm=True)  # a return: the copies are there
    try:
        start(page)
        found = wait_kept(page)
        url = found["installed"][0]
        # a pack with a good checksum whose one file would land outside site-packages
        body = b"import os\n"
        head = json.dumps([["/lib/python3.12/os.py", len(body)]]).encode()
        pack = struct.pack("<I", len(head)) + head + body  # pack.js's layout
        page.evaluate("async ([u, b]) => (" + PUT_CHECKED + ")(u, new Uint8Array(b))", [url, list(pack)])
        page.reload()
        timings = start(page)
        # not used: the wheels were installed as on a first visit, and Python works as before
        assert used(timings) == ("restored", "kept", "none"), timings
        assert_same_trace(run(page), cli_trace(**SETTINGS))
        deadline = time.monotonic() + 60  # and a good copy took its place
        while sizes(page, [url])[0] < 12_000_000:
            assert time.monotonic() < deadline, "the refused copy was not replaced"
            time.sleep(0.25)
        page.reload()
        assert used(start(page)) == ("restored", "kept", "kept")
        assert_same_trace(run(page), cli_trace(**SETTINGS))
    finally:
        page.context.close()


# A browser that refuses Cache Storage to the page (as some private windows do): every start
# is a plain one, and nothing says otherwise.
REFUSED = 'self.caches.open = () => Promise.reject(new DOMException("The operation is insecure.", "SecurityError"));\n'


def test_where_nothing_can_be_kept_every_start_is_a_plain_one(chromium, base_url):
    page = open_page(chromium, base_url, warm=True)  # a return: the copies are there
    try:
        def refuse(route):
            response = route.fetch()
            route.fulfill(response=response, body=REFUSED + response.text())
        start(page)
        wait_kept(page)  # the first start's copies, kept before the refusal: gone
        page.context.route("**/kept.js", refuse)
        page.evaluate("async () => { for (const name of await caches.keys()) await caches.delete(name); }")
        page.reload()
        for _ in range(2):
            timings = start(page)
            assert used(timings) == ("none", "none", "none"), timings
            assert_same_trace(run(page), cli_trace(**SETTINGS))
            page.reload()
        assert page.evaluate("() => caches.keys()") == []
        assert page.errors == []
    finally:
        page.context.unroute_all(behavior="ignoreErrors")  # a request still on its way
        page.context.close()
