"""Stopping across BPE token boundaries: the generation loop fed scripted token streams, held
to an independent search of the whole decoded text after every token.

The streams split multi-byte characters across tokens and put stop strings across two and three
tokens; the reference decodes each prefix of the stream from scratch (its complete characters
only) and looks for the stop strings in it, so it shares no code with the incremental decoder
or the stop matcher.
"""

import random

import numpy as np
import pytest
from decodelab.core.models.base import Model, Session
from decodelab.core.tokens import bpe
from decodelab.core.tokens.bpe import BPE
from decodelab.core.loops.generate import Generation
from decodelab.core.rules.settings import validate
from hypothesis import given, settings
from hypothesis import strategies as st

TEXT = ["the cat sat on the mat", "naïve café, déjà vu", "中文字符 and 中文", "smile 😀😀 ok",
        "end.\n\nnext", "a-b-c a--b"]
TOKENS = BPE(bpe.train(TEXT * 3, 330))


class Scripted(Model):
    """A model that makes greedy decoding emit a fixed list of token ids, then EOS. Its sessions
    log what they are fed: ("prefill", ids), ("decode", id), ("append", ids)."""

    context_size = 10_000

    def __init__(self, tokenizer, ids):
        self.tokenizer, self.ids, self.log = tokenizer, list(ids), []

    def session(self, shift="reread"):
        return _Session(self)


class _Session(Session):
    def __init__(self, model):
        self.model, self.i = model, 0

    def _next(self, fed):
        self.model.log.append(fed)
        z = np.zeros(self.model.tokenizer.vocab_size)
        ids = self.model.ids
        z[ids[self.i] if self.i < len(ids) else 0] = 50.0
        self.i += 1
        return z

    def prefill(self, ids):
        return self._next(("prefill", list(ids)))

    def decode(self, token_id):
        return self._next(("decode", token_id))

    def append(self, ids):
        return self._next(("append", list(ids)))


def stream_for(text: str, rng: random.Random) -> list:
    """Token ids whose bytes are text's UTF-8: at each place either the longest token that
    matches or a single byte, so characters often end up split across tokens."""
    by_bytes = {TOKENS.token_bytes(i): i for i in range(1, TOKENS.vocab_size)}
    data, ids, at = text.encode("utf-8"), [], 0
    while at < len(data):
        n = 1
        if rng.random() < 0.6:
            n = max(k for k in range(1, min(12, len(data) - at) + 1)
                    if data[at:at + k] in by_bytes)
        ids.append(by_bytes[data[at:at + n]])
        at += n
    return ids


def complete_text(raw: bytes) -> str:
    """The characters of raw that are complete (an unfinished one at the end left out)."""
    for cut in range(0, 4):
        try:
            return raw[:len(raw) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    raise AssertionError("not UTF-8")


def reference(ids, stops, include_stop):
    """(visible text, stop string, step, byte in that step's token) by searching the whole
    decoded text after each token; (text, None, None, None) when no stop string appears."""
    for k in range(1, len(ids) + 1):
        text = complete_text(TOKENS.decode_bytes(ids[:k]))
        hits = [(text.find(s), -len(s), s) for s in stops if s in text]
        if hits:
            at, _, stop = min(hits)
            visible = text[:at + len(stop)] if include_stop else text[:at]
            end = len(visible.encode("utf-8"))
            starts = np.cumsum([0] + [len(TOKENS.token_bytes(i)) for i in ids])
            step = max(j for j in range(k) if starts[j] < end) if end else 0
            return visible, stop, step, end - int(starts[step])
    return TOKENS.decode(ids), None, None, None


def run(ids, stops, include_stop=False):
    s = validate({"greedy": True, "max_new_tokens": len(ids) + 1, "stop": list(stops),
                  "include_stop": include_stop, "tokenizer": "bpe"})
    g = Generation(Scripted(TOKENS, ids), s)
    emitted = "".join(r["emit"] for r in g)
    return g, emitted


def check(ids, stops, include_stop):
    g, emitted = run(ids, stops, include_stop)
    visible, stop, step, byte = reference(ids, stops, include_stop)
    assert g.text == visible
    assert emitted == visible  # streamed in pieces, nothing ever taken back
    assert g.stop_reason == (stop if stop is not None else "eos")
    if stop is not None:
        assert g.records[-1]["stop_at"] == {"step": step, "byte": byte}
    for r, token in zip(g.records, ids):
        assert bytes.fromhex(r["token_bytes"]) == TOKENS.token_bytes(token)


def test_a_stop_string_inside_one_token_cuts_the_token():
    word = TOKENS.encode(" cat")
    assert len(word) == 1, "the toy merges make ' cat' one token"
    ids = TOKENS.encode("the") + word + TOKENS.encode(" sat")
    g, emitted = run(ids, ["a"])
    assert g.text == emitted == "the c"
    assert g.stop_reason == "a" and g.finish_reason == "stop"
    assert g.records[-1]["stop_at"] == {"step": len(ids) - 2, "byte": 2}  # " c" of " cat"
    assert g.out.stopper.cut == "at"


def test_a_stop_string_across_three_tokens():
    ids = [TOKENS.encode(c)[0] for c in "xy"] + TOKENS.encode("end") + [
        TOKENS.encode(".")[0], TOKENS.encode("\n")[0], TOKENS.encode("\n")[0]]
    g, _ = run(ids, [".\n\n"])
    assert g.text == "xyend" and g.stop_reason == ".\n\n"
    assert g.records[-1]["stop_at"]["byte"] == len(TOKENS.token_bytes(ids[-4]))


def test_a_character_split_across_tokens_is_held_back_until_it_is_whole():
    raw = "é".encode("utf-8")
    ids = [raw[0] + bpe.FIRST_BYTE, raw[1] + bpe.FIRST_BYTE]
    s = validate({"greedy": True, "max_new_tokens": 3, "tokenizer": "bpe"})
    g = Generation(Scripted(TOKENS, ids), s)
    steps = iter(g)
    first = next(steps)
    assert first["emit"] == "" and first["token_text"] == "<c3>"
    assert next(steps)["emit"] == "é"


def test_an_unfinished_character_at_the_end_shows_as_a_replacement():
    ids = ["中".encode("utf-8")[0] + bpe.FIRST_BYTE]
    s = validate({"greedy": True, "max_new_tokens": 1, "tokenizer": "bpe"})
    g = Generation(Scripted(TOKENS, ids), s).run()
    assert g.finish_reason == "length" and g.text == "\ufffd"


@pytest.mark.parametrize("seed", range(40))
def test_random_streams_against_a_whole_text_search(seed):
    rng = random.Random(seed)
    alphabet = "ab. \n中é😀"
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
    ids = stream_for(text, rng)
    stops = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
             for _ in range(rng.randint(1, 3))]
    check(ids, stops, include_stop=bool(seed % 2))


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="ab .中é😀\n", min_size=1, max_size=25),
       st.lists(st.text(alphabet="ab .中é😀\n", min_size=1, max_size=4), min_size=1,
                max_size=3),
       st.booleans(), st.randoms(use_true_random=False))
def test_any_stream_and_stops_agree_with_the_whole_text_search(text, stops, include, rnd):
    check(stream_for(text, rnd), stops, include)
