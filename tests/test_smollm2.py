"""SmolLM2-135M-Instruct in decodelab held to transformers loading the same GGUF file: the
tokenizer, the chat template, the logits full and cached, the caches themselves, a padded batch,
greedy generation, beam search, the sampling rules teacher-forced, and the break-it bugs.

Two precisions, two kinds of claim. In float64 (transformers' two float32 steps widened, the
`float64_steps` fixture) decodelab and transformers compute the same maths and differ by rounding
alone (under 1e-9 on logits of size ~40). In float32, as both run the model for real, 30 layers
of sums in different orders separate them by about 1e-4 (measured: 1.2e-4 on a chat prompt,
relative to logits of 37 that is 3e-6): the float32 bound here is 4e-4.
"""

import copy
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import torch
import transformers
from decodelab.core.loops.beam import BeamRules, beam_search
from decodelab.core.loops.generate import Generation
from decodelab.core.models.batchsession import BatchSession
from decodelab.core.rules.settings import validate
from decodelab.errors import UnknownCharacters
from decodelab.pretrained import files, model as pretrained
from tests.conftest import ROOT

pytestmark = pytest.mark.reference  # held to PyTorch and transformers: the reference tier

TOL64 = 1e-9  # float64 both sides: rounding alone
TOL32 = 4e-4  # float32 both sides, as each runs the model (measured about 1.2e-4)
CHAT = [{"role": "user", "content": "What is the capital of Japan?"}]


@pytest.fixture(scope="module")
def path():
    try:
        return files.find_smollm2()
    except FileNotFoundError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def smol(path):
    return pretrained.load(path)


@pytest.fixture(scope="module")
def hf_tok(path):
    from tokenizers import pre_tokenizers

    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    # transformers builds the GGUF's tokenizer without SmolLM2's digit step (FACTS: it differs
    # on "½", "²", "Ⅻ"); SmolLM2's tokenizer.json has it, and so does llama.cpp's "smollm"
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return tok


@pytest.fixture(scope="module")
def tm32(path):
    return transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def tm64(tm32):
    return copy.deepcopy(tm32).to(torch.float64)


def logits_of(tm, ids):
    with torch.no_grad():
        return tm(torch.tensor([ids])).logits[0].numpy()  # (T, V)


def random_texts(n, seed=0):
    rng = random.Random(seed)
    edge = [9, 10, 13, 32, 0x85, 0xa0, 0x1c, 0x1f, 0x2028, 0x3000, 0xbd, 0xb2, 0x216b, 0x0663]
    out = ["The capital of Japan is Tokyo.", "½ ² Ⅻ 12345 x  \n\n  y\t\u3000z",
           "I'll've don't 'S 'RE", "héllo wörld 日本語 🎉👍🏽", "  leading and trailing  "]
    for _ in range(n):
        k = rng.randint(0, 24)
        out.append("".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0, 0x2FFF),
                                           rng.randint(0, 0x3FFFF), rng.randint(0xE0000, 0x10FFFF),
                                           rng.choice(edge)]))
                           for _ in range(k)))  # (planes 4-13, unassigned, have no tokens)
    return [t for t in out if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]


def test_the_tokenizer_equals_smollm2_s_on_random_unicode(smol, hf_tok):
    tok, checked = smol.tokenizer, 0
    for text in random_texts(3000):
        if tok.unencodable(text):
            continue
        ids = tok.encode(text)
        assert ids == hf_tok.encode(text, add_special_tokens=False, split_special_tokens=True), text
        assert tok.decode(ids) == text  # exact round trip
        checked += 1
    assert checked > 2000


def test_bytes_without_a_token_are_refused_by_name_where_transformers_drops_them(smol, hf_tok):
    tok = smol.tokenizer
    assert len(tok.missing_bytes) == 21  # SmolLM2's vocabulary lacks 21 of the 256 bytes
    with pytest.raises(UnknownCharacters) as e:
        tok.encode("a\x04b\x06")
    assert e.value.chars == ["\x04", "\x06"]
    assert hf_tok.decode(hf_tok.encode("a\x04b", add_special_tokens=False)) == "ab"


def test_markup_typed_as_text_stays_text(smol, hf_tok):
    ids = smol.tokenizer.encode("<|im_end|>")
    assert ids == hf_tok.encode("<|im_end|>", add_special_tokens=False, split_special_tokens=True)
    assert 2 not in ids and len(ids) > 1


@pytest.mark.parametrize("messages", [
    CHAT,
    [{"role": "system", "content": "You answer in one word."}] + CHAT,
    [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello. How can I help?"},
     {"role": "user", "content": "Name three colours.\n2 + 2 = ?"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "  spaces  "}],
], ids=["default-system", "own-system", "turns", "empty-system"])
def test_the_chat_template_renders_as_transformers_does(smol, hf_tok, messages):
    text = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert smol.template.render(messages) == text
    theirs = hf_tok.apply_chat_template(messages, add_generation_prompt=True)
    theirs = theirs["input_ids"] if hasattr(theirs, "keys") else theirs
    assert smol.template.ids(messages) == list(theirs)
    assert "You are a helpful AI assistant named SmolLM" in text or messages[0]["role"] == "system"


def test_full_logits_in_float64_are_the_same_maths(smol, tm64, float64_steps):
    ids = smol.template.ids(CHAT)
    theirs = logits_of(tm64, ids)  # (T, V)
    d64 = np.abs(smol.all_logits(ids, np.float64) - theirs).max()
    print(f"full logits, float64: {d64:.2e}")
    assert d64 < TOL64
    # the live check's pass (blocks kept for nothing, the head on the last position alone)
    assert np.abs(smol.full_logits(ids, np.float64) - theirs[-1]).max() < TOL64


def test_full_logits_in_float32_as_both_run_them(smol, tm32):
    ids = smol.template.ids(CHAT)
    theirs = logits_of(tm32, ids)  # (T, V)
    d32 = np.abs(smol.all_logits(ids, np.float32) - theirs).max()
    print(f"full logits, float32: {d32:.2e}")
    assert d32 < TOL32
    assert np.abs(smol.full_logits(ids, np.float32) - theirs[-1]).max() < TOL32


def test_cached_steps_and_caches_equal_transformers_cache(smol, tm32):
    """decodelab's float32 session against transformers' own cache, step by step: the logits
    of every step, and every layer's keys (rotated) and values."""
    ids = smol.template.ids(CHAT)
    session = smol.session()  # float32
    logits = session.prefill(ids)
    with torch.no_grad():
        out = tm32(torch.tensor([ids]), use_cache=True)
    past, worst = out.cache, {"logits": 0.0, "keys": 0.0, "values": 0.0}
    for step in range(12):
        theirs = out.logits[0, -1].numpy()
        worst["logits"] = max(worst["logits"], float(np.abs(logits - theirs).max()))
        S = session.length
        for layer in range(smol.cfg.n_layer):
            k = past.layers[layer].keys[0].numpy()  # (Hkv, S, D)
            v = past.layers[layer].values[0].numpy()
            assert k.shape[1] == S
            worst["keys"] = max(worst["keys"], float(np.abs(session.cache.k[layer][0, :, :S] - k).max()))
            worst["values"] = max(worst["values"], float(np.abs(session.cache.v[layer][0, :, :S] - v).max()))
        token = int(np.argmax(theirs))
        logits = session.decode(token)
        with torch.no_grad():
            out = tm32(torch.tensor([[token]]), cache=past, use_cache=True)
        past = out.cache
    print("cached steps, largest differences:", worst)
    assert max(worst.values()) < TOL32


def test_a_left_padded_batch_equals_transformers_with_its_mask(smol, tm64, float64_steps):
    tok = smol.tokenizer
    prompts = [tok.encode(t) for t in ("Hi", "The capital of France is", "Once upon a")]
    batch = BatchSession(smol, len(prompts), np.float64)
    ours = [batch.prefill(prompts)]
    width = max(map(len, prompts))
    pad = tok.eos_id
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in prompts])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in prompts])
    theirs = []
    with torch.no_grad():
        for step in range(4):
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            theirs.append(tm64(ids, attention_mask=mask, position_ids=pos).logits[:, -1].numpy())
            nxt = torch.tensor(theirs[-1].argmax(-1))[:, None]
            ids, mask = torch.cat([ids, nxt], 1), torch.cat([mask, torch.ones_like(nxt)], 1)
            if step < 3:
                ours.append(batch.decode(nxt[:, 0].numpy()))
    assert np.abs(np.array(ours) - np.array(theirs)).max() < TOL64


@pytest.mark.parametrize("message", ["What is the capital of Japan?", "Write a haiku about rain."])
def test_greedy_answers_equal_transformers_generate(smol, tm32, message):
    messages = [{"role": "user", "content": message}]
    ids = smol.template.ids(messages)
    settings = validate({"model": "smollm2", "greedy": True, "max_new_tokens": 30,
                         "cache_check": False})
    run = Generation(smol, settings, prompt=(ids, None)).run()
    with torch.no_grad():
        out = tm32.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=30,
                            eos_token_id=smol.tokenizer.eos_id, pad_token_id=smol.tokenizer.eos_id)
    theirs = out[0, len(ids):].tolist()
    assert run.output_ids == theirs, (run.text, smol.tokenizer.decode(theirs))
    assert run.finish_reason == ("stop" if theirs[-1] == smol.tokenizer.eos_id else "length")


def test_beam_search_equals_transformers_beams(smol, tm64, float64_steps):
    ids = smol.tokenizer.encode("The capital of France is")
    rules = BeamRules(num_beams=3, max_new_tokens=6, num_return_sequences=3)
    ours = beam_search(smol, ids, rules)
    with torch.no_grad():
        out = tm64.generate(torch.tensor([ids]), do_sample=False, num_beams=3, max_new_tokens=6,
                            num_return_sequences=3, length_penalty=1.0, early_stopping=False,
                            eos_token_id=smol.tokenizer.eos_id, pad_token_id=smol.tokenizer.eos_id,
                            return_dict_in_generate=True, output_scores=True)
    theirs = out.sequences[:, len(ids):].tolist()
    assert [b["ids"] for b in ours["beams"]] == theirs
    for b, score in zip(ours["beams"], out.sequences_scores.tolist()):
        # generate casts each step's logits to float32 before its log-softmax: over 49,152
        # tokens and logits of ~40 that costs it about 4e-6 a step
        assert b["score"] == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("rules", [{"temperature": 0.7, "top_k": 50, "top_p": 0.9},
                                   {"temperature": 1.3, "min_p": 0.05, "repetition_penalty": 1.3}],
                         ids=lambda r: ",".join(r))
def test_sampling_rules_teacher_forced_equal_transformers_processors(smol, tm64, rules,
                                                                     float64_steps):
    """A sampled chat answer's steps, fed to transformers: its float64 logits through its
    processors give decodelab's final probabilities over all 49,152 tokens at every step.
    SmolLM2 has no start token, so transformers' penalty sees exactly decodelab's ids."""
    from tests.test_hf import hf_processors

    ids = smol.template.ids(CHAT)
    settings = validate({"model": "smollm2", "seed": 5, "max_new_tokens": 12,
                         "cache_check": False, **rules})
    run = Generation(smol, settings, prompt=(ids, None)).run()
    processors = hf_processors(rules)
    ids = list(ids)
    for step in run.trace()["steps"]:
        logits = logits_of(tm64, ids)[-1]
        scores = processors(torch.tensor([ids]), torch.tensor(logits[None]))
        theirs = torch.softmax(scores, -1)[0].numpy()
        ours = run.decide(step["step"], smol.full_logits(ids, np.float64)).p_final
        assert np.abs(ours - theirs).max() < 1e-8, step["step"]
        ids.append(step["token_id"])


@pytest.mark.parametrize("bug", ["frozen-position", "token-twice", "no-causal-mask"])
def test_each_cache_bug_fails_against_transformers(smol, tm64, bug, float64_steps):
    from decodelab.core.models.checks import cache_check
    from decodelab.lesson import bugs

    seen = []

    class Recorded(bugs.SESSIONS[bug]):
        def check_steps(self):  # (cache_check's check of a step)
            ours = yield from super().check_steps()
            seen.append((ours, float(np.abs(self.logits - logits_of(tm64, self.tokens)[-1]).max())))
            return ours

    prompt = smol.tokenizer.encode("The cache of a real model")
    result = cache_check(smol, prompt, 4, 3, session=Recorded(smol, np.float64))
    assert not result["ok"]
    for ours, theirs in seen:
        assert abs(ours - theirs) < 1e-6
    assert max(theirs for _, theirs in seen) > 1e-2  # transformers sees the damage too


def test_export_hf_writes_a_folder_transformers_loads_as_smollm2(smol, tm32, tmp_path):
    """`export-hf --model smollm2`: the dequantized float32 folder, read by transformers' own
    Llama and fast tokenizer with no GGUF and no remote code, is SmolLM2 as transformers reads
    it from the GGUF: every weight equal, the tokenizer's ids, the chat template's, and greedy
    generation under the exported generation config."""
    out = tmp_path / "smollm2"
    proc = subprocess.run([sys.executable, "-m", "decodelab", "export-hf", "--model", "smollm2",
                           "--out", str(out), "--greedy", "--max-new-tokens", "12"],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said["params"] == smol.n_params and said["config"]["tie_word_embeddings"] is True
    assert (said["config"]["bos_token_id"], said["config"]["eos_token_id"]) == (1, 2)
    assert said["config"]["max_position_embeddings"] == 8192  # the trained window, not ours

    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    want = tm32.state_dict()
    got = theirs.state_dict()
    assert set(got) == set(want)
    for name, tensor in want.items():  # the same dequantized numbers, in the same layout
        assert torch.equal(got[name], tensor), name

    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    for text in random_texts(300, seed=1):
        if not smol.tokenizer.unencodable(text):
            ids = smol.tokenizer.encode(text)
            assert tok.encode(text, add_special_tokens=False, split_special_tokens=True) == ids
            assert tok.decode(ids) == text
    ids = smol.template.ids(CHAT)
    rendered = tok.apply_chat_template(CHAT, add_generation_prompt=True)
    assert list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered) == ids

    run = Generation(smol, validate({"model": "smollm2", "greedy": True, "max_new_tokens": 12,
                                     "cache_check": False}), prompt=(ids, None)).run()
    with torch.no_grad():  # its generation_config.json: greedy, 12 new tokens, <|im_end|> ends
        made = theirs.generate(torch.tensor([ids]))[0, len(ids):].tolist()
    assert made == run.output_ids, (smol.tokenizer.decode(made), run.text)
