"""The widget inside the big learning platforms, each played by a host page on another origin
that implements the platform's documented side of its protocol (tests/e2e/hosts/):

- Canvas: the iframe asks for its height with {subject: "lti.frameResize", height};
- Open edX: a JSInput problem grades the iframe over jschannel (getGrade, getState, setState);
- any page: the widget's own messages for the quiz (get-grade, get-state, set-state).
"""

import json
import re
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import BOOT_TIMEOUT_MS, wait_seen

DOCS = Path(__file__).resolve().parents[2] / "docs" / "embedding.md"


def frame_of(page, part="index.html"):
    deadline = time.monotonic() + BOOT_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        for frame in page.frames:
            if frame.url.startswith("http://localhost") and part in frame.url:
                return frame
        page.wait_for_timeout(100)
    raise AssertionError(f"no frame {part}")


def test_canvas_sizes_the_frame_the_widget_asks_for(open_host):
    page = open_host("canvas.html")
    frame = frame_of(page)
    frame.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    frame.wait_for_function("() => window.decodelab.lastRun")
    frame.evaluate("() => window.decodelab.lastRun")
    # Canvas set the iframe to the height the widget asked for last, which is its content's
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        asked = page.evaluate("() => window.resizes")
        body = frame.evaluate("() => Math.ceil(document.body.getBoundingClientRect().height)")
        box = page.evaluate("() => document.querySelector('iframe').getBoundingClientRect().height")
        if asked and abs(asked[-1] - body) <= 1 and abs(box - body) <= 1:
            break
        page.wait_for_timeout(100)
    assert asked and abs(asked[-1] - body) <= 1 and abs(box - body) <= 1, (asked[-5:], body, box)
    assert body > 400  # the widget, not the 150 px an iframe has by default
    assert len(asked) >= 2  # the poster asked first, then the widget as it grew
    # Canvas's replies are not the widget's messages: ignored, without an error
    assert page.evaluate("() => window.replies") == len(asked)
    assert frame.evaluate("() => window.decodelab.embed.ignored") >= 1
    assert page.errors == []


def test_open_edx_grades_saves_and_restores_a_question_across_origins(open_host, host_url):
    page = open_host("edx.html")
    frame = frame_of(page)
    frame.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    page.wait_for_function("() => window.edx.ready()")
    # one question, chosen by the link, and nothing else
    forms = frame.locator("#quiz-list form:visible")
    assert forms.count() == 1 and forms.first.get_attribute("id") == "q-greedy"
    assert not frame.locator("#generate").is_visible()

    # nothing answered: the grade says so
    empty = json.loads(json.loads(page.evaluate("() => window.edx.submit()"))["answer"])
    assert empty["right"] == 0 and empty["total"] == 1 and empty["answered"] == 0

    # the learner picks the right answer and checks it; the platform submits
    frame.get_by_label(re.compile("^It is still a random draw")).check()
    frame.get_by_role("button", name="Check answer").click()
    submitted = json.loads(page.evaluate("() => window.edx.submit()"))
    answer, state = json.loads(submitted["answer"]), json.loads(submitted["state"])
    assert answer == {"right": 1, "total": 1, "answered": 1, "score": 1,
                      "questions": [{"id": "greedy", "answer": 2, "correct": True}]}
    assert state == {"version": 1, "answers": {"greedy": 2}, "checked": ["greedy"]}
    assert page.evaluate("() => window.edx.calls") == ["getGrade", "getState", "getGrade", "getState"]

    # the grader of docs/embedding.md's recipe, run as written, on what the platform sends
    recipe = re.search(r"<script type=\"loncapa/python\">\n(.*?)</script>", DOCS.read_text(), re.S).group(1)
    scope = {}
    exec(recipe, scope)
    assert scope["check_quiz"](None, page.evaluate("() => window.edx.submitted")) \
        == {"ok": True, "msg": "1 of 1 right."}
    assert scope["check_quiz"](None, json.dumps({"answer": json.dumps(empty), "state": "{}"}))["ok"] is False

    # a new visit: the platform gives the saved state back, and the learner sees their answer
    page.evaluate("(s) => sessionStorage.setItem('edx-state', s)", submitted["state"])
    page.reload()
    frame = frame_of(page)
    frame.wait_for_selector("#q-greedy-2:checked", timeout=BOOT_TIMEOUT_MS)
    assert "Correct" in frame.locator("#q-greedy-feedback").inner_text()
    again = json.loads(page.evaluate("() => window.edx.submit()"))
    assert json.loads(again["answer"]) == answer
    assert page.evaluate("() => window.edx.calls")[0] == "setState"

    # a state that does not fit is refused with a reason, and changes nothing
    with pytest.raises(Exception, match="no question"):
        page.evaluate("() => window.edx.setState(JSON.stringify({answers: {nope: 1}}))")
    assert "There is no question \"nope\"" in page.evaluate("() => window.edx.errors")[-1]
    assert frame.locator("#q-greedy-2").is_checked()
    assert page.errors == []


def test_any_page_can_grade_and_restore_the_quiz_through_the_message_api(open_host):
    page = open_host("quiz.html")
    wait_seen(page, "ready")
    lab = "document.querySelector('decodelab-embed')"
    restored = page.evaluate(f"""() => {lab}.setState(
        {{answers: {{top_p: "3", orders: 1}}, checked: ["top_p"]}})""")
    assert restored["errors"] == []
    grade = page.evaluate(f"() => {lab}.getGrade()")["grade"]
    assert (grade["right"], grade["answered"], grade["total"]) == (1, 2, 2)
    assert [q["correct"] for q in grade["questions"]] == [True, False]
    frame = frame_of(page)
    assert "Correct" in frame.locator("#q-top_p-feedback").inner_text()
    assert frame.locator("#q-orders-feedback").is_hidden()  # given, not checked
    # a learner's check is announced to the page with the grade and the state
    frame.get_by_label(re.compile("^Temperature first, then top-p")).check()
    frame.locator("#q-orders").get_by_role("button", name="Check answer").click()
    answered = wait_seen(page, "answered")[-1]
    assert answered["state"]["checked"] == ["top_p", "orders"]
    # a bad state is named and changes nothing, whatever its names are
    bad = page.evaluate(f"() => {lab}.setState({{answers: {{top_p: 3}}}})")
    assert bad["errors"][0]["message"].startswith("The answer to top_p must be the number as typed")
    assert bad["state"]["answers"]["top_p"] == "3"
    for state in ({"answers": {"constructor": 1}}, {"checked": ["toString"]}):
        reply = page.evaluate(f"(s) => {lab}.setState(s)", state)
        assert reply["errors"] and "There is no question" in reply["errors"][0]["message"], reply
        assert reply["state"]["answers"]["top_p"] == "3" and reply["state"]["checked"] == ["top_p", "orders"]
    assert page.errors == []
