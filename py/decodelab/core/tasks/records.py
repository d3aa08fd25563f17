"""Record questions: answers with a shape, which a reader can check character by character.

A card question names a person, an age and a city, in one of several phrasings and orders; the
answer is one JSON object with the three fields in a fixed order:

    <|question|>Card for Ada, age 31, from Paris.<|answer|>{"name": "Ada", "age": 31, "city": "Paris"}

The names come from the names corpus (capitalised), the ages are 1 to 99, and the cities are the
list below (facts, no third-party text; a few have letters outside ASCII, so an answer can hold
a character that a BPE token splits). The model has to copy three values into the right fields,
and the grader knows the right object from the question alone (`true_record`), so held-out
cards can be right, wrong, cut short or not JSON at all (`jsonshape.classify` says which).
"""

import json
import re

import numpy as np

SEED = 2025
N_CARDS = 30_000  # 60% of the tasks data: copying a name needs many (train.py)
CITIES = (
    "Accra", "Addis Ababa", "Amsterdam", "Ankara", "Athens", "Auckland", "Baghdad", "Bangkok",
    "Barcelona", "Beijing", "Beirut", "Belgrade", "Berlin", "Bogota", "Boston", "Brisbane",
    "Brussels", "Bucharest", "Budapest", "Buenos Aires", "Cairo", "Cape Town", "Caracas",
    "Chicago", "Copenhagen", "Dakar", "Delhi", "Denver", "Dhaka", "Dublin", "Edinburgh",
    "Florence", "Geneva", "Glasgow", "Hanoi", "Havana", "Helsinki", "Houston", "Istanbul",
    "Jakarta", "Kabul", "Karachi", "Kyiv", "Kraków", "Kyoto", "Lagos", "Lima", "Lisbon",
    "London", "Los Angeles", "Lyon", "Madrid", "Malmö", "Manila", "Marseille", "Melbourne",
    "Mexico City", "Miami", "Milan", "Montreal", "Moscow", "Mumbai", "Munich", "Nairobi",
    "Naples", "New York", "Osaka", "Oslo", "Ottawa", "Paris", "Perth", "Porto", "Prague",
    "Quito", "Reykjavík", "Riga", "Rio de Janeiro", "Rome", "Santiago", "São Paulo", "Seattle",
    "Seoul", "Seville", "Shanghai", "Singapore", "Sofia", "Stockholm", "Sydney", "Taipei",
    "Tallinn", "Tehran", "Tokyo", "Toronto", "Tunis", "Valencia", "Vancouver", "Venice",
    "Vienna", "Vilnius", "Warsaw", "Wellington", "Zagreb", "Zürich",
)
# {name}, {age}, {city} in several orders: the answer's order is always name, age, city. Each
# phrasing comes with the name and the city in quotes, as they will be in the answer, and without,
# as a person types them. The BPE reads the two differently: '"Ada' is the quote and then "Ada",
# the same tokens as in the answer, while " Ada" is a token with the space in front (" A", "da")
# that the answer never has, so in the bare phrasings the model has to learn that " A" starts what
# it writes as "A". Questions without the final full stop are questions too.
PHRASINGS = (
    'Card for "{name}", age {age}, from "{city}".',
    'Make a card: "{name}", age {age}, lives in "{city}".',
    'Card: "{name}" from "{city}", aged {age}.',
    '"{name}" is {age} and lives in "{city}". Write the card.',
)
BARE = tuple(p.replace('"', "") for p in PHRASINGS)
BARE_SHARE = 0.5  # of the cards, asked without quotes
NO_STOP_SHARE = 0.2  # of the cards, without the final full stop
FIELDS = ("name", "age", "city")


def card_json(name: str, age: int, city: str) -> str:
    """The answer: one object, fields in order, ", " and ": " between them, UTF-8 kept as is."""
    return json.dumps({"name": name, "age": age, "city": city}, ensure_ascii=False)


def make_cards(names: list, seed: int = SEED, n: int = N_CARDS) -> list:
    """n distinct cards as (question, answer) from a seeded generator; names as in the corpus
    (lower case) are capitalised."""
    pool = sorted({x.strip().capitalize() for x in names if x.strip().isalpha()})
    if not pool:
        raise ValueError("record questions need a list of names")
    rng = np.random.default_rng(seed)
    seen, out = set(), []
    while len(out) < n:
        name = pool[int(rng.integers(len(pool)))]
        age = int(rng.integers(1, 100))
        city = CITIES[int(rng.integers(len(CITIES)))]
        phrasing = PHRASINGS[int(rng.integers(len(PHRASINGS)))]
        bare, no_stop = rng.random(2) < (BARE_SHARE, NO_STOP_SHARE)
        if (name, age, city) in seen:
            continue
        seen.add((name, age, city))
        question = (phrasing.replace('"', "") if bare else phrasing).format(
            name=name, age=age, city=city)
        if no_stop:
            question = question.removesuffix(".")
        out.append((question, card_json(name, age, city)))
    return out


def _pattern(phrasing: str):
    out = re.escape(phrasing.removesuffix(".")) + r"\.?"
    for field, rx in (("name", r"(?P<name>[A-Z][a-z]+)"), ("age", r"(?P<age>[1-9][0-9]?)"),
                      ("city", r"(?P<city>[^\W\d_](?:[\w .'-]*?[^\W\d_])?)")):
        out = out.replace(re.escape("{" + field + "}"), rx)
    return re.compile(out)


PATTERNS = tuple(_pattern(p) for p in PHRASINGS + BARE)


def true_record(question: str):
    """The object a card question asks for ({"name", "age", "city"}), or None for other text.
    Any capitalised name and any city work, not just the ones in the data."""
    for pattern in PATTERNS:
        m = pattern.fullmatch(question.strip())
        if m:
            return {"name": m["name"], "age": int(m["age"]), "city": m["city"]}
    return None


def grade(question: str, value) -> bool | None:
    """True when the parsed answer is exactly the right object: its fields in the card's order,
    each value right and of the right type (31, not "31"); False when not; None when the
    question is not a card question."""
    truth = true_record(question)
    if truth is None:
        return None
    return isinstance(value, dict) and list(value) == list(FIELDS) and value == truth and all(
        type(value[k]) is type(truth[k]) for k in FIELDS)
