"""decodelab's tokenizers as the `tokenizer.json` Hugging Face's tokenizers library reads, so that
`AutoTokenizer.from_pretrained(DIR)` encodes any text to the ids decodelab gives.

Byte-level BPE: the same pieces (decodelab's split pattern, as a regex the library runs), then
bytes shown as printable characters (the library's ByteLevel step, GPT-2's byte-to-character
table), then the merges by rank. decodelab's ids differ from GPT-2's (EOS is 0 and byte b is
b + 1), so the vocabulary lists every id explicitly. Characters: one token per character, a
word-level vocabulary over single characters.

A GGUF file's tokenizer (SmolLM2's) is written as its own tokenizer.json has it: the file's
vocabulary and merges, each number character cut out alone before the ByteLevel step's GPT-2
split, its special tokens, and its chat template in tokenizer_config.json. Typed markup is the one
difference: transformers reads "<|im_end|>" in text as the special token (its chat template
needs that), decodelab reads it as text.

EOS and the tasks data's markers are special tokens. decodelab never reads a marker out of typed
text ("<|call|>" typed is eight characters), so the tokenizer is told not to either
(`split_special_tokens`).

Reading back (`read_tokenizer`): a tokenizer.json with decodelab's layout becomes decodelab's
tokenizer again; any other (a checkpoint from elsewhere) leaves token ids (`IdsOnly`).

Left out: normalisation (decodelab has none), offsets beyond what the library computes, reading
tokenizers decodelab did not write.
"""

import json
from pathlib import Path

import numpy as np

from decodelab.core.tokens import bpe
from decodelab.core.tokens.base import Tokenizer
from decodelab.core.tokens.tokenizer import EOS, EOS_LABEL, CharTokenizer
from decodelab.errors import FieldError


def byte_chars() -> list:
    """GPT-2's table: byte b -> a printable character (printable Latin-1 bytes stand for
    themselves, the rest are moved to 256 and up), the one the ByteLevel step uses."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def _added(token_id: int, content: str) -> dict:
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True}


def bpe_json(tok) -> dict:
    chars = byte_chars()
    names = [EOS_LABEL] + chars  # id -> token string
    merges = []
    for a, b in tok.merges.tolist():
        merges.append([names[a], names[b]])
        names.append(names[a] + names[b])
    specials = [(EOS, EOS_LABEL)] + [(tok.special_ids[s], s) for s in tok.specials]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_added(i, s) for i, s in specials],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": bpe.PIECES.pattern}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {**{n: i for i, n in enumerate(names)},
                            **{s: i for i, s in specials}},
                  "merges": merges},
    }


def gguf_bpe_json(tok) -> dict:
    """A GGUF file's byte-level BPE (pretrained.tokenizer.GGUFTokenizer): its tokens are
    already written in the ByteLevel step's alphabet."""
    specials = sorted(tok.special_ids.values())
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_added(i, tok.tokens[i]) for i in specials],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level]},
        "post_processor": None,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tok.tokens)},
                  "merges": tok.merges()},
    }


def chars_json(tok) -> dict:
    vocab = {EOS_LABEL: EOS, **{c: i for i, c in enumerate(tok.chars, 1)}}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_added(EOS, EOS_LABEL)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[\\s\\S]"}, "behavior": "Isolated",
                          "invert": False},
        "post_processor": None,
        "decoder": {"type": "Fuse"},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": EOS_LABEL},
    }


def gguf_config(tok, template=None) -> dict:
    """tokenizer_config.json of a GGUF file's tokenizer, with its chat template (a
    pretrained.chat.ChatTemplate) when the file has one decodelab reads."""
    name = lambda i: None if i is None else tok.tokens[i]  # noqa: E731
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1_000_000,
              "bos_token": name(tok.bos_id), "eos_token": name(tok.eos_id),
              "pad_token": name(tok.pad_id), "add_bos_token": bool(tok.start_ids),
              "add_eos_token": False, "clean_up_tokenization_spaces": False}
    if template is not None:
        config["chat_template"] = template.jinja()
    return config


def tokenizer_files(tok, template=None) -> dict:
    """{file name: bytes} of the tokenizer's export: tokenizer.json and tokenizer_config.json
    (template: a pretrained model's chat template)."""
    dump = lambda d: (json.dumps(d, ensure_ascii=False, indent=1) + "\n").encode()  # noqa
    if tok.name == "gguf-bpe":
        return {"tokenizer.json": dump(gguf_bpe_json(tok)),
                "tokenizer_config.json": dump(gguf_config(tok, template))}
    body = bpe_json(tok) if tok.name == "bpe" else chars_json(tok)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1_000_000,
              "bos_token": EOS_LABEL, "eos_token": EOS_LABEL, "pad_token": EOS_LABEL,
              "add_bos_token": False, "add_eos_token": False, "split_special_tokens": True,
              "clean_up_tokenization_spaces": False}
    if tok.name == "bpe" and tok.specials:
        config["additional_special_tokens"] = list(tok.specials)
    return {"tokenizer.json": dump(body), "tokenizer_config.json": dump(config)}


class IdsOnly(Tokenizer):
    """The stand-in for a checkpoint that came without a tokenizer decodelab reads: a prompt is
    given as ids, and each token is shown by its id, "<17>". Id 0 is EOS, as everywhere here."""

    name = "ids"
    eos_id = EOS
    start_ids = (EOS,)

    def __init__(self, vocab_size: int):
        self.vocab_size = int(vocab_size)

    def encode(self, text: str) -> list:
        if text:
            raise FieldError("prompt", "Prompt: this checkpoint has no tokenizer decodelab "
                                       "reads, so a prompt is given as token ids (--ids).")
        return []

    def decode(self, ids) -> str:
        return "".join(self.label(i) for i in ids if i != EOS)

    def label(self, token_id: int) -> str:
        return EOS_LABEL if token_id == EOS else f"<{int(token_id)}>"

    def token_bytes(self, token_id: int) -> bytes:
        return b"" if token_id == EOS else self.label(token_id).encode()

    def describe(self) -> str:
        return f"token ids 0-{self.vocab_size - 1} (no tokenizer)"


def _bpe_from(body: dict):
    """decodelab's BPE from a tokenizer.json that has its layout, else None."""
    model = body.get("model") or {}
    vocab, merges = model.get("vocab") or {}, model.get("merges") or []
    names = [EOS_LABEL] + byte_chars()
    if any(vocab.get(n) != i for i, n in enumerate(names)):
        return None
    pairs = []
    for r, m in enumerate(merges):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        ids = (vocab.get(a), vocab.get(b))
        if None in ids or vocab.get(a + b) != bpe.FIRST_MERGE + r:
            return None
        pairs.append(ids)
    first_special = bpe.FIRST_MERGE + len(pairs)
    added = sorted((t["id"], t["content"]) for t in body.get("added_tokens", [])
                   if t.get("id", 0) >= first_special)
    if [i for i, _ in added] != list(range(first_special, first_special + len(added))):
        return None
    return bpe.BPE(np.array(pairs, np.int64).reshape(-1, 2), [c for _, c in added])


def _chars_from(body: dict):
    """decodelab's character tokenizer from a tokenizer.json that has its layout, else None."""
    vocab = (body.get("model") or {}).get("vocab") or {}
    chars = "".join(sorted(c for c in vocab if c != EOS_LABEL))
    if vocab.get(EOS_LABEL) != EOS or any(len(c) != 1 for c in chars) or not chars:
        return None
    tok = CharTokenizer(chars)
    return tok if all(vocab[c] == tok.encode(c)[0] for c in chars) else None


def read_tokenizer(folder, vocab_size: int):
    """(tokenizer, what it is) for a checkpoint folder: decodelab's own BPE or characters when
    its tokenizer.json has their layout (an export of decodelab's), else token ids only."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return IdsOnly(vocab_size), "no tokenizer.json: prompts and output as token ids"
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return IdsOnly(vocab_size), "tokenizer.json is not JSON: token ids only"
    kind = (body.get("model") or {}).get("type")
    tok = _bpe_from(body) if kind == "BPE" else _chars_from(body) if kind == "WordLevel" else None
    if tok is None or tok.vocab_size != vocab_size:
        return IdsOnly(vocab_size), (f"its {kind or 'unknown'} tokenizer is not one decodelab "
                                     f"wrote: token ids only")
    return tok, f"decodelab's {tok.describe()}"
