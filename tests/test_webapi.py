"""The worker's Python side, natively: one entry point and one reply shape for every endpoint,
pages kept apart in sessions, the start-up warm-up leaving no trace in the state a learner sees,
and a run made again after a restart."""

import pytest
from decodelab.core.models.base import Model
from decodelab.entry import webapi
from decodelab.pretrained.files import find_smollm2

from tests.conftest import api, run_to_end


@pytest.fixture
def fresh(artifacts):
    """A page that has just started: set up, no run."""
    assert api("setup", {"assets": str(artifacts)})["ok"]
    return artifacts


def test_every_endpoint_answers_every_malformed_request_in_one_shape(fresh):
    info = api("setup", {"assets": str(fresh)})
    assert info["endpoints"] == list(webapi.ENDPOINTS)
    for name in webapi.ENDPOINTS:
        if name == "setup":
            continue
        for text in ("{oops", "[1, 2]", "null", "42", '"text"'):
            out = api(name, text=text)
            assert out["ok"] is False and len(out["errors"]) == 1, (name, text, out)
            error = out["errors"][0]
            assert error["field"] in ("settings", "request") and error["label"]
            assert error["message"].endswith("must be a JSON object of name: value."), error
    out = api("frobnicate", {})
    assert not out["ok"] and "Unknown request 'frobnicate'" in out["errors"][0]["message"]


def test_pages_are_kept_apart_and_must_be_set_up(fresh):
    assert api("trace", session="never-set-up")["errors"][0]["message"].startswith(
        "Python is not set up")
    assert api("setup", {"assets": str(fresh)}, session="other")["ok"]
    mine = run_to_end({"seed": 5, "max_new_tokens": 6})
    theirs = run_to_end({"seed": 6, "max_new_tokens": 9}, session="other")
    assert api("trace")["trace"] == mine and api("trace", session="other")["trace"] == theirs
    assert mine["text"] != theirs["text"]
    del webapi.SESSIONS["other"]


def test_pages_of_one_python_share_its_models_but_not_their_own_text(fresh):
    """Widgets that share one worker: each its own session, one copy of every model."""
    assert api("setup", {"assets": str(fresh)}, session="w2")["ok"]
    try:
        mine, theirs = webapi.SESSIONS["page"].library, webapi.SESSIONS["w2"].library
        assert mine.model("transformer", "names") is theirs.model("transformer", "names")
        assert mine.model("bigram", "prose", "bpe") is theirs.model("bigram", "prose", "bpe")
        # text one of them trains on is its own, and the other cannot run it
        assert api("train", {"text": "abba\nbaab\n"}, session="w2")["ok"]
        assert "custom" in theirs.datasets() and "custom" not in mine.datasets()
        refused = api("start", {"dataset": "custom", "model": "bigram"})
        assert not refused["ok"] and refused["errors"][0]["field"] == "dataset"
        assert run_to_end({"dataset": "custom", "prompt": "a", "seed": 1}, session="w2")["text"]
        # the same name trained by both pages gives two models, each of its own text
        assert api("train", {"text": "xyzzy\n"})["ok"]
        assert mine.model("bigram", "custom") is not theirs.model("bigram", "custom")
        assert set(mine.corpus("custom").chars) != set(theirs.corpus("custom").chars)
    finally:
        webapi.forget("w2")
        webapi.SESSIONS["page"].library._custom.clear()
    assert "w2" not in webapi.SESSIONS


def test_warm_up_runs_every_model_and_keeps_nothing(fresh):
    info = api("setup", {"assets": str(fresh)})
    assert info["cache_tolerance"] == Model.check_tolerance["float64"] == 1e-9
    assert api("start", {"seed": 5, "max_new_tokens": 12})["ok"]
    api("advance", {"budget_ms": 500})
    assert api("explain_step", {"step": 1})["ok"]  # the lesson's replay
    assert api("experiment_start", {"settings": {"seed": 2, "max_new_tokens": 10},
                                    "temperatures": "0.5, 1"})["ok"]
    before = api("trace")
    page = webapi.SESSIONS["page"]
    run, replay, experiment = page.run, page.replay, page.planned["experiment"]
    assert replay is not None and experiment is not None

    out = api("warm_up")
    assert out["models"] == ["bigram", "transformer"]
    assert out["steps"] == sum(s["max_new_tokens"] for s in webapi.run.WARM_UP) and out["ms"] >= 0
    assert api("trace") == before  # Export trace still gives the learner's run
    assert page.run is run and page.replay is replay and page.planned["experiment"] is experiment


# Every experiment the page makes a few runs at a time: a request it accepts, one it refuses.
EXPERIMENT_REQUESTS = {
    "experiment": ({"settings": {"seed": 2, "max_new_tokens": 10}, "temperatures": "0.5, 1"},
                   {"temperatures": "-1"}),
    "accuracy": ({"questions": 2, "temperatures": "0"}, {"questions": 0}),
    "validity": ({"cards": 1, "budgets": "30", "temperatures": "0", "samples_per_question": 1},
                 {"cards": 0}),
    "acceptance": ({"settings": {"max_new_tokens": 10}, "gammas": "2", "temperatures": "0"},
                   {"gammas": "0"}),
    "serving": ({"requests": 2, "block_size": 8}, {"block_size": 0}),
    # the real model read a part at a time (the worker writes its file where it says)
    "pretrained_load": ({"path": str(find_smollm2())}, {"path": "/no/such/model.gguf"}),
}


def test_every_experiment_starts_and_advances_by_one_rule(fresh):
    """Each experiment's start plans it and its advance makes it; before any start, and after
    a refused one (even in the middle of another), advance says that none has been started:
    a refused start leaves no experiment behind. No *_start endpoint escapes the rule (a run's
    restore is not an experiment: it makes a run again)."""
    from decodelab.entry.webapi.registry import EXPERIMENTS

    starts = {name[:-len("_start")] for name in webapi.ENDPOINTS if name.endswith("_start")}
    assert starts - {"restore"} == set(EXPERIMENTS) == set(EXPERIMENT_REQUESTS)
    for name, (good, bad) in EXPERIMENT_REQUESTS.items():
        nothing = api(f"{name}_advance", {"budget_ms": 0})
        assert not nothing["ok"] and nothing["errors"][0]["field"] == "request"
        assert "has been started" in nothing["errors"][0]["message"], name
        started = api(f"{name}_start", good)
        assert started["ok"] and not started["done"], (name, started)
        assert started["progress"]["done"] == 0 and started["progress"]["total"] > 0
        step = api(f"{name}_advance", {"budget_ms": 0})
        assert step["ok"] and step["progress"] != started["progress"], (name, step)
        refused = api(f"{name}_start", bad)
        assert not refused["ok"] and refused["errors"], name
        assert api(f"{name}_advance", {"budget_ms": 0}) == nothing, name
        again = api(f"{name}_start", good)  # a new start after the refusal begins afresh
        assert again == started, name


def restore(request, budget_ms=500):
    out = api("restore_start", request)
    while out["ok"] and not out["done"]:
        out = api("restore_advance", {"budget_ms": budget_ms})
    return out


def test_a_run_says_its_own_model_s_cache_and_check_limit(fresh):
    """start's reply carries the KV cache of the model that runs and the live check's limit
    for its logits, which the page's cache card and step notes draw (not the dataset's
    transformer's): the BPE transformer's, not the character one's; none for the bigram."""
    from decodelab.core.models.kvcache import cache_shape

    library = webapi.SESSIONS["page"].library
    started = api("start", {"model": "transformer", "dataset": "prose", "tokenizer": "bpe",
                            "prompt": "The", "seed": 1})
    bpe = library.model("transformer", "prose", "bpe")
    assert started["cache"] == {**cache_shape(bpe), "tolerance": Model.check_tolerance["float64"]}
    assert started["cache"]["bytes_per_token"] == (2 * bpe.cfg.n_layer * bpe.cfg.n_kv_head
                                                   * bpe.cfg.head_dim * 8)
    assert "cache" not in api("start", {"model": "bigram", "dataset": "prose", "prompt": "The",
                                        "seed": 1})


def test_a_chat_turn_over_the_window_says_what_it_dropped(fresh):
    """A conversation longer than the window: start's reply says how many of its first tokens
    the window has no room for (the context shift's rule), the run reads it anew (no tokens of
    the turn before are reused), and its first step is a context shift."""
    from decodelab.core.models.layers import window_start
    from decodelab.pretrained.model import load

    library = webapi.SESSIONS["page"].library
    if not library.has_pretrained():
        library.keep_pretrained(load(find_smollm2()))
    model = library.pretrained()
    rules = {"greedy": True, "max_new_tokens": 1, "cache_check": False}
    first = [{"role": "user", "content": "Count with me."}]
    short = run_to_end({**rules, "messages": first})
    said = {"role": "assistant", "content": short["text"]}
    started = api("start", {**rules, "messages": [*first, said, {"role": "user", "content": "Sure."}]})
    assert started["chat"]["reused"] > 0 and started["chat"]["dropped"] == 0  # fits: reused
    long = " ".join(str(i) for i in range(600))  # about 2,300 tokens
    run_to_end({**rules, "messages": first})
    started = api("start", {**rules, "messages": [*first, said, {"role": "user", "content": long}]})
    chat = started["chat"]
    assert chat["prompt_tokens"] > model.cfg.context_size == chat["window"]
    assert chat["dropped"] == window_start(chat["prompt_tokens"], chat["window"]) == 1024  # half
    assert chat["reused"] == 0  # read anew: the kept cache's positions do not survive a shift
    # said before any work: the start reads nothing (the batches read the window a chunk each)
    assert webapi.SESSIONS["page"].run.session is None
    while not api("advance", {"budget_ms": 500})["done"]:
        pass
    steps = api("trace")["trace"]["steps"]
    assert steps[0]["context_shift"] and steps[0]["cache_length"] == chat["prompt_tokens"] - 1024


def test_a_chat_turn_checks_and_renders_its_conversation_once(fresh, monkeypatch):
    """The page's chat turn (start, its batches, its trace) and the command line's go through one
    path (pretrained.chat.start_turn): the conversation is checked and rendered once a turn,
    and the trace says what the run read."""
    from decodelab.pretrained.chat import ChatTemplate
    from decodelab.pretrained.model import load

    library = webapi.SESSIONS["page"].library
    if not library.has_pretrained():
        library.keep_pretrained(load(find_smollm2()))
    checked, check = [], ChatTemplate.check
    monkeypatch.setattr(ChatTemplate, "check",
                        lambda self, messages: checked.append(1) or check(self, messages))
    messages = [{"role": "user", "content": "Name a colour."}]
    run_to_end({"greedy": True, "max_new_tokens": 3, "cache_check": False, "messages": messages})
    trace = api("trace")["trace"]
    assert len(checked) == 1
    model = library.pretrained()
    assert trace["prompt_ids"] == model.template.ids(messages)
    assert trace["messages"] == [*messages, {"role": "assistant", "content": trace["text"]}]


def test_restore_makes_the_same_run_again_finished_or_stopped(fresh):
    settings = {"seed": 8, "max_new_tokens": 60, "stop": ["an"], "top_k": 12, "temperature": 1.3}
    finished = run_to_end(settings)
    api("setup", {"assets": str(fresh)})  # as in a new worker: no run at all
    assert api("trace")["trace"] is None
    out = restore({"settings": finished["settings"], "steps": len(finished["steps"])})
    assert out["ok"] and out["text"] == finished["text"]
    assert api("trace")["trace"] == finished
    assert api("explain_step", {"step": 2})["matches_record"]

    # a run the learner stopped after 7 steps, with text still held back for a stop string
    stopped_settings = {"seed": 3, "max_new_tokens": 500, "ignore_eos": True, "stop": ["zzz"]}
    assert api("start", stopped_settings)["ok"]
    for _ in range(7):
        api("advance", {"budget_ms": 0})  # a budget of 0 runs one step
    api("cancel")
    stopped = api("trace")["trace"]
    assert len(stopped["steps"]) == 7 and stopped["finish_reason"] == "cancelled"
    api("setup", {"assets": str(fresh)})
    out = restore({"settings": stopped["settings"], "steps": 7})
    assert out["ok"] and out["finish_reason"] == "cancelled"
    assert api("trace")["trace"] == stopped


def test_restore_names_what_is_wrong(fresh):
    for request, field in [({"settings": {"seed": 1}, "steps": -1}, "steps"),
                           ({"settings": {"seed": 1}, "steps": "many"}, "steps"),
                           ({"settings": {"top_p": 7}, "steps": 5}, "top_p"),
                           ({"settings": [1, 2], "steps": 5}, "settings")]:
        out = api("restore_start", request)
        assert not out["ok"] and out["errors"][0]["field"] == field, (request, out)
    for budget in (-1, "soon", 10_000):
        out = api("advance", {"budget_ms": budget})
        assert not out["ok"] and "budget_ms must be a number from 0 to 500" in \
            out["errors"][0]["message"]


def test_restore_in_batches_gives_the_same_run(fresh):
    finished = run_to_end({"model": "transformer", "seed": 6, "max_new_tokens": 25,
                           "ignore_eos": True})
    api("setup", {"assets": str(fresh)})
    no_start = api("restore_advance", {"budget_ms": 10})
    assert not no_start["ok"] and "restore_start" in no_start["errors"][0]["message"]
    request = {"settings": finished["settings"], "steps": 25}
    assert api("restore_start", request) == {"ok": True, "done": False, "steps": 0}
    progress = []
    while True:
        out = api("restore_advance", {"budget_ms": 0})  # a budget of 0 runs one step
        if out["done"]:
            break
        progress.append(out["steps"])
    assert progress == list(range(1, 25)) and out["steps"] == 25
    assert api("trace")["trace"] == finished


def test_preview_is_the_next_tokens_distribution_under_the_rules_being_set(fresh):
    from decodelab.core.library import Library

    from tests.conftest import decode_distribution

    model = Library(fresh).model("bigram", "names")
    rules = {"temperature": 0.5, "top_k": 5, "top_p": 0.9}
    out = api("preview", {"settings": {"prompt": "ma", **rules}})
    assert out["ok"] and out["step"] == 0
    # by hand: the bigram's row for "a", through the same rules
    _, kept, p = decode_distribution(model.log_probs[model.tokenizer.encode("a")[0]], **rules)
    final = out["pipelines"]["temperature-first"]["final"]
    for row, shown, keep in zip(out["rows"], final["p"], final["kept"]):
        assert shown == pytest.approx(p[row["token_id"]], abs=1e-12) and keep == kept[row["token_id"]]
    # at a step of the run on screen: that step's logits, the new rules
    trace = run_to_end({"seed": 4, "prompt": "jo", "max_new_tokens": 6, "ignore_eos": True})
    prev = model.tokenizer.encode("jo" + trace["text"][:2])[-1]
    out = api("preview", {"settings": {"prompt": "jo", "temperature": 2.0}, "step": 2})
    _, _, p = decode_distribution(model.log_probs[prev], temperature=2.0)
    final = out["pipelines"]["temperature-first"]["final"]
    assert out["step"] == 2
    assert [f for f in final["p"]] == pytest.approx([p[r["token_id"]] for r in out["rows"]], abs=1e-12)
    bad = api("preview", {"settings": {"top_p": 3}, "step": 1})
    assert not bad["ok"] and bad["errors"][0]["field"] == "top_p"
    bad = api("preview", {"settings": {}, "step": 6})
    assert not bad["ok"] and "from 0 to 5" in bad["errors"][0]["message"]


def test_a_choice_that_the_data_has_not_got_switches_the_data_and_says_so(fresh):
    # Byte-level BPE chosen with the names (read one character at a time): the data becomes
    # the prose, which has BPE, and the sentence says why; nothing is refused
    out = api("check", {"settings": {"dataset": "names", "tokenizer": "bpe"}, "changed": "tokenizer"})
    assert out["ok"] and out["errors"] == [], out["errors"]
    assert out["adjust"] == {"dataset": "prose"}
    assert out["said"]["dataset"] == ("Byte-level BPE is not made for the names data, so Dataset "
                                      "is now prose, which has it.")
    assert out["values"]["dataset"] == "prose" and out["values"]["tokenizer"] == "bpe"
    # characters with the tasks data (BPE only: its markers are tokens): the names take over
    out = api("check", {"settings": {"dataset": "tasks", "tokenizer": "chars"}, "changed": "tokenizer"})
    assert out["adjust"] == {"dataset": "names"} and out["errors"] == []
    # the other way: the names chosen while BPE is set bring their own tokenizer, in words
    out = api("check", {"settings": {"dataset": "names", "tokenizer": "bpe"}, "changed": "dataset"})
    assert out["adjust"] == {"tokenizer": "chars"}
    assert out["said"]["tokenizer"] == ("The names data is read as Characters only, so Tokenizer "
                                        "is now Characters.")
    # a tokenizer the data has: nothing moves, nothing is said
    out = api("check", {"settings": {"dataset": "prose", "tokenizer": "bpe"}, "changed": "tokenizer"})
    assert out["adjust"] == {} and out["said"] == {}


def test_a_chat_model_starts_from_its_own_recommended_sampling_and_says_where_it_is_from(fresh):
    """SmolLM2's model card samples at T = 0.2 with top-p 0.9; the workbench's T = 1 with no
    filter is the trained models'. Only values still at the other's defaults move."""
    from decodelab.pretrained.limits import RECOMMENDED

    out = api("check", {"settings": {"model": "smollm2", "prompt": "Hi"}, "changed": "model"})
    assert out["adjust"] == RECOMMENDED == {"temperature": 0.2, "top_p": 0.9}
    assert out["said"]["temperature"] == ("SmolLM2 starts from the sampling its model card "
                                          "runs it with: Temperature 0.2, Top-p 0.9.")
    # a temperature the learner set stays; the filter still at its default takes the card's
    out = api("check", {"settings": {"model": "smollm2", "prompt": "Hi", "temperature": 0.7},
                        "changed": "model"})
    assert out["adjust"] == {"top_p": 0.9}
    # back to a trained model: what is still the card's goes back to the workbench's
    out = api("check", {"settings": {"model": "transformer", "dataset": "names",
                                     "temperature": 0.2, "top_p": 0.9}, "changed": "model"})
    assert out["adjust"] == {"temperature": 1.0, "top_p": 1.0}
    assert "workbench's own settings" in out["said"]["top_p"]
    # another change moves nothing, and a wrong value stays with its own error
    assert api("check", {"settings": {"model": "smollm2", "prompt": "Hi"},
                         "changed": "prompt"})["adjust"] == {}
    out = api("check", {"settings": {"model": "smollm2", "prompt": "Hi", "temperature": "hot"},
                        "changed": "model"})
    assert out["adjust"] == {"top_p": 0.9} and "temperature" in {e["field"] for e in out["errors"]}


def test_a_run_that_asks_for_a_tokenizer_the_data_has_not_got_is_refused_in_the_pages_words(fresh):
    out = api("start", {"dataset": "names", "tokenizer": "bpe"})
    assert not out["ok"]
    (error,) = out["errors"]
    assert error["field"] == "tokenizer"
    assert error["message"] == ("Byte-level BPE is learned from the prose and the tasks data "
                                "only: the names data is read one character at a time, so with it "
                                "Tokenizer must be Characters (chars).")


@pytest.mark.parametrize("check", [True, False])
def test_the_batch_that_ends_the_text_goes_out_before_the_live_check_catches_up(fresh, check):
    # what the page shows while a real model's check makes its full pass: the whole answer,
    # and that the check is running; the verdicts come with the next, last batch
    settings = {"model": "transformer", "dataset": "prose", "prompt": "The ", "seed": 4,
                "max_new_tokens": 12, "ignore_eos": True, "cache_check": check}
    assert api("start", settings)["ok"]
    batches = [api("advance", {"budget_ms": 500})]
    while not batches[-1]["done"]:
        batches.append(api("advance", {"budget_ms": 500}))
    steps = [s for b in batches for s in b["steps"]]
    assert len(steps) == 12 and batches[-1]["finish_reason"] == "length"
    if not check:  # nothing to wait for: the text's last batch is the run's last
        assert [b["checking"] for b in batches] == [False] * len(batches)
        assert batches[-1]["steps"] and batches[-1]["checks"] == []
        return
    ending, last = batches[-2:]
    assert ending["checking"] and not ending["done"] and ending["steps"][-1] == steps[-1]
    assert ending["text"] == last["text"] and ending["held"] == []  # the whole answer, shown
    assert all(s["cache_ok"] is None for s in ending["steps"])  # not checked yet
    assert last["steps"] == [] and not last["checking"]
    verdicts = [c for b in batches for c in b["checks"]]
    assert [step for step, _, _ in verdicts] == list(range(12)) and all(ok for *_, ok in verdicts)
    assert api("trace")["trace"]["steps"][-1]["cache_ok"] is True


def read_whole(request) -> dict:
    out = api("pretrained_load_start", request)
    while out["ok"] and not out["done"]:
        out = api("pretrained_load_advance", {"budget_ms": 500})
    return out


def test_the_real_model_is_read_for_the_engine_asked_for_and_says_which(fresh):
    """The engines as the page offers them, Python's words; a load names its engine (the page's
    default where it names none: llama.cpp's arithmetic where the kernels run, as here) and
    what the model's weights hold; an engine that is none is refused by name, before a byte of
    the file is read."""
    about = api("pretrained")["engines"]
    assert [c["id"] for c in about["choices"]] == ["reference", "quantized"]
    assert all(c["label"] and c["words"] for c in about["choices"])
    assert about["compiled"] and about["default"] == "quantized", about
    bad = api("pretrained_load_start", {"path": str(find_smollm2()), "engine": "fast"})
    assert not bad["ok"] and bad["errors"][0]["field"] == "engine"
    assert bad["errors"][0]["message"] == ("Engine: 'fast' is not an engine; choose reference "
                                           "or quantized.")
    out = read_whole({"path": str(find_smollm2())})
    info = out["result"]
    assert info["name"] == "SmolLM2-135M-Instruct"  # its makers' name, not its file's
    assert info["engine"] == "quantized" and info["engine_label"] == "Quantized (as llama.cpp)"
    assert info["weight_bytes"] < 0.3 * 4 * info["params"]  # the file's blocks, not float32
    assert api("pretrained")["engine"] == "quantized"


def test_setup_takes_the_kernels_the_page_loaded_or_says_why_it_has_none(fresh, monkeypatch):
    """The page's worker names the side module it loaded into Python's heap, or what kept it
    from loading one: without kernels the page offers the reference engine first, and says
    why the quantized one would be slow."""
    from decodelab.core.kernels import library
    from decodelab.core.kernels.source import native_name

    monkeypatch.delenv(library.ENV, raising=False)
    try:
        assert api("setup", {"assets": str(fresh), "kernels": None,
                             "kernels_problem": "out of memory"})["ok"]
        about = api("pretrained")["engines"]
        assert not about["compiled"] and about["default"] == "reference"
        assert about["kernels"] == ("The page could not load its C kernels (out of memory), so "
                                    "the quantized products run in numpy: the same numbers, "
                                    "many times slower.")
        out = api("setup", {"assets": str(fresh), "kernels": 7})
        assert not out["ok"] and "kernels must be a path or null" in out["errors"][0]["message"]
        assert api("setup", {"assets": str(fresh),
                             "kernels": str(library.BUILT / native_name())})["ok"]
        about = api("pretrained")["engines"]
        assert about["compiled"] and about["default"] == "quantized"
    finally:
        monkeypatch.undo()
        library.kernels(reload=True)
