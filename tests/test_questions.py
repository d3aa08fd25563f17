"""The real model's questions (decodelab.pretrained.questions): what is asked, and the string
match that grades an answer."""

from decodelab.pretrained.questions import CAPITALS, MAX_QUESTIONS, real_questions, says


def test_the_questions_alternate_and_every_sum_is_right():
    asked = real_questions(MAX_QUESTIONS)
    assert len(asked) == MAX_QUESTIONS == len(CAPITALS) + 18 * 18
    assert len({a["question"] for a in asked}) == MAX_QUESTIONS  # none asked twice
    assert [a["kind"] for a in asked[:6]] == ["capital", "sum"] * 3
    assert sum(a["kind"] == "capital" for a in asked) == len(CAPITALS)
    for a in asked:
        if a["kind"] == "sum":
            left, right = a["question"].removeprefix("What is ").removesuffix("?").split(" + ")
            assert int(a["expected"]) == int(left) + int(right)
            assert 2 <= int(left) <= 19 and 2 <= int(right) <= 19
    assert real_questions(4) == asked[:4]  # any first n are the same questions
    assert asked[0] == {"question": "What is the capital of France?", "expected": "Paris",
                        "kind": "capital"}


def test_an_answer_is_right_when_it_names_the_answer_as_a_whole_word():
    assert says("The capital of France is Paris.", "Paris")
    assert says("PARIS, of course", "Paris") and says("paris", "Paris")
    assert not says("Parisian cafés are famous.", "Paris")
    assert says("12 + 19 = 31", "31") and says("It is 31.", "31")
    assert not says("12 + 19 = 310", "31") and not says("It is 131", "31")
    assert not says("12 + 19 = 22", "31")
    assert says("The capital of South Korea is Seoul", "Seoul")
    assert not says("", "Paris")
