"""A pretrained Llama-architecture model read from its GGUF file, as a decodelab model: the same
layers, KV cache, sessions and rules as the models trained here, with the file's own tokenizer
and chat template.

The weights are dequantized to float32 once, at load, and put in decodelab's layout
(`layers`: one fused q|k|v matrix and one fused gate|up matrix per block, matrices (in, out)).
They are transposed views of the file's (out, in) rows where no fusing is needed, so the
matrices are stored column-major as `layers.matmul_layout` wants without a second copy, and the
output head is the embedding itself (SmolLM2 ties them: the file has no output.weight).

The one change of layout: llama.cpp's converter reorders the rows of W_q and W_k inside each
head so that ggml's rotation turns ADJACENT channels (2i, 2i+1) together. decodelab, like
transformers, turns channel i with channel i + D/2 (`layers.rope`). `unpermute` puts the rows
back; the scores are the same either way, and only this order gives keys laid out as
transformers lays them out (so the caches can be compared entry by entry).

Generation runs in float32 (a float64 copy of 135M weights would take a second gigabyte), so the
live cache check's tolerance is float32's.
"""

import os

import numpy as np

from decodelab.core.kernels.matrices import QuantizedMatrix
from decodelab.core.models.cachedforward import InferenceWeights, cached_forward, weights_of
from decodelab.core.models.kvcache import KVCache
from decodelab.core.models.layers import Config, matmul_layout
from decodelab.core.loops.slices import prefill_chunks
from decodelab.core.models.transformer import TransformerModel
from decodelab.fields import PRETRAINED, PRETRAINED_TEXTS
from decodelab.pretrained.card import LABEL
from decodelab.pretrained import engines
from decodelab.pretrained.chat import ChatTemplate
from decodelab.pretrained.gguf import GGUF, MAX_FILE_BYTES, GGUFError, described
from decodelab.pretrained.limits import ARCHITECTURES
from decodelab.pretrained.tokenizer import GGUFTokenizer

SMOLLM2_NAME = "Smollm2 135M 8k Lc100K Mix1 Ep2"  # the name SmolLM2's file gives its model
# (general.name): a file that gives another runs under that name
WINDOW = 2048  # the positions decodelab keeps in the cache (SmolLM2 was trained on 8,192; the
# cache is allocated whole, and 2,048 positions take 94 MB in float32)


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Rows (n_head * D, in) in llama.cpp's order -> transformers' order: inside each head, the
    converter wrote row pairs (i, i + D/2) next to each other; this undoes it."""
    rows, cols = w.shape
    D = rows // n_head
    return w.reshape(n_head, D // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


class PretrainedModel(TransformerModel):
    kind = "pretrained"
    own_data = True  # its tokenizer, data and training are the file's
    reference_texts = PRETRAINED_TEXTS  # the corpus its texts' words are looked up in
    exports = True  # as transformers' LlamaForCausalLM, with its own tokenizer.json
    handoff = False  # its float32 weights would make a 540 MB zip: its script reads the file
    # its name (the Model field's value for SmolLM2's file; a file of one's own goes by the name
    # its metadata gives, or its file's) and its name in words
    name, label = PRETRAINED[0], LABEL
    # The lesson's heavier features, each step of which is a pass over this model: a search's
    # tokens (beam search, speculative decoding) and the bugs lab's checked steps, each about a
    # second in the page; and no cache check after each of speculative decoding's rounds (a
    # full pass over the whole text, several seconds each there).
    limits = {"search_max_tokens": 32, "check_steps": 10, "checks_each_round": False}
    generation_dtype = np.float32  # its sessions, and the pools that page its caches
    # The live check's limit. SmolLM2's logits reach 30-40, which float32 holds to ~4e-6, and
    # each is the end of 30 blocks of sums 576 to 1,536 long, added in another order by the
    # full pass (a whole window at once) than by the cached steps (one row each): measured
    # natively, the two differ by up to 8.7e-5 in runs of 300 steps and 7.6e-5 over 2,100
    # steps with a context shift, over float32's 1e-4 for the small models trained here.
    # 1e-3 keeps a margin of 11; a cache that is wrong (a stale key, a wrong position) differs
    # by 0.1 and more.
    check_tolerance = {"float32": 1e-3, "float64": 1e-9}
    # Its sessions' caches take 256 positions at a time (11.8 MB a row in float32), not the
    # window's 2,048 (94 MB) at once: a chat holds a few hundred, a beam search a row per beam.
    cache_reserve = 256

    def __init__(self, cfg: Config, params: dict, tokenizer: GGUFTokenizer, info=None,
                 template=None, engine: str = "reference"):
        super().__init__(cfg, params, tokenizer, info=info)
        self.template = template  # ChatTemplate, or None when the file's template is unknown
        if self.info.get("name") != SMOLLM2_NAME:  # a file of one's own: its own name
            self.name = self.label = self.info.get("name") or self.info.get("file") or "GGUF"
        self.engine = engine  # engines.ENGINES: which arithmetic its weights are held for
        if engine == "quantized":  # the file's blocks through the kernels, every sum in a
            # fixed order, attention's inputs held as float16 as llama.cpp's cache holds them
            self.derived[("inference", np.dtype(np.float32))] = InferenceWeights(
                params, cfg, np.float32, fixed_order=True)

    def _weights(self) -> list:
        """Each weight array (or quantized matrix) once: a tied head is the embedding."""
        head, wte = self.params["w_head"], self.params["wte"]
        tied = head is wte or (isinstance(head, np.ndarray) and np.shares_memory(head, wte))
        return [a for k, a in self.params.items() if not (tied and k == "w_head")]

    @property
    def n_params(self) -> int:
        return int(sum(a.size for a in self._weights()))

    @property
    def weight_bytes(self) -> int:
        """The memory its weights hold as read for its engine (float32 arrays, or the file's
        blocks with their scales), each once."""
        return int(sum(a.nbytes for a in self._weights()))

    def params_as(self, dtype) -> dict:
        """The parameters in `dtype` for a full forward (the live check): its own arrays when
        they are in that dtype already (float32, the matrices column-major as the file is
        read), where a trained model's copy would keep another half gigabyte."""
        if self.engine != "reference":
            raise ValueError(f"the {self.engine} engine keeps the file's blocks, not float "
                             "arrays; this needs the model read on the reference engine")
        if any(v.dtype != np.dtype(dtype) for v in self.params.values()):
            return super().params_as(dtype)
        return {k: matmul_layout(v) if k.split(".")[-1].startswith("w_") else v
                for k, v in self.params.items()}

    def logits_at_steps(self, tokens, rows=None, dtype=np.float32):
        """logits_at (`models.base`), sliced: the whole window read `prefill_chunks` a
        piece into an empty cache of its own, as a prefill reads a prompt, and the head applied
        to the rows asked for alone, as each piece passes. It shares no state with a session's
        cache, its positions or its hooks (a cache bug of `bugs` shows), and it is how this
        model is held to transformers' forward (tests/test_smollm2.py). The trained models'
        go through the training code's forward; for this model that pass is 2.3 times slower
        in WebAssembly (its products are `@`, 2.4 GFLOP/s there against einsum's 5.5: in the
        page, the check of a chat's second turn, 98 tokens, took 9.2 s that way and 3.5 s this
        way), and it keeps every block's arrays for a backward pass (320 MB more at 200
        tokens). A row of logits is 49,152 numbers: a window's worth would be 400 MB."""
        cfg, n = self.cfg, len(tokens)
        cache = KVCache(cfg.n_layer, 1, cfg.n_kv_head, n, cfg.head_dim, dtype)  # just the window
        idx = np.asarray(tokens, np.int64)[None]  # (1, n)
        rows = np.arange(n) if rows is None else np.asarray(rows, np.int64)
        w, out = weights_of(self, dtype), np.empty((len(rows), cfg.vocab_size), dtype)
        for a, b in prefill_chunks(n, cfg):
            here = (rows >= a) & (rows < b)
            got = cached_forward(w, cache, idx[:, a:b], np.arange(a, b)[None],
                                 rows=rows[here] - a)[0]  # (r, V)
            out[here] = got
            yield None  # (after the last chunk too: a piece is one chunk)
        return out  # (R, V)

    def all_logits(self, tokens, dtype=np.float32) -> np.ndarray:
        return self.logits_at(tokens, None, dtype)  # (T, V)

    def save(self, path) -> None:
        raise ValueError("a pretrained model stays in its GGUF file; decodelab does not save it")


def config_of(gguf: GGUF, window: int) -> Config:
    """The model's shape from the file's metadata, each number checked for its type and against
    the others and the tensors present, and anything decodelab does not implement refused by
    name (it would otherwise run, wrongly), before anything is allocated from it."""
    arch = gguf.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise GGUFError(f"the file holds a {arch!r} model; decodelab runs the architecture "
                        f"{', '.join(ARCHITECTURES)} (Llama's: RMSNorm, rotary positions, "
                        "grouped-query attention, SwiGLU)")
    p = arch + "."
    unsupported(gguf, p)
    n_embd = gguf.integer(p + "embedding_length", least=1)
    n_head = gguf.integer(p + "attention.head_count", least=1)
    n_kv_head = gguf.integer(p + "attention.head_count_kv", n_head, least=1)
    n_layer = gguf.integer(p + "block_count", least=1)
    if n_embd % n_head:
        raise GGUFError(f"{p}attention.head_count is {n_head}, which does not divide the width "
                        f"({p}embedding_length, {n_embd})")
    if n_head % n_kv_head:
        raise GGUFError(f"{p}attention.head_count_kv is {n_kv_head}, which does not divide the "
                        f"{n_head} query heads (each KV head serves a whole group of them)")
    head_dim = n_embd // n_head
    if head_dim % 2:
        raise GGUFError(f"each head is {head_dim} channels wide, an odd number; rotary positions "
                        "turn channels in pairs")
    rope_dims = gguf.integer(p + "rope.dimension_count", head_dim)
    if rope_dims != head_dim:
        raise GGUFError(f"the file rotates {rope_dims} of each head's {head_dim} "
                        "channels; decodelab rotates all of them")
    blocks = {int(name.split(".")[1]) for name in gguf.tensors
              if name.startswith("blk.") and name.split(".")[1].isdigit()}
    if n_layer > len(blocks) or any(i not in blocks for i in range(n_layer)):
        raise GGUFError(f"{p}block_count is {n_layer:,}; the file has the tensors of "
                        f"{len(blocks):,} blocks")
    tokens = gguf.require("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise GGUFError(f"metadata tokenizer.ggml.tokens is {described(tokens)}; it must be a "
                        "list of the tokens' texts")
    if gguf.integer(p + "vocab_size", len(tokens)) != len(tokens):
        raise GGUFError(f"{p}vocab_size is {gguf.metadata[p + 'vocab_size']}; the tokenizer "
                        f"has {len(tokens)} tokens")
    trained = gguf.integer(p + "context_length", window, least=1)
    return Config(vocab_size=len(tokens), context_size=min(window, trained), n_layer=n_layer,
                  n_embd=n_embd, n_head=n_head, n_kv_head=n_kv_head,
                  mlp_hidden=gguf.integer(p + "feed_forward_length", least=1),
                  rope_theta=gguf.number(p + "rope.freq_base", 10000.0),
                  norm_eps=gguf.number(p + "attention.layer_norm_rms_epsilon", 1e-5))


def unsupported(gguf: GGUF, p: str) -> None:
    """What the file asks for that decodelab's Llama does not do: refused by name."""
    for key, value in gguf.metadata.items():
        if key.startswith(p + "rope.scaling.") and not (
                key == p + "rope.scaling.type" and value == "none"):
            raise GGUFError(f"the file asks for rope scaling ({key} = {value!r}); decodelab "
                            "turns rotary positions unscaled")
    if "rope_freqs.weight" in gguf.tensors:
        raise GGUFError("the file has rope_freqs.weight (rotary frequencies of its own per "
                        "channel, as Llama 3.1's); decodelab turns channels at the base "
                        "frequency's powers alone")
    if gguf.metadata.get(p + "expert_count", 0):
        raise GGUFError(f"the file holds a mixture of experts ({p}expert_count = "
                        f"{gguf.metadata[p + 'expert_count']}); decodelab runs dense blocks")


def expected_shapes(gguf: GGUF, cfg: Config) -> dict:
    """Every tensor decodelab reads, with the (numpy-order) shape the metadata implies."""
    C, F, D, V = cfg.n_embd, cfg.mlp_hidden, cfg.head_dim, cfg.vocab_size
    H, Hkv = cfg.n_head, cfg.n_kv_head
    out = {"token_embd.weight": (V, C), "output_norm.weight": (C,)}
    if "output.weight" in gguf.tensors:
        out["output.weight"] = (V, C)
    for i in range(cfg.n_layer):
        b = f"blk.{i}."
        out.update({b + "attn_norm.weight": (C,), b + "attn_q.weight": (H * D, C),
                    b + "attn_k.weight": (Hkv * D, C), b + "attn_v.weight": (Hkv * D, C),
                    b + "attn_output.weight": (C, H * D), b + "ffn_norm.weight": (C,),
                    b + "ffn_gate.weight": (F, C), b + "ffn_up.weight": (F, C),
                    b + "ffn_down.weight": (C, F)})
    return out


def check_shapes(gguf: GGUF, cfg: Config) -> None:
    """Each tensor there, of a type decodelab reads and of the shape the metadata implies:
    checked before a byte is dequantized or an array allocated from the metadata."""
    for name, shape in expected_shapes(gguf, cfg).items():
        info = gguf.tensor_info(name)  # (missing, or of a type decodelab cannot read: said)
        if tuple(info.shape) != shape:
            raise GGUFError(f"tensor {name} has shape {tuple(info.shape)}; the metadata implies "
                            f"{shape}")


def _tensor(gguf: GGUF, name: str, shape: tuple) -> np.ndarray:
    info = gguf.tensor_info(name)
    if tuple(info.shape) != shape:  # (before its values are made)
        raise GGUFError(f"tensor {name} has shape {tuple(info.shape)}; the metadata implies "
                        f"{shape}")
    return gguf.array(name)  # (its own memory, never a view of the file: the file's bytes can go)


def head_params(gguf: GGUF, cfg: Config) -> dict:
    """The embedding, the final norm and the output head (the embedding itself when tied)."""
    C, V = cfg.n_embd, cfg.vocab_size
    wte = _tensor(gguf, "token_embd.weight", (V, C))
    head = _tensor(gguf, "output.weight", (V, C)) if "output.weight" in gguf.tensors else wte
    return {"wte": wte, "g_f": _tensor(gguf, "output_norm.weight", (C,)), "w_head": head.T}


def block_params(gguf: GGUF, cfg: Config, i: int) -> dict:
    """Block i's parameters in decodelab's layout (float32)."""
    C, F, D = cfg.n_embd, cfg.mlp_hidden, cfg.head_dim
    H, Hkv = cfg.n_head, cfg.n_kv_head
    b = f"blk.{i}."

    def get(name, shape):
        return _tensor(gguf, b + name, shape)

    # The fused matrices are allocated once, in the file's (out, in) rows, and each tensor is
    # dequantized into its rows: no part is a separate array copied in later (in Pyodide the
    # parts' freed holes between the kept arrays added ~100 MB to a heap that never shrinks).
    qkv = np.empty(((H + 2 * Hkv) * D, C), np.float32)  # rows q | k | v
    for rows, name, heads in ((slice(0, H * D), "attn_q.weight", H),
                              (slice(H * D, (H + Hkv) * D), "attn_k.weight", Hkv)):
        qkv[rows] = unpermute(get(name, (heads * D, C)), heads)  # (small: 1.3 MB at most)
    gguf.array(b + "attn_v.weight", out=qkv[(H + Hkv) * D:])
    fc = np.empty((2 * F, C), np.float32)  # rows gate | up
    gguf.array(b + "ffn_gate.weight", out=fc[:F])
    gguf.array(b + "ffn_up.weight", out=fc[F:])
    return {f"h{i}.g_attn": get("attn_norm.weight", (C,)),
            f"h{i}.w_qkv": qkv.T,  # (C, (H + 2Hkv) D), column-major
            f"h{i}.w_o": get("attn_output.weight", (C, H * D)).T,  # (H D, C)
            f"h{i}.g_mlp": get("ffn_norm.weight", (C,)),
            f"h{i}.w_fc": fc.T,  # (C, 2F)
            f"h{i}.w_proj": get("ffn_down.weight", (C, F)).T}  # (F, C)


def params_of(gguf: GGUF, cfg: Config) -> dict:
    """decodelab's parameter dict from the file's tensors (float32)."""
    p = head_params(gguf, cfg)
    for i in range(cfg.n_layer):
        p.update(block_params(gguf, cfg, i))
    return p


class Reader:
    """A GGUF file read in parts: the header and configuration at once, then the tokenizer, each
    block and the embedding (`parts`, each `part(name)` a call of its own), then `model()`.
    The page loads the model this way, a part per batch, so it can show progress and stop
    between two parts; `load` reads every part in one go."""

    def __init__(self, data, window: int = WINDOW, max_bytes=None, engine: str = "reference"):
        if engine not in engines.ENGINES:
            raise ValueError(f"engine is {engine!r}; it is one of {', '.join(engines.ENGINES)}")
        limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
        self.gguf = GGUF(data, limit)  # a path: read a tensor at a time
        self.file = os.path.basename(data) if isinstance(data, (str, os.PathLike)) else ""
        self.opened = None  # the page's: the name of a file the learner opened from disk
        self.cfg = config_of(self.gguf, window)
        check_shapes(self.gguf, self.cfg)  # every tensor, before any is read
        self.engine = engine
        if engine == "quantized":
            engines.check_types(self.gguf, self.cfg)  # a kernel for every matrix, before
        self.tokenizer = None
        self.params = {}
        self.parts = ["tokenizer", *(f"block {i}" for i in range(self.cfg.n_layer)), "embedding"]

    def part(self, name: str) -> None:
        if name == "tokenizer":
            self.tokenizer = GGUFTokenizer.from_gguf(self.gguf)
        elif name == "embedding":
            read = engines.head_params if self.engine == "quantized" else head_params
            self.params.update(read(self.gguf, self.cfg))
        else:
            read = engines.block_params if self.engine == "quantized" else block_params
            self.params.update(read(self.gguf, self.cfg, int(name.split()[1])))

    def model(self) -> PretrainedModel:
        gguf, cfg = self.gguf, self.cfg
        info = {"name": gguf.get("general.name", ""), "license": gguf.get("general.license", ""),
                "file": self.file, "opened": self.opened,
                "trained_context": int(gguf.get(cfg_key(gguf, "context_length"),
                                                cfg.context_size)),
                "file_types": sorted({t.type for t in gguf.tensors.values()})}
        return PretrainedModel(cfg, self.params, self.tokenizer, info,
                               ChatTemplate.from_gguf(gguf, self.tokenizer), self.engine)


TWIN_PIECE = 2_000_000  # values dequantized per piece (about 0.1 s in the page)


def reference_steps(model: PretrainedModel):
    """The same file's model on the reference engine, made from the quantized engine's blocks
    (a generator: a block per piece, `slices`): each matrix dequantized as the reference's
    reader dequantizes the file (`gguf.dequantize`: nibble times d, plus m, in float32), so its
    arrays are the ones `load(path, engine="reference")` makes, bit for bit, with no file at
    hand (the page keeps none once a model is read). The tokenizer, template and facts are the
    quantized model's own."""
    if model.engine != "quantized":
        raise ValueError(f"the model is on the {model.engine} engine; its float32 twin is made "
                         "from the quantized engine's blocks")
    params = {}
    for name, value in model.params.items():
        if name == "w_head" and value is model.params["wte"]:
            continue  # tied: the embedding's own array, once
        if isinstance(value, QuantizedMatrix):
            k, rows = value.shape
            out = np.empty((rows, k), np.float32)  # the file's (out, in) rows
            step = max(8, TWIN_PIECE // k)
            for a in range(0, rows, step):  # a piece of rows at a time (the embedding is 28M)
                out[a:a + step] = value.rows(np.arange(a, min(rows, a + step)))
                yield None
            value = out if name == "wte" else out.T  # decodelab's (in, out), column-major
        params[name] = value
    if "w_head" not in params:
        params["w_head"] = params["wte"].T
    return PretrainedModel(model.cfg, params, model.tokenizer, dict(model.info), model.template,
                           "reference")


def load(data, window: int = WINDOW, max_bytes=None, engine: str = "reference") -> PretrainedModel:
    """A GGUF file's bytes (or its path) -> the model, on `engine` (engines.ENGINES). Nothing
    is kept of a file that fails."""
    reader = Reader(data, window, max_bytes, engine)
    for name in reader.parts:
        reader.part(name)
    return reader.model()


def cfg_key(gguf: GGUF, key: str) -> str:
    return f"{gguf.get('general.architecture')}.{key}"
