"""The byte-level BPE: pieces, training and encoding against independent whole recomputations,
exact round trips of any text, and the merge table of the prose pinned by its hash."""

import pytest
from decodelab.core.tokens import bpe
from decodelab.core.tokens.bpe import BPE, EOS, FIRST_BYTE, FIRST_MERGE
from hypothesis import given, settings
from hypothesis import strategies as st

SAMPLE = ["the cat sat on the mat", "the hat, the bat and the rat!", "that is that",
          "a 12 and 123 and 1234", "naïve café — déjà vu", "snake_case and CamelCase"]


def naive_train(texts, vocab_size):
    """Textbook BPE: recount every pair of every piece from scratch before each merge."""
    words = [[b + FIRST_BYTE for b in piece.encode("utf-8")]
             for text in texts for piece in bpe.split(text)]
    merges = []
    while len(merges) < vocab_size - FIRST_MERGE:
        counts = {}
        for word in words:
            for pair in zip(word, word[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        top = max(counts.values())
        pair = min(p for p, c in counts.items() if c == top)
        new = FIRST_MERGE + len(merges)
        merges.append(pair)
        words = [apply(word, pair, new) for word in words]
    return merges


def apply(word, pair, new):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def naive_encode(merges, text):
    """Every merge in the order it was learned, over each whole piece."""
    ids = []
    for piece in bpe.split(text):
        word = [b + FIRST_BYTE for b in piece.encode("utf-8")]
        for r, pair in enumerate(merges):
            word = apply(word, tuple(pair), FIRST_MERGE + r)
        ids += word
    return ids


@pytest.fixture(scope="module")
def small():
    return BPE(bpe.train(SAMPLE, 300))


def test_pieces_keep_the_leading_space_with_the_word_and_join_back():
    assert bpe.split("Hello world, it's 2024!  ok") == \
        ["Hello", " world", ",", " it", "'s", " 2024", "!", " ", " ok"]
    assert bpe.split("snake_case") == ["snake", "_", "case"]


@given(st.text())
def test_pieces_join_back_to_any_text(text):
    assert "".join(bpe.split(text)) == text


def test_training_equals_recounting_from_scratch_at_every_merge():
    assert bpe.train(SAMPLE, 300).tolist() == [list(p) for p in naive_train(SAMPLE, 300)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet="ab c.1é", max_size=30), min_size=1, max_size=8),
       st.integers(FIRST_MERGE, FIRST_MERGE + 30))
def test_training_equals_recounting_on_random_corpora(texts, vocab_size):
    assert bpe.train(texts, vocab_size).tolist() == [list(p) for p in naive_train(texts, vocab_size)]


def test_the_first_merge_is_the_most_frequent_pair_with_ties_to_the_smaller_ids():
    # "cd" and "ab" 3 times each, "xy" twice: a tie, which goes to the pair with the smaller ids
    merges = bpe.train(["cd"] * 3 + ["xy"] * 2 + ["ab"] * 3, FIRST_MERGE + 3)
    assert [bytes(b - FIRST_BYTE for b in pair).decode() for pair in merges.tolist()] == \
        ["ab", "cd", "xy"]


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_round_trips_and_encodes_as_the_merges_in_order_would(small, text):
    ids = small.encode(text)
    assert small.decode(ids) == text
    assert ids == naive_encode(small.merges.tolist(), text)
    assert EOS not in ids  # text is only ever text


@settings(max_examples=30, deadline=None)
@given(st.text(alphabet="thea", min_size=100, max_size=3000))
def test_a_long_piece_merges_as_the_merges_in_order_would(small, text):
    # one piece of up to 3,000 letters: the heap's order must equal applying every merge in turn
    assert small.encode(text) == naive_encode(small.merges.tolist(), text)


def test_a_10_kb_run_of_one_letter_is_one_piece_and_still_exact(small):
    text = "t" * 10_000  # no space: a single piece, the worst case of a merge loop
    small._cache.clear()
    ids = small.encode(text)
    assert ids == naive_encode(small.merges.tolist(), text) and small.decode(ids) == text


@pytest.mark.parametrize("text", ["", "\x00", "a\x00b", "😀 👍🏽", "日本語のテキスト", "e\u0301",
                                  "Zalgo: z\u0351\u0352a\u0353", "\ufeffBOM", "tab\tnewline\n\r\n"])
def test_text_the_corpus_never_had_round_trips_through_byte_tokens(small, text):
    ids = small.encode(text)
    assert small.decode(ids) == text
    assert b"".join(small.token_bytes(i) for i in ids) == text.encode("utf-8")


def test_a_token_that_is_not_utf8_on_its_own_is_labelled_by_its_bytes(small):
    euro = "€".encode("utf-8")  # e2 82 ac
    assert small.label(euro[0] + FIRST_BYTE) == "<e2>"
    assert small.label(ord("a") + FIRST_BYTE) == "a"
    assert small.label(EOS) == "<eos>"
    # a character split over two tokens decodes to the replacement character on its own
    assert small.decode([euro[0] + FIRST_BYTE]) == "\ufffd"


def test_encoding_reuses_pieces_it_has_seen(small):
    small._cache.clear()
    small.encode("the cat the cat the cat")
    assert set(small._cache) == {"the", " cat", " the"}


def test_a_merge_of_a_token_not_yet_made_is_refused():
    with pytest.raises(ValueError, match="does not exist"):
        BPE([[FIRST_MERGE + 5, 1]])


def test_the_prose_merges_are_the_same_every_build(artifacts):
    from decodelab.core.tokens.corpus import Corpus, read_corpus

    corpus = Corpus("prose", read_corpus(artifacts / "data" / "prose.txt"))
    merges = bpe.train(corpus.train, 1024)
    assert merges.shape == (1024 - FIRST_MERGE, 2)
    assert bpe.merges_hash(merges) == PROSE_1024
    tokens = BPE(merges)
    val = "\n".join(corpus.val)
    assert tokens.decode(tokens.encode(val)) == val
    assert 2.5 < len(val) / len(tokens.encode(val)) < 3.5  # characters per token, held out
    # the build's own copy (python -m decodelab.core.tokens.bpe) is the same table
    built = BPE.load(artifacts / "models" / "bpe-prose.npz")
    assert bpe.merges_hash(built.merges) == PROSE_1024 and built.vocab_size == bpe.VOCAB_SIZE


PROSE_1024 = "858919f9379cca040512be09773717d72bc5144e440b5baa5239396d39e95699"
