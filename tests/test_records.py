"""Card questions: the generator, the grader, the tasks model's JSON answers, the ask contract's
`json` field, JSON mode at a high temperature, and the validity experiment against an
independent recomputation of its runs."""

import json

import pytest
from decodelab.core.rules import jsonshape
from decodelab.core.tasks import records, data as tasks
from decodelab.core.tasks.ask import ask
from decodelab.core.loops.generate import start
from decodelab.core.library import Library
from decodelab.lesson.accuracy import wilson
from decodelab.lesson.shapes import ValidityExperiment, compare, what_is_wrong

from tests.conftest import api

NAMES = ["ada", "grace", "alan", "edsger", "barbara", "donald", "john"]


@pytest.fixture(scope="module")
def library(artifacts):
    return Library(artifacts)


@pytest.fixture(scope="module")
def cards(library):
    return tasks.held_out(library.corpus("tasks").val, "card", 300)


def test_cards_are_seeded_distinct_and_answered_with_the_object_the_question_names():
    a = records.make_cards(NAMES, n=300)
    assert a == records.make_cards(NAMES, n=300) and a != records.make_cards(NAMES, seed=1, n=300)
    assert len({q for q, _ in a}) == 300
    for question, answer in a:
        value = json.loads(answer)
        assert list(value) == ["name", "age", "city"]
        assert value["name"].lower() in NAMES and value["name"][0].isupper()
        assert 1 <= value["age"] <= 99 and value["city"] in records.CITIES
        assert records.true_record(question) == value  # the grader reads the question alone
        assert records.grade(question, value) is True
    # both ways of asking, each phrasing, with and without the final full stop
    quoted = [q for q, _ in a if '"' in q]
    assert 0.4 < len(quoted) / len(a) < 0.6
    assert 0.1 < sum(not q.endswith(".") for q, _ in a) / len(a) < 0.3
    for form in (records.PHRASINGS, records.BARE):
        heads = {p.split("{")[0] for p in form}
        assert {h for q, _ in a for h in heads if q.startswith(h) and h} == {h for h in heads if h}


@pytest.mark.parametrize("question", [
    'Card for "Mary", age 34, from "Oslo".',
    "Card for Mary, age 34, from Oslo.",
    "Card for Mary, age 34, from Oslo",
    "Make a card: Mary, age 34, lives in Oslo.",
    "Card: Mary from Oslo, aged 34",
    "Mary is 34 and lives in Oslo. Write the card.",
    '"Mary" is 34 and lives in "Oslo". Write the card',
])
def test_the_grader_reads_every_phrasing_quoted_or_not(question):
    assert records.true_record(question) == {"name": "Mary", "age": 34, "city": "Oslo"}


def test_a_bare_city_of_several_words_ends_at_the_punctuation():
    assert records.true_record("Card: Ana from Buenos Aires, aged 7.")["city"] == "Buenos Aires"
    assert records.true_record("Card for Ana, age 7, from St. Louis.")["city"] == "St. Louis"
    assert records.true_record("Card for Ana, age 7, from Oslo..") is None


@pytest.mark.parametrize("value, right, why", [
    ({"name": "Ada", "age": 31, "city": "São Paulo"}, True, ""),
    ({"name": "Ada", "age": "31", "city": "São Paulo"}, False,  # a string is not a number
     '"age" is "31", text; the card has 31, a number'),
    ({"age": 31, "name": "Ada", "city": "São Paulo"}, False,  # the card's order
     "its keys are the card's but in another order (age, name, city)"),
    ({"name": "Ada", "age": 31}, False, "its keys are not the card's (no \"city\")"),
    ({"name": "Ada", "age": 31, "city": "Paris"}, False,
     '"city" is "Paris"; the card says "São Paulo"'),
    ({"nom": "Ada", "age": 31, "ville": "São Paulo"}, False,  # made-up keys: not a wrong value
     "its keys are not the card's (made-up keys \"nom\", \"ville\"; no \"name\", \"city\")"),
    (None, False, "it is null, not an object"),
])
def test_the_grader_wants_the_exact_object_and_says_what_is_wrong(value, right, why):
    question = 'Card for "Ada", age 31, from "São Paulo".'
    assert records.grade(question, value) is right
    assert records.grade("What is 1 plus 2?", value) is None
    assert what_is_wrong(records.true_record(question), value) == why


@pytest.mark.quality
def test_the_model_writes_valid_right_cards_for_held_out_questions(library):
    """The bars: greedy, on all held-out cards (about 3,000), valid JSON with every value right
    for at least 95% of those asked with quotes and 90% of those asked without."""
    cards = tasks.held_out(library.corpus("tasks").val, "card", 10**6)
    assert len(cards) > 2500
    counts = {True: [0, 0, 0], False: [0, 0, 0]}  # quoted -> asked, valid, right
    for q in cards:
        out = ask(library, {"question": q, "greedy": True, "max_new_tokens": 40,
                            "cache_check": False})
        c = counts['"' in q]
        c[0] += 1
        c[1] += out["json"]["status"] == "valid"
        c[2] += out["correct"]
    for quoted, (n, valid, right) in counts.items():
        print(f"held-out cards {'with' if quoted else 'without'} quotes: {valid} of {n} valid, "
              f"{right} right")
    assert min(counts[True][0], counts[False][0]) > 1000
    assert counts[True][2] >= 0.95 * counts[True][0]
    assert counts[False][2] >= 0.90 * counts[False][0]


def test_a_new_user_s_card_question_is_answered_and_classified(library):
    out = ask(library, {"question": "Card for Mary, age 34, from Oslo", "greedy": True})
    assert out["expected"] == {"name": "Mary", "age": 34, "city": "Oslo"}
    assert out["json"]["status"] == "valid" and out["correct"], out["answer"]


def test_ask_classifies_cards_and_not_sums(library, cards):
    out = ask(library, {"question": cards[0], "greedy": True, "max_new_tokens": 40})
    assert out["json"]["status"] == "valid"
    assert out["correct"] is (out["json"]["value"] == out["expected"])
    assert out["trace"]["json"] == out["json"]
    cut = ask(library, {"question": cards[0], "greedy": True, "max_new_tokens": 6})
    assert cut["finish_reason"] == "length" and cut["correct"] is False
    assert cut["json"]["status"] == "incomplete" and "budget of 6" in cut["json"]["error"]
    assert jsonshape.classify(cut["answer"])["status"] == "incomplete"
    sums = ask(library, {"question": "What is 12 plus 7?", "greedy": True})
    assert sums["json"] == {"status": None, "error": None, "value": None}
    # not a card question the grader knows, but an answer that opens with "{": classified
    odd = ask(library, {"question": "Card for Mary, age 34, in Oslo", "greedy": True,
                        "max_new_tokens": 5})
    assert odd["answer"].startswith("{") and odd["expected"] is None
    assert odd["json"]["status"] == "incomplete" and odd["correct"] is None
    shaped = ask(library, {"question": "What is 12 plus 7?", "greedy": True, "json_mode": True})
    assert shaped["json"]["status"] in ("valid", "incomplete") and shaped["tool_calls"] == []


def test_json_mode_at_temperature_two_never_writes_malformed_json(library, cards):
    """200 sampled answers at T = 2: with JSON mode and a budget of 400 all of them parse
    (measured: half closed within 34 tokens, the longest took 162; an earlier, weaker model
    wandered for 217 once), never malformed; without it, most are malformed."""
    statuses, free = [], []
    for i in range(200):
        q = cards[i % len(cards)]
        on = ask(library, {"question": q, "temperature": 2.0, "seed": i, "json_mode": True,
                           "max_new_tokens": 400, "cache_check": False})
        statuses.append(on["json"]["status"])
        if i < 60:
            off = ask(library, {"question": q, "temperature": 2.0, "seed": i,
                                "max_new_tokens": 120, "cache_check": False})
            free.append(off["json"]["status"])
    print(f"T = 2, JSON mode: {statuses.count('valid')} of 200 valid; without it "
          f"{free.count('valid')} of {len(free)} valid, {free.count('malformed')} malformed")
    assert "malformed" not in statuses
    assert statuses.count("valid") == 200
    assert free.count("malformed") > 0  # the mask is doing something


def test_the_experiment_equals_a_recomputation_of_every_run(library):
    req = {"temperatures": "0, 2", "budgets": "8, 40", "cards": 2, "samples_per_question": 2,
           "settings": {"seed": 3}}
    result = ValidityExperiment(library, req).run().result()
    questions = tasks.held_out(library.corpus("tasks").val, "card", 2)
    assert result["runs"] == 2 * 2 * 2 * (1 + 2)
    for cell in result["cells"]:
        T = cell["temperature"]
        runs = [start(library, {"model": "transformer", "dataset": "tasks", "prompt": q,
                                "temperature": T, "greedy": T == 0, "seed": 3 + j,
                                "json_mode": cell["json_mode"], "cache_check": False,
                                "max_new_tokens": cell["budget"]}).run()
                for q in questions for j in range(1 if T == 0 else 2)]
        shapes = [r.json_report()["status"] for r in runs]
        assert cell["runs"] == len(runs)
        for status in ("valid", "incomplete", "malformed"):
            assert cell[status] == shapes.count(status), (cell, shapes)
        assert (cell["low"], cell["high"]) == wilson(shapes.count("valid"), len(runs))
        if cell["json_mode"]:
            assert cell["malformed"] == 0
        if cell["budget"] == 8:
            assert cell["valid"] == 0  # a card does not fit in 8 tokens
    assert any(f["kind"] == "budget" for f in result["findings"])


def test_the_four_ways_of_one_card(library, cards):
    ways = compare(library, cards[0], seed=0)
    assert [w["title"] for w in ways] == ["A generous budget", "A tight budget",
                                         "Hot, no grammar", "Hot, JSON mode"]
    assert ways[0]["json"]["status"] == "valid"
    for w in ways:  # each way graded by its own parsed value; a valid wrong one says why
        assert w["right"] == bool(records.grade(cards[0], w["json"]["value"]))
        assert bool(w["wrong"]) == (w["json"]["status"] == "valid" and not w["right"])
    assert ways[1]["json"]["status"] == "incomplete" and ways[1]["finish_reason"] == "length"
    assert ways[3]["json"]["status"] != "malformed"


def test_the_page_endpoints_for_shapes_and_validity(artifacts, cards):
    assert api("setup", {"assets": str(artifacts)}, session="cards")["ok"]
    info = api("setup", {}, session="cards")
    assert info["sample_card"] and records.true_record(info["sample_card"])
    r = api("shapes", {"question": cards[1], "seed": 0}, session="cards")
    assert r["ok"] and len(r["ways"]) == 4
    bad = api("shapes", {"question": "What is 1 plus 2?"}, session="cards")
    assert not bad["ok"] and bad["errors"][0]["field"] == "question"
    bad = api("validity_start", {"budgets": "8, 0, 500", "cards": 0, "temperatures": "hot"},
              session="cards")
    assert not bad["ok"]
    assert {e["field"] for e in bad["errors"]} == {"budgets", "cards", "temperatures"}
    assert api("validity_start", {"cards": 1, "budgets": "30", "temperatures": "0",
                                  "samples_per_question": 1}, session="cards")["ok"]
    done = api("validity_advance", {"budget_ms": 500}, session="cards")
    while not done["done"]:
        done = api("validity_advance", {"budget_ms": 500}, session="cards")
    assert done["result"]["runs"] == 2 and len(done["result"]["cells"]) == 2
