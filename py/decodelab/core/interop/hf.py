"""decodelab's transformers as Hugging Face checkpoints, and back.

decodelab's transformer is Llama's architecture (`layers`), so transformers' own
`LlamaForCausalLM` loads an export as it is, with no code of ours: `export` writes the folder
(`config.json`, `model.safetensors`, `generation_config.json`), and `load` reads such a folder,
written by transformers or by `export`, into a `TransformerModel`.

The only work is renaming and transposing. decodelab keeps a matrix the way `x @ W` uses it,
(in, out); torch's `nn.Linear` keeps (out, in). decodelab fuses q, k and v into one matrix and
the MLP's gate and up into another; Llama keeps them apart. The head layout is the same: query
head h (of H) uses key/value head h // G, and each head's D channels are rotated in pairs
(i, i + D/2), transformers' `rotate_half`.

A pretrained model read from its GGUF file (SmolLM2) is exported the same way, dequantized to
float32: its head tied to its embedding as the file has it, its own begin, end and padding ids.

Left out: tokenizers (`hftokenizer`), other architectures, rope scaling, biases, bfloat16
checkpoints (numpy has no bfloat16; save in float32).
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from decodelab.core.interop import safetensors
from decodelab.core.models.layers import Config, ROPE_THETA
from decodelab.core.rules.settings import RULE_NAMES, default_words
from decodelab.core.tokens.tokenizer import EOS
from decodelab.errors import FieldError
from decodelab.fields import default, label_of

ARCHITECTURE = "LlamaForCausalLM"
MAX_PARAMS = 50_000_000  # what `load` accepts: 200 MB in float32, seconds per token in numpy
FILES = ("config.json", "model.safetensors", "generation_config.json")


def token_ids(tokenizer=None) -> dict:
    """The begin, end and padding ids in transformers' names. A model trained here has one
    token for all three: EOS (id 0) ends a text and also starts one, since decodelab's context
    always opens with it. A pretrained tokenizer has its own (SmolLM2: 1, 2 and 2)."""
    if tokenizer is None:
        return {"bos_token_id": EOS, "eos_token_id": EOS, "pad_token_id": EOS}
    return {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id,
            "pad_token_id": tokenizer.pad_id}


def tied(params: dict) -> bool:
    """Is the output head the embedding itself (read from a file that ties them)?"""
    return np.shares_memory(params["w_head"], params["wte"])


def model_config(model) -> dict:
    """config.json of a model: its shape, its tokenizer's ids, a tied head, and the positions
    it was trained on where decodelab keeps fewer (a pretrained model's window)."""
    return config_json(model.cfg, token_ids(model.tokenizer), tied(model.params),
                       model.info.get("trained_context"))


def config_json(cfg: Config, ids=None, tie: bool = False, positions=None) -> dict:
    """The model's shape in transformers' LlamaConfig names (ids: `token_ids`; positions: the
    window it was trained on, when not cfg.context_size)."""
    return {
        "architectures": [ARCHITECTURE], "model_type": "llama",
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.n_embd,
        "intermediate_size": cfg.mlp_hidden, "num_hidden_layers": cfg.n_layer,
        "num_attention_heads": cfg.n_head, "num_key_value_heads": cfg.n_kv_head,
        "head_dim": cfg.head_dim, "max_position_embeddings": positions or cfg.context_size,
        "hidden_act": "silu", "rms_norm_eps": cfg.norm_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "attention_bias": False, "mlp_bias": False, "attention_dropout": 0.0,
        "tie_word_embeddings": tie, "initializer_range": 0.02, "use_cache": True,
        **(ids or token_ids()), "dtype": "float32",
    }


def state_dict(params: dict, cfg: Config) -> dict:
    """decodelab's parameters -> Llama's named tensors (float32, torch's (out, in) layout)."""
    H, Hkv, D, F = cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.mlp_hidden
    f32 = lambda a: np.ascontiguousarray(a, np.float32)  # noqa: E731
    out = {"model.embed_tokens.weight": f32(params["wte"]), "model.norm.weight": f32(params["g_f"])}
    if not tied(params):  # a tied head is the embedding: transformers makes it from the config
        out["lm_head.weight"] = f32(params["w_head"].T)
    for i in range(cfg.n_layer):
        p, pre = (lambda k: params[f"h{i}.{k}"]), f"model.layers.{i}."  # noqa: E731
        qkv, gu = p("w_qkv"), p("w_fc")  # (C, (H+2Hkv)D), (C, 2F)
        out.update({
            pre + "input_layernorm.weight": f32(p("g_attn")),
            pre + "self_attn.q_proj.weight": f32(qkv[:, :H * D].T),
            pre + "self_attn.k_proj.weight": f32(qkv[:, H * D:(H + Hkv) * D].T),
            pre + "self_attn.v_proj.weight": f32(qkv[:, (H + Hkv) * D:].T),
            pre + "self_attn.o_proj.weight": f32(p("w_o").T),
            pre + "post_attention_layernorm.weight": f32(p("g_mlp")),
            pre + "mlp.gate_proj.weight": f32(gu[:, :F].T),
            pre + "mlp.up_proj.weight": f32(gu[:, F:].T),
            pre + "mlp.down_proj.weight": f32(p("w_proj").T),
        })
    return out


# Each decoding rule (sampling.Rules) by the name transformers' GenerationConfig gives it:
# greedy is do_sample the other way round, and the rules that shape a draw are written only
# when the run samples. A rule transformers has no setting for is named in NOT_IN_TRANSFORMERS
# with why: it stays out, and the handoff compares the model's own probabilities where it was
# on. A rule in neither is refused by name when it is on (generation_config).
RULES = {"greedy": "do_sample", "repetition_penalty": "repetition_penalty",
         "temperature": "temperature", "top_k": "top_k", "top_p": "top_p", "min_p": "min_p",
         "typical_p": "typical_p"}
NOT_IN_TRANSFORMERS = {"order": "transformers always applies temperature before the filters"}


def generation_config(settings=None, ids=None) -> dict:
    """A run's settings in transformers' GenerationConfig names (defaults when None; ids:
    `token_ids`).

    decodelab's temperature 0 and greedy both mean do_sample = false. transformers has no
    setting for decodelab's filter-first order, JSON mode or tool calls: those stay out. A
    FieldError names a decoding rule that is on and has no place here (see RULES)."""
    out = dict(ids or token_ids())
    if settings is None:
        return out
    for name in RULE_NAMES:
        if name not in RULES and name not in NOT_IN_TRANSFORMERS \
                and getattr(settings, name) != default(name):
            raise FieldError(name, f"{label_of(name)} has no setting in transformers' "
                                   f"generation config yet: set it back to "
                                   f"{default_words(name)} to take the run there.")
    out.update(do_sample=not settings.is_greedy, max_new_tokens=settings.max_new_tokens,
               min_new_tokens=settings.min_new_tokens,
               repetition_penalty=settings.repetition_penalty)
    if not settings.is_greedy:
        out.update(temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p,
                   min_p=settings.min_p or None, typical_p=settings.typical_p)
    if settings.stop:
        out["stop_strings"] = list(settings.stop)
    if settings.ignore_eos:  # decodelab blocks EOS (logit -inf); transformers suppresses it
        out["suppress_tokens"] = [out["eos_token_id"]]
        out["eos_token_id"] = None
    return out


def files(model, settings=None, extra_files=None) -> dict:
    """{name: bytes}: the folder's files, in memory (the page zips them)."""
    if not model.exports:
        raise FieldError("model", "Only a transformer can be exported to transformers; the "
                                  "bigram is a table of counts, not an architecture it knows. "
                                  "Use --model transformer.")
    ids = token_ids(model.tokenizer)
    out = {"config.json": model_config(model),
           "model.safetensors": safetensors.to_bytes(state_dict(model.params, model.cfg),
                                                     {"format": "pt"}),
           "generation_config.json": generation_config(settings, ids), **(extra_files or {})}
    return {name: content if isinstance(content, bytes) else
            (json.dumps(content, indent=2, ensure_ascii=False) + "\n").encode()
            for name, content in out.items()}


def export(model, out_dir, settings=None, extra_files=None) -> list:
    """Write the folder transformers loads; returns the paths written.

    The folder must not exist or be empty. Everything is written into a temporary folder beside
    it first and moved into place at the end, so a failure leaves nothing half-written.
    extra_files: {name: bytes or JSON-able} written too (the tokenizer's files)."""
    written = files(model, settings, extra_files)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FieldError("out", f"The export folder {out} exists and is not empty; give a new "
                                f"folder (nothing was written).")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        for name, data in written.items():
            (tmp / name).write_bytes(data)
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [out / name for name in written]


def config_from_json(conf: dict, where: str = "config.json") -> Config:
    """A Llama config.json -> decodelab's Config, refusing what decodelab does not implement."""
    arch = conf.get("architectures") or [conf.get("model_type")]
    if ARCHITECTURE not in arch and conf.get("model_type") != "llama":
        raise FieldError("checkpoint", f"{where} describes {', '.join(map(str, arch))}; decodelab "
                                       f"imports {ARCHITECTURE} checkpoints only.")
    rope = conf.get("rope_parameters") or {"rope_type": "default",
                                           "rope_theta": conf.get("rope_theta", ROPE_THETA)}
    refusals = [(rope.get("rope_type", "default") != "default", "rope scaling"),
                (conf.get("attention_bias") or conf.get("mlp_bias"), "biases"),
                (conf.get("hidden_act", "silu") != "silu", f"activation {conf.get('hidden_act')}")]
    for bad, what in refusals:
        if bad:
            raise FieldError("checkpoint", f"{where} asks for {what}, which decodelab's "
                                           f"Llama does not implement.")
    try:
        C, H = int(conf["hidden_size"]), int(conf["num_attention_heads"])
        cfg = Config(vocab_size=int(conf["vocab_size"]),
                     context_size=int(conf["max_position_embeddings"]),
                     n_layer=int(conf["num_hidden_layers"]), n_embd=C, n_head=H,
                     n_kv_head=int(conf.get("num_key_value_heads") or H),
                     mlp_hidden=int(conf["intermediate_size"]),
                     rope_theta=float(rope.get("rope_theta", ROPE_THETA)),
                     norm_eps=float(conf.get("rms_norm_eps", 1e-6)))
    except KeyError as exc:
        raise FieldError("checkpoint", f"{where} lacks {exc.args[0]}.") from None
    except ValueError as exc:
        raise FieldError("checkpoint", f"{where}: {exc}.") from None
    if conf.get("head_dim") not in (None, cfg.head_dim):
        raise FieldError("checkpoint", f"{where}: head_dim {conf['head_dim']} is not hidden_size "
                                       f"/ num_attention_heads = {cfg.head_dim}.")
    return cfg


def params_from_state(state: dict, cfg: Config, where: str = "model.safetensors",
                      tied: bool = False) -> dict:
    """Llama's named tensors -> decodelab's parameters (float32), every shape checked. tied:
    the head is the embedding (a checkpoint may then leave lm_head out)."""
    def get(name, shape):
        if name not in state:
            raise FieldError("checkpoint", f"{where} lacks {name}.")
        a = np.asarray(state[name], np.float32)
        if a.shape != shape:
            raise FieldError("checkpoint", f"{where}: {name} has shape {list(a.shape)}; the "
                                           f"config needs {list(shape)}.")
        return a

    C, V, H, Hkv, D, F = (cfg.n_embd, cfg.vocab_size, cfg.n_head, cfg.n_kv_head, cfg.head_dim,
                          cfg.mlp_hidden)
    m = np.ascontiguousarray
    p = {"wte": m(get("model.embed_tokens.weight", (V, C))),
         "g_f": m(get("model.norm.weight", (C,))),
         "w_head": m(get("lm_head.weight" if "lm_head.weight" in state or not tied
                         else "model.embed_tokens.weight", (V, C)).T)}
    for i in range(cfg.n_layer):
        pre = f"model.layers.{i}."
        q = get(pre + "self_attn.q_proj.weight", (H * D, C))
        k = get(pre + "self_attn.k_proj.weight", (Hkv * D, C))
        v = get(pre + "self_attn.v_proj.weight", (Hkv * D, C))
        gate = get(pre + "mlp.gate_proj.weight", (F, C))
        up = get(pre + "mlp.up_proj.weight", (F, C))
        p.update({f"h{i}.g_attn": m(get(pre + "input_layernorm.weight", (C,))),
                  f"h{i}.w_qkv": m(np.concatenate([q, k, v]).T),
                  f"h{i}.w_o": m(get(pre + "self_attn.o_proj.weight", (C, H * D)).T),
                  f"h{i}.g_mlp": m(get(pre + "post_attention_layernorm.weight", (C,))),
                  f"h{i}.w_fc": m(np.concatenate([gate, up]).T),
                  f"h{i}.w_proj": m(get(pre + "mlp.down_proj.weight", (C, F)).T)})
    return p


def read_checkpoint(folder) -> tuple[Config, dict]:
    """(Config, params) of a Llama checkpoint folder saved by transformers or by `export`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FieldError("checkpoint", f"{folder} is not a folder; give the folder "
                                       f"save_pretrained wrote.")
    conf_path, weights = folder / "config.json", folder / "model.safetensors"
    for path in (conf_path, weights):
        if not path.is_file():
            raise FieldError("checkpoint", f"{folder} has no {path.name} (sharded and .bin "
                                           f"checkpoints are not read; save with "
                                           f"safe_serialization and one shard).")
    try:
        conf = json.loads(conf_path.read_text())
    except ValueError as exc:
        raise FieldError("checkpoint", f"{conf_path} is not JSON ({exc}).") from None
    cfg = config_from_json(conf, str(conf_path))
    n = cfg.vocab_size * cfg.n_embd * 2 + cfg.n_layer * (
        (cfg.n_head + 2 * cfg.n_kv_head) * cfg.head_dim * cfg.n_embd
        + cfg.n_head * cfg.head_dim * cfg.n_embd + 3 * cfg.mlp_hidden * cfg.n_embd)
    if n > MAX_PARAMS:
        raise FieldError("checkpoint", f"{folder} holds a model of about {n:,} parameters; "
                                       f"decodelab runs models up to {MAX_PARAMS:,} in numpy.")
    state, _ = safetensors.from_bytes(weights.read_bytes(), str(weights))
    return cfg, params_from_state(state, cfg, str(weights), bool(conf.get("tie_word_embeddings")))
