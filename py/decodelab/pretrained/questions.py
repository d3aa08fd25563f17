"""Questions with one right answer for a real chat model: capitals and small sums.

The accuracy experiment (`lesson.accuracy`) asks them at several temperatures. An answer is
graded by string match: right when the expected answer appears in it as a whole word, in any
case ("The capital of France is Paris." is right for Paris; "Parisian" or "12" inside "120"
are not). The questions alternate between the two kinds, so any first n of them hold both.
Each is asked as the only user message of a chat, after the model's default system message.
"""

import re

# (country, capital): capitals no one disputes, each one name with no accent or alternative
CAPITALS = (
    ("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Germany", "Berlin"),
    ("Spain", "Madrid"), ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Australia", "Canberra"),
    ("Russia", "Moscow"), ("China", "Beijing"), ("Greece", "Athens"), ("Portugal", "Lisbon"),
    ("Norway", "Oslo"), ("Sweden", "Stockholm"), ("Poland", "Warsaw"), ("Ireland", "Dublin"),
    ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Austria", "Vienna"), ("Hungary", "Budapest"),
    ("Thailand", "Bangkok"), ("Cuba", "Havana"), ("Finland", "Helsinki"),
    ("Denmark", "Copenhagen"), ("Turkey", "Ankara"), ("South Korea", "Seoul"),
    ("Vietnam", "Hanoi"), ("Iran", "Tehran"), ("Nigeria", "Abuja"), ("Morocco", "Rabat"),
)
SUM_SEED = 7  # the small sums: a + b with a and b from 2 to 19, in a fixed shuffled order
PAIRS = [(a, b) for a in range(2, 20) for b in range(2, 20)]
MAX_QUESTIONS = len(CAPITALS) + len(PAIRS)


def _sums(n: int) -> list:
    # i -> (97 i + 7) mod 324 is a permutation (97 is prime to 324): the same order everywhere
    order = sorted(range(len(PAIRS)), key=lambda i: (i * 97 + SUM_SEED) % len(PAIRS))
    return [PAIRS[i] for i in order[:n]]


def real_questions(n: int) -> list:
    """The first n questions: [{"question", "expected", "kind"}, ...], a capital then a sum, in
    turn, as long as there are capitals (30 of them; the sums go on). At most MAX_QUESTIONS."""
    n = min(n, MAX_QUESTIONS)
    sums = _sums(n)
    out, c, s = [], 0, 0
    while len(out) < n:
        if len(out) % 2 == 0 and c < len(CAPITALS):
            country, city = CAPITALS[c]
            out.append({"question": f"What is the capital of {country}?", "expected": city,
                        "kind": "capital"})
            c += 1
        else:
            a, b = sums[s]
            out.append({"question": f"What is {a} + {b}?", "expected": str(a + b),
                        "kind": "sum"})
            s += 1
    return out


def says(answer: str, expected: str) -> bool:
    """Whether the answer contains the expected answer as a whole word, in any case."""
    return re.search(rf"(?<!\w){re.escape(expected)}(?!\w)", answer, re.IGNORECASE) is not None
