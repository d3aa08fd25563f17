"""decodelab's tokenizers as the `tokenizer.json` Hugging Face's tokenizers library reads, so that
`AutoTokenizer.from_pretrained(DIR)` encodes any text to the ids decodelab gives.

Byte-level BPE: the same pieces (decodelab's split pattern, as a regex the library runs), then
bytes shown as printable characters (the library's ByteLevel step, GPT-2's byte-to-character
table), then the merges by rank. decodelab's ids differ from GPT-2's (EOS is 0 and byte b is
b + 1), so the vocabulary lists every id explicitly. Characters: one token per character, a
word-level vocabulary over single characters.

EOS and the tasks data's markers are special tokens. decodelab never reads a marker out of typed
text ("<|call|>" typed is eight characters), so the tokenizer is told not to either
(`split_special_tokens`).

Left out: normalisation (decodelab has none), offsets beyond what the library computes.
"""

import json

from decodelab.core import bpe
from decodelab.core.tokenizer import EOS, EOS_LABEL


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


def tokenizer_files(tok) -> dict:
    """{file name: bytes} of the tokenizer's export: tokenizer.json and tokenizer_config.json."""
    body = bpe_json(tok) if tok.name == "bpe" else chars_json(tok)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1_000_000,
              "bos_token": EOS_LABEL, "eos_token": EOS_LABEL, "pad_token": EOS_LABEL,
              "add_bos_token": False, "add_eos_token": False, "split_special_tokens": True,
              "clean_up_tokenization_spaces": False}
    if tok.name == "bpe" and tok.specials:
        config["additional_special_tokens"] = list(tok.specials)
    dump = lambda d: (json.dumps(d, ensure_ascii=False, indent=1) + "\n").encode()  # noqa
    return {"tokenizer.json": dump(body), "tokenizer_config.json": dump(config)}
