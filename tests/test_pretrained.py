"""The real model as a user meets it: `python -m decodelab` with --model smollm2 (chat, generate,
tokenize, detokenize, cache-check), and every kind of bad input refused in one sentence with the
other models unharmed. (Its parity with transformers is tests/test_smollm2.py.)"""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from decodelab.core.library import Library
from decodelab.errors import FieldError, FieldErrors
from decodelab.pretrained import files, model as pretrained

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "What is the capital of Japan?"


def cli(*args, env=None):
    import os

    proc = subprocess.run([sys.executable, "-m", "decodelab", *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "py"),
                                                    **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def smol():
    try:
        return pretrained.load(files.find_smollm2())
    except FileNotFoundError as e:
        pytest.fail(str(e))


def test_chat_answers_the_question_greedy_without_a_seed(smol):
    code, out, err = cli("chat", "--model", "smollm2", "--message", QUESTION, "--greedy")
    assert code == 0, err
    trace = json.loads(out)
    assert trace["text"] == "The capital of Japan is Tokyo."
    assert (trace["finish_reason"], trace["stop_reason"]) == ("stop", "eos")
    messages = [{"role": "user", "content": QUESTION}]
    assert trace["prompt_ids"] == smol.template.ids(messages)
    assert trace["prompt"].startswith("<|im_start|>system\nYou are a helpful AI assistant")
    assert trace["messages"][-1] == {"role": "assistant", "content": trace["text"]}
    top = trace["steps"][0]["top"]
    assert top[0]["token_text"] == "The" and 0 < top[0]["p_raw"] <= 1
    assert trace["steps"][-1]["token_id"] == smol.tokenizer.eos_id == 2


def test_a_chat_goes_on_from_its_history(tmp_path):
    code, out, err = cli("chat", "--message", "Name one colour.", "--greedy",
                         "--max-new-tokens", "12", "--system", "Answer in a few words.")
    assert code == 0, err
    first = json.loads(out)
    (tmp_path / "h.json").write_text(out)
    code, out, err = cli("chat", "--history", str(tmp_path / "h.json"), "--message",
                         "And another?", "--greedy", "--max-new-tokens", "12")
    assert code == 0, err
    second = json.loads(out)
    assert second["messages"][:3] == first["messages"]
    assert second["prompt"].startswith("<|im_start|>system\nAnswer in a few words.<|im_end|>")
    assert second["prompt"].count("<|im_start|>") == 5  # system, user, assistant, user, the answer


def test_each_turn_of_a_conversation_draws_with_its_own_seed(tmp_path, smol):
    """A sampled follow-up draws with the seed advanced by the answers before it, so it does not
    restart the last turn's stream; the trace holds the seed it drew with, and the same turn
    drawn from that seed alone (a history with no answer in it) gives the same tokens."""
    from decodelab.pretrained.chat import turn_seed

    assert turn_seed(42, [{"role": "user", "content": "Hi"}]) == 42
    two = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
           {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]
    assert turn_seed(42, two) == 44 and turn_seed(2**32 - 1, two) == 1  # (wraps in the range)
    args = ("--temperature", "1", "--max-new-tokens", "6", "--seed", "7")
    code, out, err = cli("chat", "--message", "Name a colour.", *args)
    assert code == 0, err
    first = json.loads(out)
    assert first["settings"]["seed"] == 7
    (tmp_path / "h.json").write_text(out)
    code, out, err = cli("chat", "--history", str(tmp_path / "h.json"), "--message",
                         "Another?", *args)
    second = json.loads(out)
    assert code == 0 and second["settings"]["seed"] == 8
    # the same prompt drawn with the turn's seed from the start: the same tokens
    from decodelab.core.loops.generate import Generation
    from decodelab.core.rules.settings import validate

    settings = validate({"model": "smollm2", "temperature": 1, "max_new_tokens": 6, "seed": 8})
    again = Generation(smol, settings, prompt=(second["prompt_ids"], None)).run()
    assert [r["token_id"] for r in again.records] == [s["token_id"] for s in second["steps"]]


def test_a_json_answer_ends_with_its_object():
    """Greedy, SmolLM2 prefers a newline to the end after the object (54% to 46%) and wrote
    newlines until the budget: JSON mode ends the answer where the object ends."""
    code, out, err = cli("chat", "--message", "Give a JSON object with a name and an age.",
                         "--greedy", "--json-mode", "--max-new-tokens", "80")
    assert code == 0, err
    trace = json.loads(out)
    assert trace["json"]["status"] == "valid", trace["text"]
    assert trace["text"].endswith("}") and (trace["finish_reason"], trace["stop_reason"]) == \
        ("stop", "eos")


def test_generate_tokenize_and_detokenize_with_its_own_tokenizer(smol):
    code, out, err = cli("generate", "--model", "smollm2", "--prompt",
                         "The capital of France is", "--greedy", "--max-new-tokens", "3")
    assert code == 0, err
    assert out.startswith("The capital of France is")
    text = "Ⅻ ½ naïve 日本 🎉"
    code, out, err = cli("tokenize", "--model", "smollm2", "--text", text)
    assert code == 0, err
    ids = json.loads(out)["ids"]
    assert ids == smol.tokenizer.encode(text)
    code, out, err = cli("detokenize", "--model", "smollm2", "--ids", ",".join(map(str, ids)))
    assert code == 0 and json.loads(out)["text"] == text


def test_the_live_cache_check_holds_on_the_real_model(smol):
    code, out, err = cli("cache-check", "--model", "smollm2", "--prompt", "A cache of keys",
                         "--steps", "6", "--dtype", "float32")
    assert code == 0, err
    result = json.loads(out)
    assert result["ok"] and result["max_abs_diff"] < result["tolerance"]


def test_a_message_over_the_window_shifts_and_checks_within_the_model_s_own_limit(smol):
    """A message longer than the 2,048 positions kept: its oldest part is dropped (a context
    shift), and the live check judges the cached logits by SmolLM2's float32 limit, which its
    long sums need (they round further than the small models' do)."""
    from decodelab.core.models.base import Model
    from decodelab.core.models.checks import check_tolerance

    assert check_tolerance(smol) == smol.check_tolerance["float32"] == 1e-3
    assert check_tolerance(smol, np.float32) > Model.check_tolerance["float32"]
    message = "Numbers count up: " + " ".join(str(i) for i in range(600))  # ~2,300 tokens
    assert len(smol.tokenizer.encode(message)) > smol.cfg.context_size
    code, out, err = cli("chat", "--message", message, "--greedy", "--max-new-tokens", "3",
                         "--cache-check", "--json")
    assert code == 0, err
    steps = json.loads(out)["steps"]
    assert steps[0]["context_shift"] and steps[0]["cache_length"] < smol.cfg.context_size
    assert all(s["cache_ok"] for s in steps), [s["cache_diff"] for s in steps]
    assert all(s["cache_diff"] <= 1e-3 for s in steps)


def test_the_temperature_experiment_on_the_real_model(smol):
    """The seed's experiment on SmolLM2: its words are looked up in English prose (its own
    training text is not here), recomputed from the sample texts; a hot temperature makes
    up words and picks what the model itself finds unlikely."""
    from decodelab.lesson.experiment import Experiment, generated_words, known_share, word_vocabulary

    library = Library(ROOT / "artifacts") if (ROOT / "artifacts" / "data").is_dir() else Library()
    library.keep_pretrained(smol)
    prompt = "Write a haiku about the sea.\n"
    result = Experiment(library, {"settings": {"model": "smollm2", "prompt": prompt, "seed": 3,
                                               "max_new_tokens": 24},
                                  "temperatures": "0, 2", "mode": "repeated", "samples": 2}
                        ).run().result()
    assert result["reference"] == "prose" and result["uses"].startswith("SmolLM2-135M-Instruct")
    labels = {m["key"]: m["label"] for m in result["measures"]}
    assert labels["known_share"] == "Words in English prose"
    means = {m["key"]: m["means"] for m in result["measures"]}
    assert "3-token runs" in means["repeated_3gram"]
    prose = word_vocabulary(library.corpus("prose").train)
    cold, hot = result["rows"]
    for row in (cold, hot):
        shares = [known_share(generated_words(prompt, t, True), prose) for t in row["texts"]]
        shares = [x for x in shares if x is not None]
        assert row["measures"]["known_share"]["mean"] == pytest.approx(np.mean(shares), abs=0.2)
    assert hot["measures"]["new_share"]["mean"] > cold["measures"]["new_share"]["mean"]
    assert hot["measures"]["mean_logprob"]["mean"] < cold["measures"]["mean_logprob"]["mean"] - 3
    known = [f["text"] for f in result["findings"] if f["kind"] == "known"]
    assert known and known[0].startswith("The share of words found in English prose")


def test_the_accuracy_experiment_asks_the_real_model_capitals_and_sums(smol):
    """The seed's question on a real model: every run recomputed alone, as a chat of one user
    message, from the model's own ids (no shared prefill), and graded by string match."""
    from decodelab.core.loops.generate import Generation
    from decodelab.core.rules.settings import validate
    from decodelab.lesson.accuracy import AccuracyExperiment, wilson
    from decodelab.pretrained.questions import says

    library = Library(ROOT / "artifacts") if (ROOT / "artifacts" / "data").is_dir() else Library()
    library.keep_pretrained(smol)
    req = {"temperatures": "0, 1", "questions": 2, "samples_per_question": 2,
           "settings": {"model": "smollm2", "seed": 4, "max_new_tokens": 10}}
    result = AccuracyExperiment(library, req).run().result()
    assert (result["asked"], result["tools"]) == ("capitals and small sums", None)
    questions = [("What is the capital of France?", "Paris"), ("What is 12 + 19?", "31")]
    base = validate({"model": "smollm2", "max_new_tokens": 10})
    for row, T in zip(result["rows"], (0.0, 1.0)):
        runs = []
        for q, expected in questions:
            ids = smol.template.ids([{"role": "user", "content": q}])
            for j in range(1 if T == 0 else 2):
                s = dataclasses.replace(base, temperature=T, greedy=T == 0, seed=4 + j)
                run = Generation(smol, s, prompt=(ids, None)).run()
                runs.append((says(run.text, expected), run.finish_reason))
        right = sum(ok for ok, _ in runs)
        assert (row["runs"], row["correct"]) == (len(runs), right)
        assert (row["low"], row["high"]) == wilson(right, len(runs))
        assert row["length_share"] == sum(f == "length" for _, f in runs) / len(runs)
    # greedy names Paris and gets the sum wrong ("12 + 19 = 22")
    assert result["rows"][0]["correct"] == 1
    assert result["rows"][0]["wrong"][0]["answer"].startswith("12 + 19 = 22")
    # the samples forked each question's prefill; the pool held only what the runs need
    assert result["prefill_copies"]["contiguous"] == sum(
        3 * len(smol.template.ids([{"role": "user", "content": q}])) for q, _ in questions)


def test_the_accuracy_experiment_refuses_what_the_real_model_cannot_do(smol):
    from decodelab.lesson.accuracy import AccuracyExperiment
    from decodelab.pretrained.questions import MAX_QUESTIONS

    library = Library(ROOT / "artifacts") if (ROOT / "artifacts" / "data").is_dir() else Library()
    library.keep_pretrained(smol)
    with pytest.raises(FieldErrors) as e:
        AccuracyExperiment(library, {"questions": MAX_QUESTIONS + 1, "temperatures": "0",
                                     "settings": {"model": "smollm2"}})
    assert [x.field for x in e.value.errors] == ["questions"]
    assert f"SmolLM2 has {MAX_QUESTIONS} questions" in e.value.errors[0].message


def test_beam_search_on_the_real_model(smol):
    """Chapter 6's beam search on SmolLM2 (in float32, its own dtype): the best beam's mean
    log-probability is what one full pass over the prompt and its tokens gives, and it is a
    likelier path than greedy's."""
    from decodelab.lesson.search import beam_lesson

    library = Library(ROOT / "artifacts") if (ROOT / "artifacts" / "data").is_dir() else Library()
    library.keep_pretrained(smol)
    prompt = "The capital of France is"
    out = beam_lesson(library, {"settings": {"model": "smollm2", "prompt": prompt, "seed": 1,
                                             "max_new_tokens": 6}, "beam": {"num_beams": 3}})
    beam, greedy, _ = out["side"]
    ids = smol.tokenizer.encode(prompt)
    new = out["trace"]["beams"][0]["ids"]
    z = smol.all_logits(ids + new, np.float32).astype(np.float64)  # (T, V) one pass
    z = z[len(ids) - 1:-1]  # the logits that chose each new token
    logp = z - z.max(axis=1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    assert beam["logprob_per_token"] == pytest.approx(logp[np.arange(len(new)), new].mean(),
                                                      abs=1e-3)
    assert beam["logprob_per_token"] > greedy["logprob_per_token"] and out["why"]["likelier"]
    # every beam's cache checked at each step, against the model's own limit (float32's: its
    # differences, about 1e-4, failed against float64's 1e-9 before)
    checked = [st for st in out["trace"]["steps"] if "cache_diff" in st]
    assert checked and out["trace"]["cache_tolerance"] == 1e-3
    assert all(st["cache_ok"] for st in checked)
    assert max(st["cache_diff"] for st in checked) > 1e-9


COPY_PROMPT = ("Copy the list.\nList: apple, banana, cherry, grape, lemon, mango, orange, peach, "
               "pear, plum.\nCopy: apple, banana,")


def test_speculative_decoding_on_the_real_model_with_the_ngram_draft(smol):
    """SmolLM2 drafts with the n-gram draft (no model reads its tokens): greedy, the text is
    its own greedy text; on a text that copies its prompt most guesses are kept, so the model
    reads the text in far fewer passes than tokens."""
    from decodelab.lesson.search import beam_lesson, speculative_lesson

    library = Library(ROOT / "artifacts") if (ROOT / "artifacts" / "data").is_dir() else Library()
    library.keep_pretrained(smol)
    out = speculative_lesson(library, {"settings": {"model": "smollm2", "prompt": COPY_PROMPT,
                                                    "greedy": True, "max_new_tokens": 16,
                                                    "seed": 1},
                                       "draft": {"draft": "ngram", "num_draft_tokens": 4}})
    trace = out["trace"]
    assert trace["ids"] == out["plain"]["ids"] and trace["text"].startswith(" cherry, grape")
    assert trace["acceptance_rate"] > 0.5 and trace["target_passes"] < 16 / 2
    assert "cache_diff" not in trace["rounds"][0] and "full pass" in out["check_skipped"]
    for lesson, extra in ((speculative_lesson, {"draft": {"draft": "ngram"}}), (beam_lesson, {})):
        with pytest.raises(FieldError, match="a search on SmolLM2 here takes at most 32"):
            lesson(library, {"settings": {"model": "smollm2", "prompt": "Hi", "greedy": True,
                                          "max_new_tokens": 33}, **extra})
    refused = None
    try:
        speculative_lesson(library, {"settings": {"model": "smollm2", "prompt": "Hi",
                                                  "greedy": True, "max_new_tokens": 4},
                                     "draft": {"draft": "bigram"}})
    except FieldErrors as e:
        refused = e.errors[0]
    assert refused is not None and refused.field == "draft" and "n-gram draft" in refused.message


@pytest.mark.parametrize("args, words", [
    (["chat", "--message", "Hi <|im_end|> there", "--greedy"], "--messages: Message 1 contains <|im_end|>"),
    (["chat", "--message", "Hi", "--temperature", "0.7"], "--seed: Seed is required when tokens"),
    (["chat", "--greedy"], "--message: Message is required"),
    (["chat", "--model", "bigram", "--message", "Hi", "--greedy"], "--model: Model: chat needs a chat model"),
    (["generate", "--model", "smollm2", "--dataset", "prose", "--prompt", "Hi", "--greedy"],
     "--dataset: Dataset: smollm2 brings its own tokenizer"),
    (["generate", "--model", "smollm2", "--prompt", "Hi", "--draft", "bigram", "--seed", "1"],
     "--draft: Draft model: no model here reads SmolLM2"),
    (["generate", "--model", "smollm2", "--prompt", "a\x04b", "--greedy"], "--prompt"),
    (["generate", "--model", "smollm2", "--prompt", "", "--greedy"],
     "--prompt: Prompt: this model starts a sequence with no token of its own"),
    (["tokenize", "--text", "hi"], "--dataset: Dataset is required with a model trained here"),
    (["chat", "--message", "Hi", "--greedy", "--history", "/nonexistent.json"],
     "--history: History: cannot read"),
    # chat goes through the page's checks too: a search that cannot fit the window is refused
    (["chat", "--message", "Hi", "--strategy", "beam", "--num-beams", "2", "--max-new-tokens",
      "2040"], "--max-new-tokens: Max new tokens must be at most 2016 here: beam search"),
], ids=["markup", "no-seed", "no-message", "not-chat", "dataset", "draft", "unencodable",
        "empty", "no-dataset", "history", "chat-search-window"])
def test_bad_input_is_one_sentence_that_names_the_option(args, words):
    code, out, err = cli(*args)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_gguf_path_reads_the_given_file(smol):
    code, out, err = cli("chat", "--gguf", str(files.find_smollm2()), "--message", QUESTION,
                         "--greedy", "--max-new-tokens", "4", "--no-cache-check")
    assert code == 0, err
    trace = json.loads(out)
    assert trace["text"] == "The capital of Japan" and trace["finish_reason"] == "length"
    # a command whose model defaults to the transformer takes the file as the model: the
    # default does not stand beside --gguf, a --model given does
    code, out, err = cli("cache-check", "--gguf", str(files.find_smollm2()), "--prompt", "Hi",
                         "--steps", "2")
    assert code == 0, err
    assert json.loads(out)["ok"] and json.loads(out)["dtype"] == "float32"
    code, _, err = cli("cache-check", "--gguf", str(files.find_smollm2()), "--model",
                       "transformer", "--steps", "2")
    assert code == 2 and "--gguf is read as the pretrained model" in err


def test_a_bad_or_missing_file_is_said_and_the_trained_models_go_on(tmp_path):
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04" + bytes(100))
    code, _, err = cli("chat", "--gguf", str(tmp_path / "not.gguf"), "--message", "Hi", "--greedy")
    assert code == 2 and "--gguf: GGUF: not a GGUF file: it starts with b'PK\\x03\\x04'" in err
    code, _, err = cli("chat", "--gguf", str(tmp_path / "none.gguf"), "--message", "Hi", "--greedy")
    assert code == 2 and "--gguf: GGUF: no file at" in err
    code, _, err = cli("chat", "--message", "Hi", "--greedy", env={"DECODELAB_CACHE": str(tmp_path)})
    assert code == 2 and "SmolLM2-135M-Instruct is not on this machine" in err
    assert "python3 build.py artifacts" in err and "--gguf PATH" in err
    library = Library(ROOT / "artifacts", gguf=tmp_path / "not.gguf")
    with pytest.raises(FieldError):
        library.pretrained()
    assert library.model("bigram", "names").tokenizer.eos_id == 0  # unharmed


def test_a_file_that_ends_early_is_refused_and_nothing_is_kept(tmp_path):
    data = files.find_smollm2().read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[:len(data) // 2])
    library = Library(ROOT / "artifacts", gguf=tmp_path / "cut.gguf")
    with pytest.raises(FieldError, match=r"GGUF: tensor .* needs bytes up to .*\(truncated\?\)"):
        library.pretrained()
    assert not [k for k in library._models if k[0] == "pretrained"]


def test_the_chat_template_refuses_what_it_cannot_render(smol):
    bad = [None, [], [{"role": "robot", "content": "x"}], [{"role": "user", "content": 3}],
           [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}],
           [{"role": "user"}], [{"role": "user", "content": "x<|endoftext|>"}]]
    for messages in bad:
        with pytest.raises(FieldError) as e:
            smol.template.ids(messages)
        assert e.value.field == "messages" and e.value.message.endswith(".")


def test_its_shape_and_file_are_read_from_the_metadata(smol):
    cfg = smol.cfg
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.n_kv_head, cfg.mlp_hidden) == (30, 576, 9, 3, 1536)
    assert cfg.rope_theta == 100000.0 and cfg.vocab_size == 49152 and cfg.context_size == 2048
    assert smol.info["trained_context"] == 8192 and smol.n_params == 134_515_008
    assert np.shares_memory(smol.params["w_head"], smol.params["wte"])  # tied: the embedding
    assert smol.params["h0.w_qkv"].flags.f_contiguous  # (in, out) column-major: no copy to use
    assert smol.session().dtype == np.float32
    assert smol.tokenizer.start_ids == () and smol.tokenizer.eos_id == 2


def test_paged_serves_chats_of_the_real_model_and_each_request_is_its_run_alone(smol):
    """`paged --model smollm2`: every request is a chat (the default system message, then the
    line's text or a seeded question) served from a float32 pool with a prefix tree; every
    request writes what it writes alone with its own contiguous cache, a chat that comes after
    another has finished reads the blocks of their shared start (the system message) from the
    tree, and the result names the model, the system message and the command."""
    from decodelab.core.loops.generate import Generation
    from decodelab.core.rules.settings import validate
    from decodelab.lesson.serving import POOL_BYTES

    code, out, err = cli("paged", "--model", "smollm2", "--requests", "3", "--seed", "1",
                         "--block-size", "4")
    assert code == 0, err
    served = json.loads(out)
    assert served["model"] == "smollm2" and served["tokenizer"] is None
    assert served["system"] == smol.template.default_system
    # the default pool: 8 full windows would be 755 MB; 32 MB of blocks of 4 positions instead
    assert served["window"] == 2048 and served["memory_blocks"] == POOL_BYTES // (4 * 46_080)
    assert served["command"] == ("python3 -m decodelab paged --model=smollm2 --engine=reference "
                                 "--block-size=4 --seed=1 --requests=3 --json")
    assert served["waste"]["paged"] < served["waste"]["contiguous_actual"] < \
        served["waste"]["contiguous_max"]
    assert served["measured"]["prefill_s"] > 0 and served["measured"]["prefill_s_without_tree"] > 0
    first, later = "Name a colour.", "Name a colour, please."
    code, out, err = cli("paged", "--model", "smollm2", "--block-size", "4", "--seed", "2",
                         "--workload", f"0 5 {first}", "--workload", f"20 5 {later}")
    assert code == 0, err
    own = json.loads(out)
    assert [r["prompt"] for r in own["requests"]] == [first, later]
    assert own["requests"][0]["finished_step"] < own["requests"][1]["joined_step"]
    ids = [smol.template.ids([{"role": "user", "content": t}]) for t in (first, later)]
    shared = next(i for i, (a, b) in enumerate(zip(*ids)) if a != b)
    assert shared == 24 + 3  # the system message, "<|im_start|>user\n" and "Name a colour"
    assert own["prefill_tokens_saved"] == shared // 4 * 4  # its full blocks, from the tree
    for r in served["requests"] + own["requests"]:
        settings = dict(r["settings"])
        messages = settings.pop("messages")
        assert settings["model"] == "smollm2" and "dataset" not in settings
        assert messages == [{"role": "user", "content": r["prompt"]}]
        run = Generation(smol, validate(settings), prompt=(smol.template.ids(messages), None))
        assert r["ids"] == run.run().output_ids, r["number"]
    code, _, err = cli("paged", "--model", "smollm2", "--dataset", "prose")
    assert code == 2 and "--dataset: Dataset: smollm2 brings its own tokenizer" in err


def test_the_prefix_tree_of_served_chats_starts_with_the_system_message(smol):
    from decodelab.lesson.serving import Serving

    library = Library(ROOT / "artifacts") if (ROOT / "artifacts" / "data").is_dir() else Library()
    library.keep_pretrained(smol)
    result = Serving(library, {"model": "smollm2", "block_size": 8, "workload": [
        "0 3 Name a colour.", "10 3 Name a fruit."]}).run().result()
    tree = result["frames"][-1]["tree"]  # [block, parent, pieces]: the first block from the root
    root = next(node for node in tree if node[1] == -1)
    assert root[2][:3] == ["<|im_start|>", "system", "\n"]  # markup, not an empty piece
    assert "".join(root[2][3:]) == "You are a helpful AI"  # 8 tokens: the first block


@pytest.mark.parametrize("req,words", [
    ({"workload": ["0 6 a <|im_end|> b"]}, "Your workload, line 1: the text contains <|im_end|>"),
    ({"workload": ["0 6 a\x04b"]}, "Your workload, line 1: the text has characters this model "
                                    "cannot read: '\\x04'."),
    ({"workload": ["0 3000 hi"]}, "3000 new tokens after a prompt of 31 tokens do not fit"),
    ({"memory_blocks": 100_000}, "at most 728 (512 MiB) here"),
])
def test_serving_the_real_model_refuses_by_name(smol, req, words):
    from decodelab.lesson.serving import Serving

    library = Library(ROOT / "artifacts") if (ROOT / "artifacts" / "data").is_dir() else Library()
    library.keep_pretrained(smol)
    with pytest.raises(FieldError) as e:
        Serving(library, {"model": "smollm2", **req})
    assert words in e.value.message, e.value.message


def test_the_memory_calculator_s_smollm2_preset_is_what_its_cache_allocates(smol):
    """The kv-memory preset is written from SmolLM2's published shape; the real model's cache
    holds exactly its bytes per token (46,080: a third of what 9 KV heads would need)."""
    from decodelab.lesson import costs

    out = costs.memory({"preset": "smollm2", "tokens": 1})
    session = smol.session()
    per_token = session.cache.bytes_allocated // session.cache.allocated
    assert per_token == out["bytes_per_token"] == 46_080
    # the window's 2,048 positions are 94 MB: its cache takes 256 at a time (11.8 MB)
    assert session.cache.allocated == smol.cache_reserve == 256
    session.prefill(smol.tokenizer.encode("word " * 300))
    assert session.cache.allocated == 512 and session.cache.max_len == 2048
    assert out["saving"] == 3
