"""The `tasks` data: arithmetic questions a model can get right or wrong, answered with a tool.

Every example is a question, then an answer that calls the calculator (`tools`), reads its
result and states it:

    <|question|>What is 12 plus 7?<|answer|><|call|>12+7<|/call|><|result|>19<|/result|>The answer is 19.

The six markers are special tokens: single ids after the BPE's merges (`bpe.BPE.specials`). A
person's text never turns into one (`BPE.encode` does not make them), so a question that
contains the characters "<|call|>" cannot pretend to be a tool call: it stays text. A chat model
works the same way, and that is why a chat template is applied to token ids, not pasted into
the prompt as text.

The generator is seeded, so the data is the same on every machine: `make_examples()` draws
distinct questions (the operation and both numbers; each number has one, two or three digits
with equal chance, so short numbers are as common as long ones), words each in one of the
phrasings below, and the corpus split (`corpus.Corpus`) puts a fixed tenth of them aside as
held-out questions the model never trains on.

A model cannot add three-digit numbers in its weights this small, but it can learn to copy
them into a call and copy the result back out: `grade` checks the number in the final sentence
against the true result.

The data also holds record questions (`records`): a card for a person, answered with one JSON
object and no tool call. They are drawn by their own seeded generator and come after the
arithmetic in the corpus, so the arithmetic questions are the same with or without them.
"""

import re

import numpy as np

from decodelab.errors import FieldError

QUESTION, ANSWER, CALL, END_CALL, RESULT, END_RESULT = SPECIALS = (
    "<|question|>", "<|answer|>", "<|call|>", "<|/call|>", "<|result|>", "<|/result|>")
SEED = 2024
N_EXAMPLES = 20_000
OPS = {"plus": ("+", lambda a, b: a + b), "minus": ("-", lambda a, b: a - b),
       "times": ("*", lambda a, b: a * b)}
PHRASINGS = {
    "plus": ("What is {a} plus {b}?", "How much is {a} plus {b}?", "Add {a} and {b}."),
    "minus": ("What is {a} minus {b}?", "How much is {a} minus {b}?", "Subtract {b} from {a}."),
    "times": ("What is {a} times {b}?", "How much is {a} times {b}?", "Multiply {a} by {b}."),
}
FINAL = "The answer is {r}."
NUMBER = re.compile(r"-?\d+")


def draw_number(rng) -> int:
    digits = int(rng.integers(1, 4))
    return int(rng.integers(0, 10**digits))


def make_examples(seed: int = SEED, n: int = N_EXAMPLES) -> list:
    """n distinct questions as dicts: op, a, b, question, call, result, line (the corpus line)."""
    rng = np.random.default_rng(seed)
    seen, out = set(), []
    ops = list(OPS)
    while len(out) < n:
        op = ops[int(rng.integers(len(ops)))]
        a, b = draw_number(rng), draw_number(rng)
        phrasing = PHRASINGS[op][int(rng.integers(len(PHRASINGS[op])))]
        if (op, a, b) in seen:
            continue
        seen.add((op, a, b))
        out.append(example(op, a, b, phrasing))
    return out


def example(op: str, a: int, b: int, phrasing: str) -> dict:
    sign, fn = OPS[op]
    call, result = f"{a}{sign}{b}", str(fn(a, b))
    question = phrasing.format(a=a, b=b)
    line = (f"{QUESTION}{question}{ANSWER}{CALL}{call}{END_CALL}{RESULT}{result}{END_RESULT}"
            + FINAL.format(r=result))
    return {"op": op, "a": a, "b": b, "question": question, "call": call, "result": result,
            "line": line}


def card_line(question: str, answer: str) -> str:
    return f"{QUESTION}{question}{ANSWER}{answer}"


def corpus_lines(names: list) -> list:
    """The tasks data: the arithmetic questions, then the record questions."""
    from decodelab.core.tasks import records

    return [e["line"] for e in make_examples()] + [card_line(q, a)
                                                    for q, a in records.make_cards(names)]


TOOL_LINE = re.compile(re.escape(QUESTION) + "(.*)" + re.escape(ANSWER) + re.escape(CALL) + "(.*)"
                       + re.escape(END_CALL) + re.escape(RESULT) + "(.*)" + re.escape(END_RESULT)
                       + "(.*)")
CARD_LINE = re.compile(re.escape(QUESTION) + "(.*)" + re.escape(ANSWER) + r"(\{.*)")


def parse_line(line: str) -> dict:
    """A corpus line back into its parts: kind "arithmetic" with question, call, result and
    final sentence, or kind "card" with question and answer (the JSON object)."""
    m = TOOL_LINE.fullmatch(line)
    if m is not None:
        return {"kind": "arithmetic", **dict(zip(("question", "call", "result", "final"),
                                                 m.groups()))}
    m = CARD_LINE.fullmatch(line)
    if m is not None:
        return {"kind": "card", "question": m[1], "answer": m[2]}
    raise ValueError(f"not a tasks line: {line[:60]!r}")


def held_out(lines: list, kind: str, n: int) -> list:
    """The questions of one kind among the first lines of a split, n of them at most."""
    out = []
    for line in lines:
        parts = parse_line(line)
        if parts["kind"] == kind:
            out.append(parts["question"])
            if len(out) == n:
                break
    return out


def true_result(question: str):
    """The right answer to a question in one of the phrasings, or None for other text."""
    for op, phrasings in PHRASINGS.items():
        for p in phrasings:
            pattern = re.escape(p).replace(r"\{a\}", r"(?P<a>\d+)").replace(r"\{b\}", r"(?P<b>\d+)")
            m = re.fullmatch(pattern, question.strip())
            if m:
                return OPS[op][1](int(m["a"]), int(m["b"]))
    return None


def stated_number(answer: str):
    """The last whole number in the answer text (the one its final sentence states), or None."""
    found = NUMBER.findall(answer)
    return int(found[-1]) if found else None


def grade(question: str, answer: str):
    """True when the answer states the right result, False when not, None when the question
    has no known result (not one of the phrasings)."""
    truth = true_result(question)
    return None if truth is None else stated_number(answer) == truth


def has_template(tokenizer) -> bool:
    """Whether a tokenizer knows the markers, so a prompt can be wrapped as a question."""
    return all(t in tokenizer.special_ids for t in SPECIALS)


def marker_ids(tokenizer) -> dict:
    """{marker: id} for a tokenizer that has all six markers, else {} (no tool calls)."""
    return {t: tokenizer.special_ids[t] for t in SPECIALS} if has_template(tokenizer) else {}


def question_ids(tokenizer, question: str, field: str = "prompt") -> list:
    """The template: <|question|> + the question's tokens + <|answer|>. The question is encoded
    as text, so markup in it stays text. FieldError for an empty question."""
    if not question.strip():
        raise FieldError(field, "Prompt: the tasks model answers a question, so the prompt must "
                                "be one, e.g. What is 12 plus 7?")
    from decodelab.fields import encode  # asking, not making the data: fields stays out of its key

    ids = tokenizer.special_ids
    return [ids[QUESTION]] + encode(tokenizer, field, question) + [ids[ANSWER]]


def result_ids(tokenizer, reply) -> list:
    """What the runtime appends after a call: <|result|> + the reply's tokens + <|/result|>.
    reply None: only the opening marker (the model must write the result itself)."""
    ids = tokenizer.special_ids
    if reply is None:
        return [ids[RESULT]]
    return [ids[RESULT]] + tokenizer.encode(reply) + [ids[END_RESULT]]


def provenance(lines: list) -> dict:
    import hashlib

    text = "".join(line + "\n" for line in lines)
    return {"name": "tasks", "title": "Arithmetic with a calculator",
            "source": f"generated by decodelab.core.tasks.data (seed {SEED}, {len(lines)} questions)",
            "licence": "generated data, no third-party content",
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "sequences": len(lines), "characters": sum(len(line) for line in lines),
            "description": "Questions such as \"What is 12 plus 7?\" with whole numbers from 0 to "
                           "999, each answered by a calculator call, its result and a sentence "
                           "that states it; and record questions such as \"Card for Ada, age "
                           "31, from Paris.\" answered with one JSON object (names from the "
                           "names corpus). The markers are special tokens."}


def main(argv=None) -> int:
    """python -m decodelab.core.tasks.data corpus --names NAMES.txt --out FOLDER: write tasks.txt and
    tasks.json.
    python -m decodelab.core.tasks.data tokenizer --merges BPE.npz --out FILE.npz: that BPE with the six
    markers added as special tokens (build.py runs both)."""
    import argparse
    import json
    from pathlib import Path

    p = argparse.ArgumentParser(prog="python -m decodelab.core.tasks.data", description=main.__doc__)
    p.add_argument("what", choices=("corpus", "tokenizer"))
    p.add_argument("--out", required=True)
    p.add_argument("--merges", help="tokenizer: the BPE whose merges the tasks model reads")
    p.add_argument("--names", help="corpus: the names corpus, one name per line")
    args = p.parse_args(argv)
    if args.what == "corpus":
        from decodelab.core.tokens.corpus import read_corpus, write_corpus

        if not args.names:
            p.error("corpus needs --names")
        lines = corpus_lines(read_corpus(args.names))
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_corpus(out / "tasks.txt", lines)
        (out / "tasks.json").write_text(json.dumps(provenance(lines), indent=2) + "\n",
                                        encoding="utf-8")
        print(f"tasks: {len(lines)} questions written to {out}")
        return 0
    from decodelab.core.tokens.bpe import BPE

    if not args.merges:
        p.error("tokenizer needs --merges")
    BPE.load(args.merges).with_specials(SPECIALS).save(args.out, "tasks")
    print(f"tasks: tokenizer with {len(SPECIALS)} special tokens written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
