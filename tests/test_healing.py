"""Token healing and the prefill's rows, on the models trained on BPE tokens of the prose:
each held to a recomputation that does not share the code under test."""

import numpy as np
import pytest
from decodelab.core.rules import healing
from decodelab.core.loops.generate import start
from decodelab.core.library import Library
from decodelab.core.loops.replay import Replay
from decodelab.errors import FieldError, FieldErrors
from decodelab.lesson import prefill
from decodelab.lesson.pipeline import explain_step

from tests.conftest import api


@pytest.fixture(scope="module")
def lib(artifacts):
    assert api("setup", {"assets": str(artifacts)}, session="healing")["ok"]
    return Library(artifacts)


@pytest.fixture(scope="module")
def bpe(lib):
    return lib.tokenizer("bpe", "prose")


def test_the_mask_allows_exactly_the_tokens_that_start_with_the_removed_one(bpe):
    ids = bpe.encode("The man ")
    plan = healing.plan(bpe, ids)
    assert plan.removed == ids[-1] and plan.prompt_ids == ids[:-1]
    assert bpe.token_bytes(plan.removed) == b" "
    brute = [i for i in range(bpe.vocab_size) if bpe.decode_bytes([i]).startswith(b" ")]
    assert np.flatnonzero(plan.allowed).tolist() == brute
    assert plan.allowed[plan.removed] and not plan.allowed[0]  # itself yes, EOS no


def test_healing_an_empty_prompt_is_a_field_error(lib):
    with pytest.raises(FieldErrors) as e:
        start(lib, {"dataset": "prose", "tokenizer": "bpe", "model": "bigram",
                    "token_healing": True, "prompt": ""})
    [error] = e.value.errors
    assert error.field == "token_healing" and "empty prompt" in error.message


@pytest.mark.parametrize("model", ["bigram", "transformer"])
def test_a_healed_run_redoes_the_trailing_space_and_shows_only_what_follows(lib, bpe, model):
    settings = {"dataset": "prose", "tokenizer": "bpe", "model": model, "prompt": "The man ",
                "greedy": True, "max_new_tokens": 6, "cache_check": False}
    plain = start(lib, settings).run()
    healed = start(lib, dict(settings, token_healing=True)).run()
    first = healed.records[0]
    assert bytes.fromhex(first["token_bytes"]).startswith(b" ")
    # the prompt, then the text: exactly the bytes of prompt-minus-one-token + every token
    everything = bpe.decode_bytes(healed.prompt_ids + healed.output_ids).decode("utf-8")
    assert "The man " + healed.text == everything[: len("The man ") + len(healed.text)]
    assert healed.trace()["healed"] == " " and plain.trace()["healed"] is None
    # without healing, the model's own first choice after a lone space is no word with a space
    assert not bytes.fromhex(plain.records[0]["token_bytes"]).startswith(b" ")
    # the masked step: nothing outside the mask can be drawn, and the view says how many left
    d = Replay(healed).decision(0)
    assert not d.p_final[~d.allowed].any()
    view = explain_step(healed, Replay(healed), 0)
    assert view["mask"]["removed_count"] == int((~d.allowed).sum())
    assert view["mask"]["why"] == "does not start with ' '"
    assert view["matches_record"]


def test_the_preview_of_a_healed_prompt_is_the_run_first_step(lib):
    settings = {"dataset": "prose", "tokenizer": "bpe", "model": "transformer",
                "prompt": "The man ", "token_healing": True, "seed": 4, "cache_check": False}
    run = api("start", settings, session="healing")
    assert run["ok"] and run["healed"] == " "
    assert "".join(run["prompt_tokens"]) + run["healed"] == "The man "
    while not api("advance", {"budget_ms": 500}, session="healing")["done"]:
        pass
    step0 = api("trace", session="healing")["trace"]["steps"][0]
    ahead = api("preview", {"settings": settings}, session="healing")
    assert ahead["ok"] and ahead["mask"]["kept_count"] < 1024
    top = {r["token_id"]: p for r, p in zip(ahead["rows"], ahead["pipelines"][
        "temperature-first"]["final"]["p"])}
    # the run's first step listed its likeliest candidates: the preview gives each the same
    # final probability (the drawn token itself may lie outside the preview's top rows)
    shared = [c for c in step0["top"] if c["token_id"] in top]
    assert len(shared) >= 5
    for c in shared:
        assert top[c["token_id"]] == pytest.approx(c["p_final"], abs=1e-12)


@pytest.mark.parametrize("tokenizer", ["chars", "bpe"])
def test_the_prefill_rows_are_the_logits_of_each_prefix(lib, tokenizer):
    model = lib.model("transformer", "prose", tokenizer)
    ids = model.tokenizer.encode("The old man said")
    out = prefill.rows(model, ids)
    T = len(ids) + 1
    assert out["shape"] == [1, T, model.tokenizer.vocab_size] and out["known"] == T - 1
    tokens = [0] + ids
    for row in out["rows"]:
        t = row["position"]
        alone = model.full_logits(tokens[: t + 1])  # a causal model: row t sees tokens[:t+1]
        p = np.exp(alone - alone.max())
        p /= p.sum()
        assert row["top"] == model.tokenizer.label(int(np.argmax(alone)))
        assert row["top_p"] == pytest.approx(float(p.max()), rel=1e-4)
        if t + 1 < T:
            assert row["next_p"] == pytest.approx(float(p[tokens[t + 1]]), rel=1e-4)
            assert row["next_rank"] == int((p > p[tokens[t + 1]]).sum()) + 1
    # the last row is the one generation chooses from: the cached prefill gives the same logits
    cached = model.session().prefill(ids)
    assert np.allclose(model.all_logits(tokens)[-1], cached, atol=1e-4)


def test_the_prefill_of_a_bigram_is_its_table(lib):
    model = lib.model("bigram", "prose", "bpe")
    ids = model.tokenizer.encode("The man")
    out = prefill.rows(model, ids)
    tokens = [0] + ids
    for row in out["rows"]:
        table = model.log_probs[tokens[row["position"]]]
        assert row["top_p"] == pytest.approx(float(np.exp(table.max())))


def test_a_tokenizer_without_models_names_what_exists(lib):
    with pytest.raises(FieldError) as e:
        lib.model("bigram", "names", "bpe")
    assert e.value.field == "tokenizer" and "from the prose and the tasks data only" in e.value.message
    reply = api("start", {"dataset": "names", "tokenizer": "bpe"}, session="healing")
    assert not reply["ok"] and reply["errors"][0]["field"] == "tokenizer"
    reply = api("start", {"dataset": "prose", "tokenizer": "words"}, session="healing")
    assert not reply["ok"] and "chars" in reply["errors"][0]["message"]
