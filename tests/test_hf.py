"""decodelab's transformers held to Hugging Face transformers itself: an export loads as
LlamaForCausalLM with no code of ours and gives the same logits, the same cache, the same padded
batch and the same greedy text; the tokenizers encode as decodelab does; a checkpoint saved by
transformers reads back into decodelab.

Two steps of transformers' Llama run in float32 even in a float64 model: its RMSNorm (an
upcast meant for half precision) and its rotation tables (cos and sin computed in float32).
decodelab's float64 session keeps the norm in float64 and widens tables computed the same way in
float32, whose last bits differ from torch's. Measured over 5 full windows per shipped model:
transformers as it is and decodelab differ by up to 9.2e-6 on logits of size 10-18 (prose), 1.4e-6
(names); with transformers' norm in float64 by up to 1.3e-6; with its norm in float64 and
decodelab's rotation tables (`float64_steps`), by under 1e-9: the same maths, only transformers'
float32 steps between them.
"""

import json
import random
from pathlib import Path

import numpy as np
import pytest

import safetensors.numpy as safetensors_numpy  # the test dependencies (build.py test installs them)
import torch
import transformers
from decodelab.core.interop import hf, safetensors
from decodelab.core.models import layers
from decodelab.core.loops.generate import start
from decodelab.core.interop.hftokenizer import tokenizer_files
from decodelab.core.models.batchsession import BatchSession
from decodelab.core.library import Library
from decodelab.core.tokens.tokenizer import EOS, CharTokenizer
from decodelab.core.models.transformer import TransformerModel
from decodelab.errors import FieldError

pytestmark = pytest.mark.reference  # held to PyTorch and transformers: the reference tier

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = [("names", "chars"), ("prose", "chars"), ("prose", "bpe"), ("tasks", "bpe")]
TOL_AS_SHIPPED = 3e-5  # transformers as it is (float32 norm and tables) against decodelab's float64
TOL = 1e-9  # transformers with its norm in float64 and decodelab's tables: rounding alone


def shipped(dataset, tokenizer):
    path = ROOT / "artifacts" / "models" / f"transformer-{dataset}{'-bpe' * (tokenizer == 'bpe')}.npz"
    if not path.exists():
        pytest.skip(f"{path.name} not built yet (python3 build.py artifacts)")
    return Library(ROOT / "artifacts").model("transformer", dataset, tokenizer)


def random_model(seed=0, **shape):
    tok = CharTokenizer("abcdefghijklmnopqrstuvwxyz ")
    cfg = layers.Config(vocab_size=tok.vocab_size, **{"context_size": 32, "n_layer": 2,
                                                      "n_embd": 32, "n_head": 4, "n_kv_head": 2,
                                                      **shape})
    rng = np.random.default_rng(seed)
    params = {k: v + (rng.standard_normal(v.shape) * 0.1).astype(np.float32)
              for k, v in layers.init_params(cfg, seed).items()}
    return TransformerModel(cfg, params, tok)


def load_hf(model, folder):
    hf.export(model, folder, extra_files=tokenizer_files(model.tokenizer))
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()


def hf_logits(tm, ids):
    with torch.no_grad():
        return tm(torch.tensor([ids])).logits[0].numpy()  # (T, V)


def random_ids(model, rng, n):
    return [EOS] + rng.integers(1, model.cfg.vocab_size, n - 1).tolist()


def test_safetensors_files_agree_with_the_safetensors_library(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {"a.weight": rng.standard_normal((3, 5)).astype(np.float32),
               "b": rng.standard_normal(7), "c": np.arange(6, dtype=np.int64).reshape(2, 3)}
    (tmp_path / "ours.safetensors").write_bytes(safetensors.to_bytes(tensors, {"format": "pt"}))
    theirs = safetensors_numpy.load_file(str(tmp_path / "ours.safetensors"))
    assert sorted(theirs) == sorted(tensors)
    for k in tensors:
        assert theirs[k].dtype == tensors[k].dtype and np.array_equal(theirs[k], tensors[k])
    safetensors_numpy.save_file(tensors, str(tmp_path / "theirs.safetensors"))
    back, _ = safetensors.from_bytes((tmp_path / "theirs.safetensors").read_bytes())
    for k in tensors:
        assert np.array_equal(back[k], tensors[k])
    data = (tmp_path / "ours.safetensors").read_bytes()
    for broken in (data[:5], data[:8] + b"[" + data[9:], data[:-4]):
        with pytest.raises(FieldError):
            safetensors.from_bytes(broken)


@pytest.mark.parametrize("shape", [{}, {"n_kv_head": 4}, {"n_kv_head": 1, "n_layer": 1}],
                         ids=["gqa", "mha", "mqa"])
def test_random_model_logits_and_cache_equal_transformers(tmp_path, shape, float64_steps):
    model = random_model(1, **shape)
    tm = load_hf(model, tmp_path / "m")
    rng = np.random.default_rng(2)
    ids = random_ids(model, rng, 30)
    want = hf_logits(tm, ids)
    assert np.abs(model.all_logits(ids, np.float64) - want).max() < TOL
    session = model.session(np.float64)
    got = [session.prefill(ids[1:6])]
    got += [session.decode(t) for t in ids[6:]]
    assert np.abs(np.array(got) - want[5:]).max() < TOL


@pytest.mark.parametrize("dataset,tokenizer", SHIPPED)
def test_shipped_models_full_windows_to_rounding(tmp_path, dataset, tokenizer, float64_steps):
    model = shipped(dataset, tokenizer)
    tm = load_hf(model, tmp_path / "m")
    rng = np.random.default_rng(7)
    for trial in range(3):
        ids = random_ids(model, rng, model.context_size)
        assert np.abs(model.all_logits(ids, np.float64) - hf_logits(tm, ids)).max() < TOL


@pytest.mark.parametrize("dataset,tokenizer", SHIPPED)
def test_shipped_models_step_by_step_with_transformers_cache(tmp_path, dataset, tokenizer):
    """transformers as it is (its norm in float32): full forward, decodelab's cached decode and
    transformers' own cache, step by step, on random sequences."""
    model = shipped(dataset, tokenizer)
    tm = load_hf(model, tmp_path / "m")
    rng = np.random.default_rng(3)
    for trial in range(2):
        n = int(rng.integers(8, model.context_size))
        ids = random_ids(model, rng, n)
        want = hf_logits(tm, ids)
        assert np.abs(model.all_logits(ids, np.float64) - want).max() < TOL_AS_SHIPPED
        session = model.session(np.float64)
        logits = session.prefill(ids[1:4])
        with torch.no_grad():
            out = tm(torch.tensor([ids[:4]]), use_cache=True)
        past = out.cache  # transformers' own cache (`past_key_values` before 5.x)
        for t in range(4, n):
            theirs = out.logits[0, -1].numpy()
            assert np.abs(logits - theirs).max() < TOL_AS_SHIPPED
            for layer in range(model.cfg.n_layer):
                k = past.layers[layer].keys[0].numpy()  # (Hkv, S, D), rotated
                v = past.layers[layer].values[0].numpy()
                S = session.length
                assert k.shape[1] == S
                assert np.abs(session.cache.k[layer][0, :, :S] - k).max() < TOL_AS_SHIPPED
                assert np.abs(session.cache.v[layer][0, :, :S] - v).max() < TOL_AS_SHIPPED
            logits = session.decode(ids[t])
            with torch.no_grad():
                out = tm(torch.tensor([[ids[t]]]), cache=past, use_cache=True)
            past = out.cache


def test_padded_batch_rows_equal_transformers(tmp_path, float64_steps):
    """Left padding with the attention mask and position ids as transformers builds them."""
    model = shipped("names", "chars")
    tm = load_hf(model, tmp_path / "m")
    rng = np.random.default_rng(4)
    prompts = [rng.integers(1, model.cfg.vocab_size, n).tolist() for n in (1, 6, 3, 9)]
    batch = BatchSession(model, len(prompts), np.float64)
    ours = [batch.prefill(prompts)]
    rows = [[EOS] + p for p in prompts]
    width = max(map(len, rows))
    ids = torch.tensor([[EOS] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    theirs = []
    with torch.no_grad():
        for step in range(6):
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            theirs.append(tm(ids, attention_mask=mask, position_ids=pos).logits[:, -1].numpy())
            nxt = torch.tensor(theirs[-1].argmax(-1))[:, None]
            ids, mask = torch.cat([ids, nxt], 1), torch.cat([mask, torch.ones_like(nxt)], 1)
            if step < 5:
                ours.append(batch.decode(nxt[:, 0].numpy()))
    assert np.abs(np.array(ours) - np.array(theirs)).max() < TOL


@pytest.mark.parametrize("dataset,tokenizer,prompt", [("names", "chars", "ma"),
                                                      ("prose", "chars", "The "),
                                                      ("prose", "bpe", "Once upon a time"),
                                                      ("tasks", "bpe", 'Card for "Mary", age 34, from "Oslo".')])
def test_greedy_generation_equals_transformers_generate(tmp_path, dataset, tokenizer, prompt):
    model = shipped(dataset, tokenizer)
    tm = load_hf(model, tmp_path / "m")
    run = start(Library(ROOT / "artifacts"), {"model": "transformer", "dataset": dataset,
                                               "tokenizer": tokenizer, "prompt": prompt,
                                               "greedy": True, "max_new_tokens": 40,
                                               "tools": "off", "cache_check": False}).run()
    ours = [s["token_id"] for s in run.trace()["steps"]]
    prompt_ids = [EOS] + list(run.prompt_ids)  # as the run read it (tasks: inside its markers)
    with torch.no_grad():
        out = tm.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=40,
                          eos_token_id=EOS, pad_token_id=EOS)
    theirs = out[0, len(prompt_ids):].tolist()
    assert ours == theirs, (run.finish_reason, ours, theirs)
    assert run.finish_reason == ("stop" if theirs[-1] == EOS else "length")


@pytest.mark.parametrize("dataset,tokenizer", SHIPPED)
def test_exported_tokenizer_encodes_as_decodelab(tmp_path, dataset, tokenizer):
    model = shipped(dataset, tokenizer)
    hf.export(model, tmp_path / "m", extra_files=tokenizer_files(model.tokenizer))
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
    rng = random.Random(5)
    if tokenizer == "chars":
        alphabet = model.tokenizer.chars
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
                 for _ in range(200)]
    else:
        pick = lambda: chr(rng.choice([rng.randrange(32, 127), rng.randrange(160, 0x3000),  # noqa
                                       rng.randrange(0x1F300, 0x1F650), rng.randrange(0, 32)]))
        texts = ["".join(pick() for _ in range(rng.randrange(1, 50))) for _ in range(300)]
        texts += ["<|call|>1+1<|result|>", "It's  2 o'clock...\n\n  x", "e\u0301\u0301 ñ 日本 🙂"]
    for text in texts:
        assert theirs(text, add_special_tokens=False)["input_ids"] == \
            model.tokenizer.encode(text), repr(text)
    if tokenizer == "bpe":
        for marker, token_id in model.tokenizer.special_ids.items():
            assert theirs.convert_ids_to_tokens(token_id) == marker
        assert theirs.decode(model.tokenizer.encode(texts[-1])) == texts[-1]


def test_a_checkpoint_saved_by_transformers_reads_back(tmp_path):
    """A randomly initialised LlamaForCausalLM, saved by transformers, in decodelab."""
    torch.manual_seed(0)
    conf = transformers.LlamaConfig(vocab_size=40, hidden_size=48, intermediate_size=80,
                                    num_hidden_layers=2, num_attention_heads=6,
                                    num_key_value_heads=2, max_position_embeddings=24)
    tm = transformers.LlamaForCausalLM(conf).to(torch.float64).eval()
    tm.to(torch.float32).save_pretrained(tmp_path / "ckpt")
    tm = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt",
                                                           dtype=torch.float64).eval()
    cfg, params = hf.read_checkpoint(tmp_path / "ckpt")
    assert (cfg.n_embd, cfg.mlp_hidden, cfg.n_kv_head, cfg.norm_eps) == (48, 80, 2, conf.rms_norm_eps)
    model = TransformerModel(cfg, params, CharTokenizer("".join(chr(65 + i) for i in range(39))))
    ids = random_ids(model, np.random.default_rng(6), 20)
    assert np.abs(model.all_logits(ids, np.float64) - hf_logits(tm, ids)).max() < TOL_AS_SHIPPED


def test_bad_exports_and_checkpoints_say_what_is_wrong(tmp_path):
    model = random_model()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    with pytest.raises(FieldError, match="exists and is not empty"):
        hf.export(model, tmp_path / "full")
    assert [p.name for p in tmp_path.iterdir()] == ["full"]  # nothing half-written beside it
    hf.export(model, tmp_path / "ok")
    conf = json.loads((tmp_path / "ok" / "config.json").read_text())
    (tmp_path / "ok" / "config.json").write_text(json.dumps({**conf, "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
    with pytest.raises(FieldError, match="GPT2LMHeadModel"):
        hf.read_checkpoint(tmp_path / "ok")
    (tmp_path / "ok" / "config.json").write_text(json.dumps({**conf, "hidden_size": 4096,
                                                             "num_hidden_layers": 32,
                                                             "intermediate_size": 11008,
                                                             "num_attention_heads": 32,
                                                             "num_key_value_heads": 32, "head_dim": 128}))
    with pytest.raises(FieldError, match="parameters"):
        hf.read_checkpoint(tmp_path / "ok")
    (tmp_path / "ok" / "config.json").write_text(json.dumps(conf))
    (tmp_path / "ok" / "model.safetensors").unlink()
    with pytest.raises(FieldError, match="no model.safetensors"):
        hf.read_checkpoint(tmp_path / "ok")
    from decodelab.core.models.bigram import BigramModel
    with pytest.raises(FieldError, match="Only a transformer"):
        hf.export(object.__new__(BigramModel), tmp_path / "bigram")


def test_cli_export_writes_a_folder_transformers_loads(tmp_path):
    import subprocess
    import sys

    shipped("prose", "bpe")
    cmd = [sys.executable, "-m", "decodelab", "export-hf", "--dataset", "prose", "--tokenizer",
           "bpe", "--temperature", "0.7", "--top-k", "20", "--max-new-tokens", "30", "--stop",
           ".", "--assets", str(ROOT / "artifacts"), "--out", str(tmp_path / "out")]
    env = {"PYTHONPATH": str(ROOT / "py"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sorted(report["files"]) == sorted(["config.json", "model.safetensors",
                                              "generation_config.json", "tokenizer.json",
                                              "tokenizer_config.json"])
    conf = transformers.GenerationConfig.from_pretrained(tmp_path / "out")
    assert (conf.do_sample, conf.temperature, conf.top_k, conf.max_new_tokens,
            conf.stop_strings, conf.eos_token_id) == (True, 0.7, 20, 30, ["."], EOS)
    tm = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert type(tm).__name__ == "LlamaForCausalLM"
    again = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert again.returncode == 2 and "--out: The export folder" in again.stderr
    bigram = subprocess.run(cmd[:4] + ["--model", "bigram"] + cmd[4:-1] + [str(tmp_path / "b")],
                            capture_output=True, text=True, env=env)
    assert bigram.returncode == 2 and "Only a transformer" in bigram.stderr
    assert not (tmp_path / "b").exists()


RULE_CASES = [  # (decodelab's settings, what transformers' generate would build from them)
    {"temperature": 0.7, "top_k": 20},
    {"temperature": 1.3, "top_p": 0.8},
    {"temperature": 0.9, "min_p": 0.05, "repetition_penalty": 1.3},
    {"temperature": 1.5, "typical_p": 0.7},
    {"temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.02, "repetition_penalty": 1.2},
]


def hf_processors(s: dict):
    """transformers' processors for these settings, in the order generate builds them."""
    from transformers.generation import logits_process as lp

    out = []
    if s.get("repetition_penalty", 1.0) != 1.0:
        out.append(lp.RepetitionPenaltyLogitsProcessor(s["repetition_penalty"]))
    if s.get("temperature", 1.0) != 1.0:
        out.append(lp.TemperatureLogitsWarper(s["temperature"]))
    if s.get("top_k", 0):
        out.append(lp.TopKLogitsWarper(s["top_k"]))
    if s.get("top_p", 1.0) < 1.0:
        out.append(lp.TopPLogitsWarper(s["top_p"]))
    if s.get("min_p", 0.0):
        out.append(lp.MinPLogitsWarper(s["min_p"]))
    if s.get("typical_p", 1.0) < 1.0:
        out.append(lp.TypicalLogitsWarper(s["typical_p"]))
    return lp.LogitsProcessorList(out)


@pytest.mark.parametrize("rules", RULE_CASES, ids=lambda r: ",".join(r))
def test_sampling_rules_teacher_forced_equal_transformers_processors(tmp_path, rules,
                                                                     float64_steps):
    """A decodelab run's steps, fed to transformers: its model's logits through its processors
    give decodelab's final probabilities at every step (every token, not only the drawn one).

    One deliberate difference: transformers' repetition penalty counts every input id, the
    start token included; decodelab's counts the prompt and the output (its start token is
    EOS, which is not text, and penalising it would make texts run on). So transformers' penalty
    is given the ids after the start token."""
    model = shipped("prose", "bpe")
    tm = load_hf(model, tmp_path / "m")
    run = start(Library(ROOT / "artifacts"), {"model": "transformer", "dataset": "prose",
                                               "tokenizer": "bpe", "prompt": "The parser",
                                               "seed": 11, "max_new_tokens": 25,
                                               "cache_check": False, **rules}).run()
    steps = run.trace()["steps"]
    ids = [EOS] + list(run.prompt_ids)
    processors = hf_processors(rules)
    for step in steps:
        logits = hf_logits(tm, ids)[-1]  # (V,)
        scores = processors(torch.tensor([ids[1:]]), torch.tensor(logits[None]))
        theirs = torch.softmax(scores, -1)[0].numpy()
        ours = run.decide(step["step"], model.full_logits(ids, np.float64)).p_final
        assert np.abs(ours - theirs).max() < 1e-9, step["step"]
        for row in step["top"]:
            assert row["p_final"] == pytest.approx(theirs[row["token_id"]], abs=1e-9)
        ids.append(step["token_id"])


def test_the_start_token_is_where_the_penalties_differ(tmp_path, float64_steps):
    """Given every input id, transformers also penalises EOS (the start token); only EOS's
    probability moves, and the rest is renormalised."""
    model = shipped("prose", "bpe")
    tm = load_hf(model, tmp_path / "m")
    ids = [EOS] + model.tokenizer.encode("The parser reads the")
    logits = torch.tensor(hf_logits(tm, ids)[-1][None])
    proc = hf_processors({"repetition_penalty": 1.5})
    with_start = torch.softmax(proc(torch.tensor([ids]), logits.clone()), -1)[0].numpy()
    without = torch.softmax(proc(torch.tensor([ids[1:]]), logits.clone()), -1)[0].numpy()
    assert with_start[EOS] < without[EOS]
    others = np.arange(len(without)) != EOS
    ratio = with_start[others] / without[others]
    assert np.allclose(ratio, ratio[0])  # the rest only renormalised


@pytest.mark.parametrize("bug", ["frozen-position", "token-twice", "no-causal-mask",
                                 "dropout-on"])
def test_each_cache_bug_fails_against_transformers_by_the_amount_the_page_shows(tmp_path, bug):
    """The break-it panel measures a bug against decodelab's own recomputation; transformers'
    logits for the same window say the same, to within transformers' float32 steps."""
    from decodelab.core.models.checks import cache_check
    from decodelab.lesson import bugs

    model = shipped("prose", "chars")
    tm = load_hf(model, tmp_path / "m")
    seen = []

    class Recorded(bugs.SESSIONS[bug]):
        def check_steps(self):  # (cache_check's check of a step)
            ours = yield from super().check_steps()
            theirs = float(np.abs(self.logits - hf_logits(tm, self.tokens)[-1]).max())
            seen.append((ours, theirs))
            return ours

    session = Recorded(model, np.float64)
    session.rng = np.random.default_rng(3)
    shown = bugs.run_bug(model, bug, model.tokenizer.encode("The cache "), 12, seed=3)
    mine = cache_check(model, model.tokenizer.encode("The cache "), 12, 3, session=session)
    assert mine["per_step"] == shown["cache"]["per_step"]  # the same run the page shows
    assert not mine["ok"]
    for ours, theirs in seen:
        assert abs(ours - theirs) < TOL_AS_SHIPPED
    assert max(theirs for _, theirs in seen) > 100 * TOL_AS_SHIPPED  # transformers sees it too


def test_import_hf_generates_as_transformers_does(tmp_path):
    """A randomly initialised LlamaForCausalLM saved by transformers, with no tokenizer: the
    command line runs it from token ids, greedy, exactly as transformers' generate does."""
    import subprocess
    import sys

    torch.manual_seed(1)
    conf = transformers.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, max_position_embeddings=40,
                                    bos_token_id=0, eos_token_id=0, pad_token_id=0)
    transformers.LlamaForCausalLM(conf).save_pretrained(tmp_path / "ckpt")
    tm = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt",
                                                           dtype=torch.float64).eval()
    prompt = [7, 3, 41, 12]
    with torch.no_grad():
        want = tm.generate(torch.tensor([[EOS] + prompt]), do_sample=False, max_new_tokens=20,
                           eos_token_id=EOS, pad_token_id=EOS)[0, 5:].tolist()
    cmd = [sys.executable, "-m", "decodelab", "import-hf", str(tmp_path / "ckpt"), "--ids",
           ",".join(map(str, prompt)), "--greedy", "--seed", "0", "--max-new-tokens", "20"]
    done = subprocess.run(cmd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT / "py"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["ids"] == want and out["prompt_ids"] == prompt
    assert out["tokenizer"].startswith("no tokenizer.json")
    assert out["text"] == "".join(f"<{i}>" for i in want if i != EOS)
    bad = subprocess.run(cmd[:4] + [str(tmp_path / "missing")] + cmd[5:], capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT / "py"), "PATH": "/usr/bin:/bin"})
    assert bad.returncode == 2 and "checkpoint: " in bad.stderr and "is not a folder" in bad.stderr


@pytest.mark.parametrize("dataset,tokenizer", SHIPPED)
def test_an_exported_tokenizer_reads_back_as_decodelab_s(tmp_path, dataset, tokenizer):
    from decodelab.core.interop.hftokenizer import read_tokenizer

    model = shipped(dataset, tokenizer)
    hf.export(model, tmp_path / "m", extra_files=tokenizer_files(model.tokenizer))
    back, what = read_tokenizer(tmp_path / "m", model.cfg.vocab_size)
    assert type(back) is type(model.tokenizer), what
    assert back.arrays().keys() == model.tokenizer.arrays().keys()
    for k, v in model.tokenizer.arrays().items():
        assert np.array_equal(back.arrays()[k], v)
