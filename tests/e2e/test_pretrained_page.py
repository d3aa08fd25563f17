"""The real model in the page: SmolLM2-135M-Instruct loaded from the built site when the learner
asks (its download, the check of its sha256, its parts read in the worker), kept in the browser
for the next visit, run in the workbench with the same trace as the CLI; and every way loading
can go wrong (not on this site, a damaged or cut download, a file that is not a model, Stop)
said in a sentence, with the page working on."""

import functools
import hashlib
import json

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import open_page, wait_ready
from tests.e2e.test_page import assert_same_trace, cli_trace, generate, reset
from tests.e2e.test_tools_page import run_accuracy

GGUF = "**/models/SmolLM2-135M-Instruct.Q4_1.gguf"
KEPT_MODEL = """async () => {
    const urls = [];
    for (const name of await caches.keys()) {
        if (name.startsWith("decodelab-model ")) urls.push(...(await (await caches.open(name)).keys()).map((r) => r.url));
    }
    return urls;
}"""
LIST = "**/models/models.json"
# The engine the page reads SmolLM2 for unless the learner chooses another: llama.cpp's
# arithmetic where the page's kernels load (pretrained.engines.default). Its kernels give the
# same bits in WebAssembly as natively, so the page's runs are the CLI's on that engine.
ENGINE = "quantized"


def status(page):
    return page.locator("#pretrained-status").inner_text()


def wait_status(page, *words, timeout=120_000):
    """Until the card's status holds one of `words`; returns it."""
    page.wait_for_function("""words => words.some((w) =>
        document.getElementById('pretrained-status').textContent.includes(w))""",
                           arg=list(words), timeout=timeout)
    return status(page)


def listing(page, rows):
    """Answer the site's list of models with `rows` (a site built otherwise)."""
    page.route(LIST, lambda route: route.fulfill(status=200, content_type="application/json",
                                                 body=json.dumps({"files": rows})))


def fake_file(page, data: bytes, sha256=None):
    """A listed model file of these bytes (and this digest, else its own)."""
    listing(page, [{"model": "smollm2", "path": "models/fake.gguf", "bytes": len(data),
                    "sha256": sha256 or hashlib.sha256(data).hexdigest()}])
    page.route("**/models/fake.gguf", lambda route: route.fulfill(
        status=200, content_type="application/octet-stream", body=data))


def still_works(page):
    """The page runs a trained model as before."""
    page.get_by_label("Model", exact=True).select_option("bigram")
    page.get_by_label("Dataset", exact=True).wait_for()  # shown again: it applies to this model
    reset(page, Model="bigram", Dataset="names", Tokenizer="chars")
    generate(page, Max_new_tokens=5)
    assert page.evaluate("() => window.decodelab.steps().length") > 0


@pytest.fixture(scope="module")
def app(chromium, base_url):
    page = wait_ready(open_page(chromium, base_url))
    yield page
    page.context.close()


@functools.cache
def native_library():
    """The library natively, with SmolLM2 read once on the page's engine for the module's
    comparisons."""
    from decodelab.core.library import Library
    from decodelab.pretrained.files import find_smollm2
    from decodelab.pretrained.model import load
    from tests.e2e.conftest import ROOT

    library = Library(ROOT / "artifacts")
    library.keep_pretrained(load(find_smollm2(), engine=ENGINE))
    return library


def choose_the_real_model(page):
    from tests.e2e.conftest import reveal

    reveal(page, page.get_by_label("Model", exact=True)).select_option("smollm2")  # (from any chapter)
    page.locator("#pretrained").wait_for()


def use_the_real_model(page):
    """Model SmolLM2 chosen, and loaded unless an earlier test of the module loaded it."""
    choose_the_real_model(page)
    if not page.evaluate("() => window.decodelab.pretrained.loaded"):
        page.evaluate("() => window.decodelab.pretrained.load()")


@functools.cache
def capital_by_the_cli(tokens: int, engine: str = ENGINE) -> dict:
    """The CLI's greedy trace after "The capital of France is" (run once per length: each run
    reads the model again, seconds of CPU)."""
    return cli_trace(model="smollm2", prompt="The capital of France is", seed=7, greedy=True,
                     max_new_tokens=tokens, engine=engine)


def run_as_the_cli(page, tokens: int, engine: str = ENGINE):
    """Generate greedily after "The capital of France is" in the page and with the CLI on the
    same engine: the same tokens. Returns both traces."""
    reset(page, Prompt="The capital of France is", Seed=7, Greedy=True, Max_new_tokens=tokens)
    generate(page)
    trace = json.loads(page.evaluate("() => window.decodelab.trace()"))
    expected = capital_by_the_cli(tokens, engine)
    assert trace["engine"] == expected["engine"] == engine
    assert [s["token_id"] for s in trace["steps"]] == [s["token_id"] for s in expected["steps"]]
    return trace, expected


def test_choosing_the_chat_model_brings_its_own_sampling_and_says_where_from(chromium, base_url):
    """SmolLM2 starts from its model card's T = 0.2 and top-p 0.9, said beside the fields; a
    trained model chosen again gets the workbench's own back."""
    page = wait_ready(open_page(chromium, base_url))
    try:
        temperature = page.get_by_label("Temperature", exact=True)
        assert temperature.input_value() == "1"
        choose_the_real_model(page)
        expect(temperature).to_have_value("0.2")
        note = page.locator(".field-said").filter(has_text="model card").first
        expect(note).to_contain_text("Temperature 0.2, Top-p 0.9")
        top_p = page.get_by_label("Top-p", exact=True)
        expect(top_p).to_have_value("0.9")
        page.get_by_label("Model", exact=True).select_option("transformer")
        expect(temperature).to_have_value("1")
        expect(top_p).to_have_value("1")
    finally:
        page.context.close()


def test_loading_problems_are_said_and_the_page_keeps_working(app):
    choose_the_real_model(app)
    # a run before the model is loaded is refused by name, with what to do (choosing it alone
    # is no error: its card invites the load)
    error = app.locator("#model-error")
    app.wait_for_selector("html[data-state=ready]")
    app.get_by_role("button", name="Generate", exact=True).click()
    error.wait_for()
    assert "not loaded in this page yet" in error.inner_text()
    assert app.get_by_label("Prompt", exact=True).input_value() == "The three primary colours are"
    load = app.locator("#pretrained-load")

    listing(app, [])  # a site built without the model
    load.click()
    assert "built without the real model" in wait_status(app, "built without")
    assert load.is_visible() and app.locator("#pretrained-status.error").is_visible()
    app.unroute(LIST)

    fake_file(app, b"GGUF" + bytes(996), sha256="0" * 64)  # damaged on the way
    load.click()
    assert "SHA-256 is not the one this site lists" in wait_status(app, "damaged")
    app.unroute_all()

    fake_file(app, b"not a model at all, but listed with its own digest")
    load.click()
    said = wait_status(app, "GGUF")
    assert said.startswith("GGUF: not a GGUF file")
    app.unroute_all()

    held = []  # a download that never answers: Stop ends it
    app.route(GGUF, lambda route: held.append(route))
    load.click()
    app.locator("#pretrained-stop").wait_for()
    app.wait_for_function("() => !!window.decodelab.pretrained.loading")
    app.locator("#pretrained-stop").click()
    assert wait_status(app, "Stopped").startswith("Stopped: the model was not loaded.")
    assert app.locator("#pretrained-stop").is_hidden() and load.is_visible()
    app.unroute_all()
    for route in held:
        try:
            route.abort()
        except Exception:  # the page gave the request up already
            pass
    assert app.evaluate("() => window.decodelab.pretrained.loaded") is False
    still_works(app)
    assert app.errors == []


def test_the_real_model_loads_runs_as_the_cli_and_is_kept_for_the_next_visit(app):
    choose_the_real_model(app)
    app.locator("#pretrained-load").click()
    said = wait_status(app, "Loaded", "could not", "failed")
    assert said.startswith("Loaded in ") and "downloaded 93.8 MiB" in said
    assert "Kept in this browser" in said
    assert len(app.evaluate(KEPT_MODEL)) == 1  # apart from the site's offline copy
    facts = app.locator("#pretrained-facts").inner_text()
    for words in ("30 layers", "9 query heads sharing 3 key-value heads of 64", "49,152 tokens",
                  "2,048 positions kept (trained on 8,192)", "45 KiB a token"):
        assert words in facts
    app.locator("#model-error").wait_for(state="hidden", timeout=10_000)  # checked again
    trace, expected = run_as_the_cli(app, 8)
    # the same tokens, and probabilities within float32's rounding (numpy with BLAS natively,
    # einsum in the page: the sums are added in another order)
    assert trace["text"] == expected["text"] and " Paris" in trace["text"]
    assert_same_trace(trace, expected, tol=1e-4)
    # the cache card draws this model's cache, not the dataset's transformer's
    memory = app.locator("#cache-memory-line").all_text_contents()[0]
    assert "of 2048 cache positions filled" in memory
    assert "(30 layers × K and V × 3 KV heads × 64 numbers × 4 bytes" in memory, memory
    # what its session allocated, as Python counts it: one block of 256 positions (256 x 46,080
    # bytes = 11.25 MiB), not the window's 90 MiB
    assert "of 11.3 MiB allocated, taken 256 positions at a time" in memory, memory
    # and judges its live check by this model's float32 limit (its logits' sums are long)
    app.wait_for_function("() => document.getElementById('cache-verdict').textContent.includes('passed')")
    assert "below the tolerance 10⁻³" in app.locator("#cache-verdict").inner_text()
    assert app.errors == []

    # the next visit, in the same browser: the kept copy, checked, and no download
    page = app.context.new_page()
    asked = []
    page.on("request", lambda r: asked.append(r.url) if r.url.endswith(".gguf") else None)
    page.goto(app.url)
    wait_ready(page)
    choose_the_real_model(page)
    page.locator("#pretrained-load").click()
    said = wait_status(page, "Loaded", "could not", "failed")
    assert said.startswith("Loaded from the copy kept in this browser (checked)"), said
    assert asked == []
    # and the learner takes the 94 MiB of storage back
    page.get_by_role("button", name="Forget the kept copy").click()
    assert "is deleted" in wait_status(page, "is deleted")
    assert page.evaluate(KEPT_MODEL) == []
    page.close()


def engine_chosen(page) -> str:
    return page.locator("#pretrained-engines input:checked").get_attribute("value")


def read_for(page, engine):
    """Until the model is loaded again, for `engine` (the kept copy read, or the file
    downloaded again where the learner forgot it)."""
    page.wait_for_function("""e => { const p = window.decodelab.pretrained;
        return !p.loading && p.info && p.info.engine === e; }""", arg=engine, timeout=120_000)
    assert status(page).startswith("Loaded"), status(page)


def test_the_model_runs_on_llama_cpp_s_arithmetic_and_the_reference_is_one_click_away(app):
    """The page's kernels come with its lesson files and load into Python's heap, so SmolLM2 is
    read for the quantized engine unless the learner chooses otherwise: the card says where its
    products run, and its facts the engine and what its weights hold (the file's blocks, under
    a third of float32's). Choosing the reference reads it again (from the kept copy where there
    is one), as float32, four bytes a parameter, and its run is the CLI's on that engine; and
    back."""
    use_the_real_model(app)
    wait_status(app, "Loaded")
    about = app.evaluate("() => window.decodelab.info.pretrained.engines")
    assert about["compiled"] and about["default"] == ENGINE, about
    assert about["kernels"] == "The quantized products run in decodelab's C kernels (WebAssembly)."
    assert app.locator("#pretrained-kernels").inner_text() == about["kernels"]
    assert engine_chosen(app) == ENGINE
    loaded = app.evaluate("() => window.decodelab.pretrained.info")
    assert loaded["engine"] == ENGINE and loaded["weight_bytes"] < 0.3 * 4 * loaded["params"]
    facts = app.locator("#pretrained-facts").inner_text()
    assert "engine: Quantized (as llama.cpp), its weights 1" in facts, facts
    # every chapter that can run it says which arithmetic its numbers come from
    def engine_lines():
        return app.locator(".chapter[data-runs-real] .chapter-engine").evaluate_all(
            "ns => ns.map((n) => n.hidden ? '' : n.textContent)")
    lines = engine_lines()
    assert len(lines) == 6 and all("loaded on the quantized engine (llama.cpp" in t for t in lines)
    trace, expected = run_as_the_cli(app, 6)
    assert " Paris" in trace["text"]
    # its link carries what applies to it: no dataset, no tokenizer (it brings its own)
    link = app.locator("#share-link").input_value()
    assert "model=smollm2" in link and "dataset=" not in link and "tokenizer=" not in link, link
    assert "--engine=quantized" in app.locator("#command").inner_text()  # the run's command line
    assert_same_trace(trace, run_shown(app), tol=1e-6)  # which repeats it
    # the same logits bit for bit (the kernels and `kernels.portable`); the probabilities made
    # from them in float32 by numpy's own exp and log, natively SIMD code, may differ in a last
    # bit (before `portable`, a quantized run in the page was 0.03 away in a log-probability)
    assert_same_trace(trace, expected, tol=1e-6)

    app.locator("#pretrained-engines input[value=reference]").check()
    read_for(app, "reference")
    loaded = app.evaluate("() => window.decodelab.pretrained.info")
    assert loaded["engine"] == "reference" and loaded["weight_bytes"] == 4 * loaded["params"]
    assert "engine: Reference (float32, as transformers)" in app.locator("#pretrained-facts").inner_text()
    assert all("loaded on the reference engine (float32" in t for t in engine_lines())
    trace, expected = run_as_the_cli(app, 6, "reference")
    assert_same_trace(trace, expected, tol=1e-4)  # float32 sums in another order

    # mid-conversation: a turn on the reference, then the engine switched back; the next turn
    # reads the conversation whole again (its cache was the other engine's), as the CLI's
    reset(app, Seed=5, Greedy=True, Max_new_tokens=12)
    app.get_by_role("button", name="New conversation", exact=True).click()
    app.get_by_label("Your message", exact=True).fill("What is the capital of Japan?")
    app.evaluate("() => window.decodelab.pretrained.send()")
    history = json.loads(app.evaluate("() => window.decodelab.trace()"))["messages"]
    app.locator("#pretrained-engines input[value=quantized]").check()
    read_for(app, ENGINE)
    assert engine_chosen(app) == ENGINE
    assert "The conversation goes on; its next turn reads it whole again" in status(app)
    app.get_by_label("Your message", exact=True).fill("And of France?")
    app.evaluate("() => window.decodelab.pretrained.send()")
    assert app.evaluate("() => window.decodelab.pretrained.lastTurn")["reused"] == 0
    trace = json.loads(app.evaluate("() => window.decodelab.trace()"))
    expected = cli_chat(history, "And of France?", seed=5, greedy=True, max_new_tokens=12)
    assert trace["engine"] == expected["engine"] == ENGINE
    assert_same_trace(trace, expected, tol=1e-6)
    app.get_by_role("button", name="New conversation", exact=True).click()
    run_as_the_cli(app, 6)  # (the page's last run no chat turn: the next test's chat starts afresh)
    assert app.errors == []


def test_a_damaged_kernels_module_leaves_the_reference_engine_first_and_says_why(chromium,
                                                                               base_url):
    """The kernels' module comes with the lesson files, checked as they are; a damaged copy does
    not stop the page's start: Python is told why it has none, and the card offers the
    reference engine first and says why the quantized one would be slow."""
    from tests.e2e.conftest import record_errors

    context = chromium.new_context()
    try:
        context.route("**/assets/kernels/*.wasm.so",
                      lambda route: route.fulfill(status=200, body=b"\0asm, but damaged"))
        page = record_errors(context.new_page())
        page.goto(base_url)
        wait_ready(page)
        about = page.evaluate("() => window.decodelab.info.pretrained.engines")
        assert not about["compiled"] and about["default"] == "reference", about
        assert about["kernels"].startswith("The page could not load its C kernels (The lesson "
                                           "file kernels/decodelab_kernels-"), about
        assert "is damaged" in about["kernels"]
        assert about["kernels"].endswith("so the quantized products run in numpy: the same "
                                         "numbers, many times slower.")
        choose_the_real_model(page)
        assert engine_chosen(page) == "reference"
        assert page.locator("#pretrained-kernels").inner_text() == about["kernels"]
        still_works(page)
        assert page.errors == []
    finally:
        context.close()


def cli_chat(history, message, **settings):
    """The CLI's chat turn (`python -m decodelab chat --json`) after `history`."""
    import os
    import subprocess
    import sys
    import tempfile

    from tests.e2e.conftest import ROOT

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(history, fh)
    args = [sys.executable, "-m", "decodelab", "chat", "--json", "--history", fh.name,
            "--message", message]
    for key, value in {"engine": ENGINE, **settings}.items():
        args += ["--" + key.replace("_", "-")] + ([] if value is True else [str(value)])
    out = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "py")))
    os.unlink(fh.name)
    return json.loads(out.stdout)


def run_shown(app, command="generate"):
    """The command line the page shows under its last run, run: the trace it prints."""
    import os
    import shlex
    import subprocess
    import sys

    from tests.e2e.conftest import ROOT

    expect(app.locator("#command")).to_contain_text(f"decodelab {command} ")
    words = shlex.split(app.locator("#command").inner_text())
    assert words[:4] == ["python3", "-m", "decodelab", command] and words[-1] == "--json"
    assert f"--engine={ENGINE}" in words or "--engine=reference" in words
    out = subprocess.run([sys.executable, *words[1:]], capture_output=True, text=True,
                         check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT / "py")))
    return json.loads(out.stdout)


def test_a_two_turn_chat_equals_the_cli_and_prefills_only_its_new_tokens(app):
    use_the_real_model(app)
    reset(app, Seed=5, Greedy=True, Max_new_tokens=24)
    history = []
    # what the status said while a turn ran, with the answer on screen at that moment
    app.evaluate("""() => { const status = document.getElementById('chat-status');
        new MutationObserver(() => window.__said.push([status.textContent,
            document.getElementById('text-gen').textContent,
            document.querySelector('#chat-log li:last-child')?.textContent ?? ''])).observe(status,
            {childList: true, characterData: true, subtree: true}); }""")
    for turn, message in enumerate(("What is the capital of Japan?", "And of France?")):
        app.get_by_label("Your message", exact=True).fill(message)
        app.evaluate("() => { window.__said = []; }")
        app.evaluate("() => window.decodelab.pretrained.send()")
        trace = json.loads(app.evaluate("() => window.decodelab.trace()"))
        # the whole answer is shown, in the text and in the conversation, before the live
        # check's full pass over the conversation, and the status says that this is the wait
        assert trace["settings"]["cache_check"] and trace["steps"][-1]["cache_ok"]
        said = app.evaluate("() => window.__said")
        checking = [(shown, log) for text, shown, log in said
                    if text.startswith("Answered. The cache check")]
        assert [shown for shown, _ in checking] == [trace["text"]], said
        assert checking[0][1] == trace["text"], checking  # the log's last message: the answer
        # the command line the page shows repeats the turn: the conversation before it given
        # inline, the message, the settings and the engine
        expected = run_shown(app, "chat")
        assert expected["messages"][:-2] == history
        assert trace["finish_reason"] == "stop" and trace["stop_reason"] == "eos"  # <|im_end|>
        assert_same_trace(trace, expected, tol=1e-4)  # the prompt, its ids, the messages too
        chat = app.evaluate("() => window.decodelab.pretrained.lastTurn")
        if turn == 0:
            assert chat["reused"] == 0 and chat["prompt_tokens"] == len(trace["prompt_ids"])
        else:
            # the kept cache holds the first turn's prompt and answer (its last token, the
            # <|im_end|> that ended it, was never fed): the new prompt shares their beginning
            kept = first["prompt_ids"] + [s["token_id"] for s in first["steps"][:-1]]
            shared = next(i for i, (a, b) in enumerate(zip(kept + [None], trace["prompt_ids"]))
                          if a != b)
            assert chat["reused"] == shared > len(first["prompt_ids"])
            status = app.locator("#chat-status").inner_text()
            assert f"read {len(trace['prompt_ids']) - shared} new tokens" in status
        history, first = trace["messages"], trace
    assert app.locator("#chat-log li").count() == 4
    assert " Paris" in history[-1]["content"] or "Paris" in history[-1]["content"]
    # the template as tokens: its special tokens marked
    marked = app.locator("#chat-tokens .chip.special").all_text_contents()
    # each message's start (system, user, assistant, user) and the answer's: five
    assert marked[:2] == ["<|im_start|>", "<|im_end|>"] and marked.count("<|im_start|>") == 5
    # a message may not carry the template's markup
    app.get_by_label("Your message", exact=True).fill("Hi <|im_end|>")
    app.evaluate("() => window.decodelab.pretrained.send()")
    assert "contains <|im_end|>" in app.locator("#chat-status").inner_text()
    assert app.locator("#chat-log li").count() == 4  # the conversation kept as it was
    assert app.errors == []


def test_a_gguf_file_of_ones_own(app, tmp_path):
    """A file from disk: what it must be said first (the reader's own limits); one too large
    refused before it is read, a file that is not GGUF and a model of another architecture
    refused in the reader's words, the model loaded before kept; SmolLM2's file itself loads
    from disk and runs as the CLI."""
    import gguf
    import numpy as np

    from decodelab.pretrained.files import find_smollm2
    from decodelab.pretrained.gguf import GGUF, MAX_FILE_BYTES

    use_the_real_model(app)
    app.locator("#pretrained-own summary").click()
    about = app.locator("#pretrained-own-about").inner_text()
    limit = MAX_FILE_BYTES // 2**20
    assert f"up to {limit} MiB" in about and "llama’s architecture" in about
    assert "F32, F16, Q4_0, Q4_1 or Q8_0" in about
    chooser = app.get_by_label("GGUF file", exact=True)

    big = tmp_path / "big.gguf"
    with open(big, "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 2**20)  # sparse: never written, and never read
    chooser.set_input_files(big)
    said = status(app)
    assert said.startswith(f"Your file big.gguf is {limit + 1} MiB; "  # one unit in the sentence
                           f"decodelab reads GGUF files up to {limit} MiB") and "Nothing was read" in said

    text = tmp_path / "notes.gguf"
    text.write_bytes(b"not a model, whatever its name says")
    chooser.set_input_files(text)
    said = wait_status(app, "was not loaded")
    assert said.startswith("Your file notes.gguf was not loaded: GGUF: not a GGUF file: it starts "
                           "with b'not '") and said.endswith("The model loaded before stays.")

    other = tmp_path / "gpt2.gguf"
    w = gguf.GGUFWriter(str(other), "gpt2")
    w.add_tensor("w", np.ones((2, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    chooser.set_input_files(other)
    said = wait_status(app, "gpt2.gguf was not loaded")
    assert "the file holds a 'gpt2' model; decodelab runs the architecture llama" in said
    assert app.evaluate("() => window.decodelab.pretrained.loaded") is True
    assert app.locator("html[data-state=ready]").count() == 1

    # hostile metadata (tests/test_hostile_gguf.py has every kind): a block count of four
    # billion once made the reader list that many parts, and the page's Python hung
    from tests.test_hostile_gguf import tiny

    vocab = {k: v for k, v in GGUF(find_smollm2()).metadata.items() if k.startswith("tokenizer.")}
    for name, meta, words in (
            ("blocks.gguf", {"llama.block_count": 4_000_000_000},
             "llama.block_count is 4,000,000,000; the file has the tensors of 2 blocks"),
            ("heads.gguf", {"llama.attention.head_count": 3},
             "head_count is 3, which does not divide the width")):
        chooser.set_input_files(tiny(tmp_path, vocab, meta, name=name))
        said = wait_status(app, f"{name} was not loaded")
        assert words in said and said.endswith("The model loaded before stays."), said
    assert app.evaluate("() => window.decodelab.pretrained.loaded") is True
    assert app.evaluate("() => window.decodelab.health.restarts") == 0

    path = find_smollm2()
    # (the file calls its model "Smollm2 135M 8k Lc100K Mix1 Ep2": SmolLM2's is named as its
    # makers name it)
    assert GGUF(path).get("general.name") != (name := "SmolLM2-135M-Instruct")
    chooser.set_input_files(path)
    said = wait_status(app, "Loaded", "was not loaded")
    assert said.startswith(f"Loaded {name} from your file {path.name} (93.8 MiB)"), said
    assert "not kept in this browser" in said
    assert app.locator("#pretrained-facts").inner_text().startswith(f"{name}: 135 million")
    run_as_the_cli(app, 8)
    assert app.errors == []


def test_the_temperature_experiment_runs_on_the_real_model(app):
    """Chapter 2's experiment with Model SmolLM2: its numbers are the CLI-side experiment's for
    the same settings, and its words are looked up in English prose, as the table says."""
    from decodelab.lesson.experiment import Experiment
    from tests.e2e.conftest import reveal
    from tests.e2e.test_lesson import run_experiment, table_cells

    use_the_real_model(app)
    prompt = "Write a haiku about the sea."
    reset(app, Model="smollm2", Prompt=prompt, Seed=3, Max_new_tokens=12)
    reveal(app, "#xp-mode-repeated").check()
    section = run_experiment(app, **{"T values": "0, 2", "Samples per temperature": 2})
    assert app.locator("#experiment").get_attribute("data-state") == "done"
    assert "Settings: SmolLM2-135M-Instruct (its words looked up in the prose data)" in \
        section.locator(".xp-uses").inner_text()
    library = native_library()
    native = Experiment(library, {"settings": {"model": "smollm2", "prompt": prompt, "seed": 3,
                                               "max_new_tokens": 12},
                                  "temperatures": "0, 2", "mode": "repeated", "samples": 2}
                        ).run().result()
    texts = section.locator(".xp-texts li").evaluate_all("els => els.map(e => e.textContent)")
    assert texts[0] == prompt + native["rows"][0]["texts"][0]  # greedy: the same text
    cells = table_cells(section)
    assert "Words in English prose" in cells and "Words not in it" in cells
    takeaway = section.locator(".xp-takeaway").inner_text()
    assert "The share of words found in English prose" in takeaway
    assert app.errors == []


def test_a_cache_bug_garbles_the_real_model_s_answer(app):
    """Chapter 5's bugs on SmolLM2: the check fails at the model's own limit, and the page shows
    what the model writes with the correct cache and with the broken one, as Python runs them."""
    from decodelab.lesson import bugs
    from tests.e2e.conftest import reveal

    use_the_real_model(app)
    reset(app, Model="smollm2", Seed=1)
    reveal(app, "#break")
    prompt = app.get_by_label("Test prompt", exact=True)
    assert prompt.input_value() == "The capital of France is"  # the real model's defaults
    assert app.get_by_label("Check steps", exact=True).input_value() == "8"
    reply = app.evaluate("() => window.decodelab.kv.lab.check({bug: 'frozen-position'})")
    assert reply["ok"] and not reply["cache"]["ok"] and reply["cache"]["tolerance"] == 1e-3
    model = native_library().pretrained()
    native = bugs.run_bug(model, "frozen-position", model.tokenizer.encode("The capital of France is"),
                          8, seed=1)
    assert reply["answers"] == native["answers"]
    assert native["answers"]["broken"] != native["answers"]["correct"]
    shown = app.locator(".break-answers").inner_text()
    flat = lambda t: t.replace("\n", "⏎")  # noqa: E731
    assert flat(native["answers"]["correct"]) in shown and flat(native["answers"]["broken"]) in shown
    assert "new token's query" in app.locator("#break-sentence").inner_text()
    assert app.errors == []


def test_beam_search_runs_on_the_real_model(app):
    """Chapter 6's beam search with Model SmolLM2: the same search as Python's natively (its
    beams, and beam, greedy and sampled side by side), the best beam likelier than greedy."""
    from decodelab.lesson.search import beam_lesson
    from tests.e2e.test_search_page import search

    use_the_real_model(app)
    prompt = "The capital of France is"
    reset(app, Model="smollm2", Prompt=prompt, Seed=1, Max_new_tokens=6)
    reply = search(app, **{"#beam-beams": 3})
    assert reply["ok"], reply
    library = native_library()
    beams = reply["trace"]["settings"]["num_beams"]
    # (the sampled side draws with SmolLM2's own sampling, which choosing it brought)
    own = {k: float(app.get_by_label(label, exact=True).input_value())
           for k, label in (("temperature", "Temperature"), ("top_p", "Top-p"))}
    assert own == {"temperature": 0.2, "top_p": 0.9}
    native = beam_lesson(library, {"settings": {"model": "smollm2", "prompt": prompt, "seed": 1,
                                                "max_new_tokens": 6, **own},
                                   "beam": {"num_beams": beams}})
    assert [b["ids"] for b in reply["trace"]["beams"]] == [b["ids"] for b in native["trace"]["beams"]]
    assert [s["text"] for s in reply["side"]] == [s["text"] for s in native["side"]]
    assert reply["why"]["likelier"]
    assert app.errors == []


def test_the_two_engines_side_by_side_are_the_lessons_numbers(app):
    """Chapter 5's "What the engine changes": a message through both engines in the page (the
    float32 twin made from the loaded model's blocks), equal to lesson.twoengines natively: each
    engine's greedy answer token for token, each step's first choices and the probability that
    moved; the summary says Python's numbers, the memory is read before and after. A bad number
    of tokens is named at its field and the comparison on screen stays."""
    from decodelab.core.loops.slices import drain
    from decodelab.lesson.twoengines import compare
    from decodelab.pretrained.model import reference_steps
    from tests.e2e.conftest import reveal

    use_the_real_model(app)
    read_for(app, ENGINE)
    message = "What is the capital of France?"
    reveal(app, "#twoengines-message").fill(message)
    app.get_by_label("Tokens of each answer").fill("6")
    app.get_by_role("button", name="Compare the engines").click()
    app.wait_for_function("() => ['done', 'invalid', 'lost', 'stopped'].includes("
                          "document.getElementById('twoengines').dataset.state)", timeout=180_000)
    reply = app.evaluate("() => window.decodelab.twoengines.last.twoengines")
    assert reply["ok"], reply
    quantized = native_library().pretrained()
    models = {"reference": drain(reference_steps(quantized)), "quantized": quantized}
    ids = quantized.template.ids([{"role": "user", "content": message}])
    want = compare(models, ids, 6, (quantized.template.end_id, quantized.tokenizer.eos_id))
    for name in models:
        assert reply["greedy"][name] == want["greedy"][name], name
    assert reply["greedy"]["parted_at"] == want["greedy"]["parted_at"] == 0  # "The" against "L"
    assert [r["same_first"] for r in reply["steps"]] == [r["same_first"] for r in want["steps"]]
    for got, row in zip(reply["steps"], want["steps"]):
        assert got["quantized"][0]["token_id"] == row["quantized"][0]["token_id"]
        assert abs(got["distance"] - row["distance"]) < 1e-3
    summary = app.locator("#twoengines-summary").inner_text()
    s = reply["summary"]
    assert f"agree at {s['same_first']} of {s['steps']}" in summary
    assert "part at step 1" in summary and "“The”" in summary and "“L”" in summary
    assert app.locator("#twoengines-rows tr").count() == len(reply["steps"])
    assert app.locator("#twoengines-rows tr.is-parted").count() == s["steps"] - s["same_first"]
    assert "before the comparison" in app.locator("#twoengines-memory").inner_text()
    # a bad number of tokens: named at its field, the comparison on screen kept
    app.get_by_label("Tokens of each answer").fill("40")
    app.get_by_role("button", name="Compare the engines").click()
    expect(app.locator("#twoengines-tokens-error")).to_contain_text("from 1 to 32")
    assert app.locator("#twoengines").get_attribute("data-state") == "invalid"
    assert app.locator("#twoengines-out").is_visible()
    app.get_by_label("Tokens of each answer").fill("16")
    # Stop while the twin is made: the comparison is given up between two pieces, said, and
    # the one on screen stays
    app.get_by_role("button", name="Compare the engines").click()
    app.wait_for_function("() => document.getElementById('twoengines').dataset.state === 'running'")
    app.get_by_role("button", name="Stop the comparison").click()
    app.wait_for_function("() => document.getElementById('twoengines').dataset.state === 'stopped'",
                          timeout=30_000)
    assert "Stopped before it finished" in app.locator("#twoengines-status").inner_text()
    assert app.locator("#twoengines-out").is_visible()
    assert app.errors == []


def in_view(page, selector) -> bool:
    box = page.locator(selector).bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height


def test_choosing_the_real_model_is_an_invitation_and_its_load_shows_in_view(chromium, base_url):
    """The first screen says a real model is one click away. Chosen in the Model list, SmolLM2
    is not an error: no red message at the Model field, its card says what loading costs (in
    Python's words), and the text and the next token of the model chosen before are gone. A run
    asked for before the load is refused by name. Load pressed at 1280 x 800: its progress bar
    is in view while the file comes (held here until the bar has been measured)."""
    from decodelab.pretrained.card import COST, TITLE

    page = wait_ready(open_page(chromium, base_url, viewport={"width": 1280, "height": 800}))
    try:
        assert in_view(page, "#real-invite")
        invite = page.locator("#real-invite").inner_text()
        assert invite == f"A real chat model, {TITLE}, is one click away.", invite
        generate(page, Seed=3)  # a run of the bigram on screen
        assert page.locator("#next-bars > *").count() > 0
        choose_the_real_model(page)
        page.evaluate("() => window.decodelab.settled()")
        model = page.get_by_label("Model", exact=True)
        assert model.get_attribute("aria-invalid") is None
        assert not page.locator("#model-error").is_visible()
        assert page.locator("#pretrained-invite").inner_text() == (
            f"One click away: Load the model ({COST}). Then it runs here like the trained "
            f"models, and you can chat with it.")
        assert page.locator("#finish-text").inner_text() == "No text generated yet."
        assert page.locator("#text").evaluate("e => e.hidden")
        page.wait_for_selector("#next[data-state=waiting]")
        assert page.locator("#next-bars > *").count() == 0
        # Generate before the load: refused, in Python's words, at the Model field
        page.get_by_role("button", name="Generate", exact=True).click()
        page.wait_for_selector("#model-error:not([hidden])")
        assert "SmolLM2 is not loaded in this page yet" in page.locator("#model-error").inner_text()
        # the load, as the page shows it after the choice (no scrolling of the test's own: a
        # click dispatched, as a keyboard's Enter would be), the file held back until its bar
        # has been measured
        held = []
        page.route(GGUF, lambda route: held.append(route))
        page.evaluate("() => window.scrollTo(0, 0)")
        choose = page.get_by_label("Model", exact=True)
        choose.select_option("bigram")
        choose.select_option("smollm2")
        page.wait_for_function("() => { const b = document.getElementById('pretrained-load')"
                               ".getBoundingClientRect(); return b.top >= 0 && "
                               "b.bottom <= window.innerHeight; }", timeout=5_000)
        page.locator("#pretrained-load").dispatch_event("click")
        page.wait_for_selector("#pretrained-bar:not([hidden])")
        page.wait_for_function("() => { const b = document.getElementById('pretrained-bar')"
                               ".getBoundingClientRect(); return b.top >= 0 && "
                               "b.bottom <= window.innerHeight; }", timeout=5_000)
        assert in_view(page, "#pretrained-bar") and in_view(page, "#pretrained-status")
        for route in held:
            route.continue_()
        page.unroute(GGUF)
        page.wait_for_function("() => window.decodelab.pretrained.loaded", timeout=120_000)
        assert not page.locator("#real-invite").is_visible()  # loaded: no longer an invitation
        assert page.errors == []
    finally:
        page.context.close()


def test_a_search_on_the_real_model_stops_when_asked(app):
    """Chapter 6's beam search on SmolLM2 takes many seconds: while it runs the panel has a
    Stop, which gives the search up between two of its slices; the panel says so, no field is
    blamed, the worker was neither interrupted nor replaced, and the next search runs."""
    from tests.e2e.conftest import open_chapter, reveal

    use_the_real_model(app)
    reset(app, Model="smollm2", Prompt="The capital of France is", Seed=1, Max_new_tokens=16)
    open_chapter(app, "search")
    health = app.evaluate("() => window.decodelab.health")
    reveal(app, "#beam-beams").fill("3")
    stop = app.get_by_role("button", name="Stop the search", exact=True)
    expect(stop).to_be_hidden()
    app.get_by_role("button", name="Search", exact=True).click()
    app.wait_for_selector("#beam[data-state=running]")
    stop.click()
    app.wait_for_selector("#beam[data-state=stopped]", timeout=60_000)
    assert app.locator("#beam-status").inner_text() == (
        "Stopped before it finished: nothing of it was kept.")
    assert app.evaluate("() => window.decodelab.search.last.beam.stopped")
    assert app.locator("#beam-beams").get_attribute("aria-invalid") is None
    expect(stop).to_be_hidden()
    after = app.evaluate("() => window.decodelab.health")
    assert (after["restarts"], after["interrupts"]) == (health["restarts"], health["interrupts"])
    assert app.evaluate("() => window.decodelab.pretrained.loaded")
    reveal(app, "#beam-budget").fill("2")
    app.evaluate("() => window.decodelab.settled()")
    reveal(app, "#beam-beams").fill("2")
    app.get_by_role("button", name="Search", exact=True).click()
    app.wait_for_selector("#beam[data-state=done]", timeout=120_000)
    assert app.evaluate("() => window.decodelab.search.last.beam.ok")
    assert app.errors == []


def test_the_next_message_never_waits_for_the_last_turn_s_check(app):
    """Sent while the last turn's cache check catches up after its text (Send is enabled then),
    a message starts at once: the check is given up, the chat says so, and the new turn is the
    CLI's turn after the same conversation."""
    use_the_real_model(app)
    reset(app, Seed=5, Greedy=True, Max_new_tokens=12)
    app.get_by_role("button", name="New conversation", exact=True).click()
    question = "What is the capital of Japan?"
    app.get_by_label("Your message", exact=True).fill(question)
    app.get_by_role("button", name="Send", exact=True).click()
    app.wait_for_function("() => document.getElementById('chat-status').textContent"
                          ".startsWith('Answered. The cache check')")
    answer = app.locator("#chat-log li").last.inner_text()
    app.get_by_label("Your message", exact=True).fill("And of France?")
    send = app.get_by_role("button", name="Send", exact=True)
    assert send.is_enabled()
    send.click()
    assert app.locator("#chat-status").inner_text().startswith(
        "The model is answering… (the cache check of the turn before was given up")
    assert send.is_disabled()  # until the new turn has started
    app.wait_for_function("() => document.getElementById('chat-status').textContent"
                          ".startsWith('This turn read')", timeout=120_000)
    # the new turn's words (it reads only its new tokens), never the turn before's
    assert "in the cache of the turn before" in app.locator("#chat-status").inner_text()
    wait_ready(app)
    trace = json.loads(app.evaluate("() => window.decodelab.trace()"))
    history = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    assert trace["messages"][:2] == history
    expected = cli_chat(history, "And of France?", seed=5, greedy=True, max_new_tokens=12)
    assert_same_trace(trace, expected, tol=1e-4)
    assert app.locator("#chat-log li").count() == 4
    assert app.errors == []


@pytest.fixture(scope="module")
def busy_neighbours():
    """Two CPU-bound processes, one per core: a learner's busy laptop."""
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def watched(chromium, base_url, busy_neighbours):
    """A page whose watchdog gives up after 4 s (30 s normally), SmolLM2 loaded, beside two
    busy neighbours (loaded once for the tests that use it)."""
    page = wait_ready(open_page(chromium, base_url, "?faults=1&watchdog=4000"))
    try:
        use_the_real_model(page)
        yield page
    finally:
        page.context.close()


def went_on(page):
    """Nothing was interrupted or restarted, the model is still loaded, and no error showed."""
    health = page.evaluate("() => window.decodelab.health")
    assert health["restarts"] == 0 and health["interrupts"] == 0, health
    assert page.evaluate("() => window.decodelab.pretrained.loaded")
    assert page.errors == []


@pytest.mark.alone
def test_a_long_search_on_the_real_model_answers_the_watchdog_beside_busy_neighbours(watched):
    """A 3-beam search with its cache check takes tens of seconds on SmolLM2 in the page. It
    runs in slices (decodelab.core.loops.slices), so the worker answers its heartbeat between two: with
    a watchdog of 4 s (30 s normally) and both cores busy, nothing is interrupted or restarted,
    the search answers, and the model is still loaded. (As one call it was taken for a hang.)"""
    from tests.e2e.test_search_page import search

    reset(watched, Model="smollm2", Prompt="The capital of France is", Seed=1, Max_new_tokens=8)
    reply = search(watched, **{"#beam-beams": 3})
    assert reply["ok"], reply
    # checked against its own limit (float32's), and the panel says so
    assert reply["trace"]["cache_tolerance"] == 1e-3
    assert all(step["cache_ok"] for step in reply["trace"]["steps"][:-1])
    said = watched.locator("#beam-check").inner_text()
    assert "Cache check passed" in said and "The limit for this model" in said, said
    went_on(watched)


LONG_PROMPT = "The river ran past the old mill and under the stone bridge to the sea. " * 12


@pytest.mark.alone
def test_a_long_prompt_on_the_real_model_is_read_in_slices_and_stops_when_asked(watched):
    """About 200 tokens of prompt on SmolLM2: its prefill (and after the text, the live check's
    pass over the same window) took 7 s and more in one call of the page's worker. Read a
    chunk per batch, with a watchdog of 4 s and both cores busy: the page says how far the
    reading is, nothing is interrupted or restarted, and the run equals the CLI's. Stop pressed
    while the prompt is read ends the run there, with no step."""
    from tests.e2e.test_page import finish_text, settle

    page = watched
    reset(page, Model="smollm2", Prompt=LONG_PROMPT, Seed=7, Greedy=True, Max_new_tokens=3)
    page.evaluate("""() => { window.__reading = []; const f = document.getElementById(
        'finish-text'); new MutationObserver(() => { if (f.textContent.startsWith('Reading'))
        window.__reading.push(f.textContent); }).observe(f, {childList: true, subtree: true,
        characterData: true}); }""")
    generate(page)
    trace = json.loads(page.evaluate("() => window.decodelab.trace()"))
    reading = page.evaluate("() => window.__reading")
    assert len(reading) >= 3 and reading[0].startswith("Reading the prompt: "), reading
    expected = cli_trace(model="smollm2", prompt=LONG_PROMPT, seed=7, greedy=True,
                         max_new_tokens=3, engine=ENGINE)
    assert [s["token_id"] for s in trace["steps"]] == [s["token_id"] for s in expected["steps"]]
    assert all(s["cache_ok"] for s in trace["steps"])  # the live check, in slices too
    # Stop while the prompt is being read
    page.get_by_role("button", name="Generate", exact=True).click()
    page.wait_for_function("() => document.getElementById('finish-text').textContent"
                           ".startsWith('Reading the prompt')")
    page.get_by_role("button", name="Stop", exact=True).click()
    settle(page)
    assert "Stopped by you" in finish_text(page)
    assert page.evaluate("() => window.decodelab.steps().length") == 0
    went_on(page)


@pytest.mark.alone
def test_a_lost_worker_reads_the_model_back_and_the_conversation_goes_on(watched):
    """A worker lost for real (a crash, injected; after the tests above, which must not have
    lost it): the page reads SmolLM2 back by itself from the copy this browser keeps, says so
    in one sentence, and the next turn goes on from the conversation on screen."""
    page = watched
    reset(page, Model="smollm2", Seed=5, Greedy=True, Max_new_tokens=12)
    page.get_by_label("Your message", exact=True).fill("What is the capital of Japan?")
    page.evaluate("() => window.decodelab.pretrained.send()")
    restarts = page.evaluate("() => window.decodelab.health.restarts")
    page.evaluate("() => window.decodelab.injectFault('crash')")
    page.wait_for_function("n => window.decodelab.health.restarts > n", arg=restarts,
                           timeout=60_000)
    said = wait_status(page, "Python was restarted, so the model was read again")
    assert said.startswith("Python was restarted, so the model was read again from the copy "
                           "kept in this browser in "), said
    assert said.endswith("; your settings and the conversation go on."), said
    wait_ready(page)
    assert page.evaluate("() => window.decodelab.pretrained.loaded")
    page.get_by_label("Your message", exact=True).fill("And of France?")
    page.evaluate("() => window.decodelab.pretrained.send()")
    trace = json.loads(page.evaluate("() => window.decodelab.trace()"))
    asked = [m["content"] for m in trace["messages"] if m["role"] == "user"]
    assert asked == ["What is the capital of Japan?", "And of France?"], trace["messages"]
    assert "Paris" in trace["text"]


def test_speculative_decoding_runs_on_the_real_model_with_the_ngram_draft(app):
    """Chapter 6's speculative decoding with Model SmolLM2 and the n-gram draft: greedy, the text
    is the CLI's greedy text; on a text that copies its prompt most guesses are kept."""
    from tests.e2e.conftest import open_chapter, reveal
    from tests.e2e.test_search_page import last_json, wait_reply
    from tests.test_pretrained import COPY_PROMPT

    use_the_real_model(app)
    reset(app, Model="smollm2", Prompt=COPY_PROMPT, Seed=1, Greedy=True, Max_new_tokens=16)
    open_chapter(app, "search")
    reveal(app, "#spec-draft").select_option("ngram")
    reveal(app, "#spec-gamma").fill("4")
    before = last_json(app, "speculate")
    app.get_by_role("button", name="Decode with the draft", exact=True).click()
    reply = wait_reply(app, "speculate", before)
    assert reply["ok"], reply
    plain = cli_trace(model="smollm2", prompt=COPY_PROMPT, greedy=True, max_new_tokens=16, seed=1,
                      engine=ENGINE)
    assert reply["trace"]["ids"] == [s["token_id"] for s in plain["steps"]]
    assert reply["trace"]["draft"] == "ngram" and reply["trace"]["acceptance_rate"] > 0.5
    assert "the same as without the draft" in app.locator("#spec-summary").inner_text()
    # its per-round check (a full pass each) is off for this model, and the panel says why
    assert app.locator("#spec-check").inner_text() == reply["check_skipped"]
    assert reply["check_skipped"].startswith("The cache check is off for SmolLM2 here")
    assert app.errors == []


def test_the_accuracy_experiment_asks_the_real_model(app):
    """Chapter 4's experiment with SmolLM2 chosen in its form: the real model's own defaults,
    no calculator (it was not trained for tool calls), and Python's numbers natively for the
    same request."""
    from decodelab.lesson.accuracy import PRETRAINED_DEFAULTS, AccuracyExperiment
    from tests.e2e.conftest import reveal

    use_the_real_model(app)
    reveal(app, "#accuracy")
    app.locator("#acc-model").select_option("smollm2")
    assert app.locator("#acc-questions").input_value() == str(PRETRAINED_DEFAULTS["questions"])
    assert app.locator("#acc-budget").input_value() == str(PRETRAINED_DEFAULTS["max_new_tokens"])
    assert not app.locator("#acc-tools").is_visible()
    assert app.locator("#acc-asked").inner_text() == (
        "SmolLM2 is asked capitals and small sums: right when the answer names the expected "
        "city or number as a whole word.")
    result = run_accuracy(app, temps="0, 1", questions=2, samples=2, budget=10)
    library = native_library()
    native = AccuracyExperiment(library, {
        "temperatures": "0, 1", "questions": 2, "samples_per_question": 2,
        "settings": {"model": "smollm2", "max_new_tokens": 10}}).run().result()
    assert result == native
    table = app.locator("#acc-results table").inner_text()
    assert "capitals and small sums" in table and "Tool call not readable" not in table
    assert result["engine"] == ENGINE and "on the Quantized (as llama.cpp) engine" in table
    hint = app.locator("#acc-results .acc-engines-hint").inner_text()
    assert "run the same experiment again" in hint
    assert "12 + 19 = 22" in app.locator("#acc-results").text_content()  # greedy's wrong sum (folded)
    # the tasks model again: its own defaults and the calculator back
    app.locator("#acc-model").select_option("transformer")
    assert app.locator("#acc-tools").is_visible()
    assert app.locator("#acc-budget").input_value() == "40"
    assert app.errors == []


def test_serving_chat_requests_of_the_real_model(app):
    """Chapter 7's serving with Model served SmolLM2: its own defaults, chat requests that share
    the system message, and the same schedule and texts as Python's natively for the request."""
    from decodelab.lesson.serving import PRETRAINED_DEFAULTS, Serving
    from tests.e2e.conftest import reveal

    use_the_real_model(app)
    reveal(app, "#serving")
    app.locator("#serving-model").select_option("smollm2")
    assert app.locator("#serving-requests").input_value() == str(PRETRAINED_DEFAULTS["requests"])
    assert app.locator("#serving-block-size").input_value() == str(PRETRAINED_DEFAULTS["block_size"])
    assert not app.locator("#serving-dataset").is_visible()
    assert app.locator("#serving-chat").is_visible()
    got = app.evaluate("""() => window.decodelab.serving.serve({requests: 3, block_size: 4,
        seed: 1, memory_blocks: '', max_running: 8, parallel_samples: 1, workload: ''})""")
    library = native_library()
    want = Serving(library, {"model": "smollm2", "requests": 3, "block_size": 4, "seed": 1}
                   ).run().result(frames=False)
    assert [r["ids"] for r in got["requests"]] == [r["ids"] for r in want["requests"]]
    for key in ("steps", "static_steps", "prefix_hit_rate", "prefill_tokens_saved", "system",
                "memory_blocks", "command"):
        assert got[key] == want[key], key
    assert f"--model=smollm2 --engine={ENGINE}" in got["command"]  # the engine it served on
    summary = app.locator("#serving-summary").inner_text()
    assert f"Every request began with the system message “{want['system']}”." in summary
    assert "The requests’ prefills took" in summary
    # the trained transformer again: its dataset back, and its own numbers
    app.locator("#serving-model").select_option("transformer")
    assert app.locator("#serving-dataset").is_visible() and not app.locator("#serving-chat").is_visible()
    assert app.locator("#serving-block-size").input_value() == "16"
    assert app.errors == []


def test_widgets_run_the_real_model_once_the_learner_loads_it(chromium, base_url):
    """A widget whose link names SmolLM2 (its model control not shown): the link is taken, the
    card stands in the widget with Load, nothing is fetched or run unasked. Without the controls
    panel the card stands before the text; the accuracy experiment's form, asking for SmolLM2,
    offers a Load of its own (a widget of that form alone has no card): the same load, and the
    link's first sample follows it, the CLI's run for the same settings."""
    from tests.e2e.conftest import record_errors, wait_ready

    link = ("index.html?embed=true&panels=controls,text&controls=temperature&model=smollm2"
            "&prompt=The+capital+of+France+is&seed=3&temperature=0.7&max_new_tokens=6&run=true")
    fetched = []
    page = open_page(chromium, base_url, link, viewport={"width": 800, "height": 900})
    page.on("request", lambda r: fetched.append(r.url) if r.url.endswith(".gguf") else None)
    wait_ready(page)
    assert page.locator("#notice").is_hidden()  # the link's model is taken, not refused
    assert page.locator("#pretrained").is_visible() and page.locator("#pretrained-load").is_visible()
    assert status(page).startswith("This link runs SmolLM2-135M-Instruct, a real model: press "
                                   "Load the model")
    assert page.evaluate("() => window.decodelab.steps().length") == 0 and fetched == []
    assert page.errors == []
    context = page.context
    page.close()  # the last page of the site goes, and its Python with it

    def widget(link):
        other = record_errors(context.new_page())
        other.goto(base_url + link)
        return wait_ready(other)

    # without the controls panel: the card stands before the text; the accuracy form of the
    # same widget offers its own Load, which is the same load, and the link's sample follows it
    both = widget(link.replace("panels=controls,text&controls=temperature", "panels=text,tools"))
    card = both.locator("#pretrained")
    assert card.is_visible() and both.locator("#pretrained-load").is_visible()
    assert card.evaluate("c => c.nextElementSibling.dataset.panel") == "text"  # before the text
    both.locator("#acc-model").select_option("smollm2")
    offer = both.locator("#accuracy [data-load-real]")
    assert offer.is_visible() and "It is not loaded yet" in offer.inner_text()
    offer.get_by_role("button", name="Load it").click()
    both.wait_for_function("() => window.decodelab.lastRun !== null", timeout=120_000)
    assert both.evaluate("() => window.decodelab.lastRun.then((r) => r.status)") == "done"
    again = json.loads(both.evaluate("() => window.decodelab.trace()"))
    # (a link's settings are its own and the workbench's defaults, as on the command line: the
    # model card's sampling comes when the learner chooses the model, not with a link)
    assert again["engine"] == ENGINE and again["settings"]["top_p"] == 1.0
    expected = cli_trace(model="smollm2", prompt="The capital of France is", seed=3,
                         temperature=0.7, max_new_tokens=6, engine=ENGINE)
    assert [s["token_id"] for s in again["steps"]] == [s["token_id"] for s in expected["steps"]]
    assert offer.is_hidden() and card.locator("#pretrained-load").is_hidden()  # loaded
    result = run_accuracy(both, temps="0", questions=1, budget=8)
    assert result["model"] == "smollm2" and result["rows"][0]["runs"] == 1, result
    assert both.errors == []
    context.close()
