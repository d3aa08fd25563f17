"""End to end in headless Chromium: the lesson around the workbench. The pipeline of a step
(with the same numbers as native Python), the playground's worked numbers, step-through, the
temperature experiment with its metrics, the questions, and all of it by keyboard."""

import json
import math
import re

from decodelab.core.library import Library
from decodelab.lesson import experiment as metrics
from decodelab.lesson import pipeline

from tests.conftest import api, experiment, run_to_end
from tests.e2e.conftest import ROOT, reveal, wait_ready
from tests.e2e.test_page import assert_same_trace, generate, reset, set_fields

ORDERS_DIFFER = dict(Seed=7, Prompt="mar", Temperature=2, Top_k=8, Top_p=0.8)


def number(text):
    """A number as the page shows it: "−1.55", "24.0%", "0.83 ± 0.23" (the part before ±)."""
    text = text.split("±")[0].strip().replace("−", "-")
    return float(text[:-1]) / 100 if text.endswith("%") else float(text)


def near(text, x, digits=2):
    """The page rounds in JavaScript, Python in its own way (they differ on exact halves), so a
    shown number must be within one unit of the last digit shown."""
    shown = number(text)
    unit = 10 ** -digits / (100 if text.strip().split("±")[0].strip().endswith("%") else 1)
    return abs(shown - x) <= unit


def wait_pipeline(page, step):
    """Open the step view's "every rule in order" (as a learner would) and wait for the step."""
    page.locator("#pipeline").evaluate("d => { if (!d.open) d.querySelector('summary').click(); }")
    page.wait_for_selector(f"#pipeline[data-state=ready][data-step='{step}']")
    return page.locator("#pipeline")


def column_titles(page, scope="#pipeline"):
    return [t.strip() for t in page.locator(f"{scope} .pl-table thead .pl-title").all_inner_texts()]


def native_run(settings):
    api("setup", {"assets": str(ROOT / "artifacts")})
    return run_to_end(settings)


# --- the pipeline of a step ----------------------------------------------------------------------

def test_pipeline_shows_every_stage_of_the_selected_step(app):
    reset(app, **ORDERS_DIFFER)
    generate(app)
    app.locator("#text-gen [data-step]").nth(2).click()
    card = wait_pipeline(app, 2)
    assert column_titles(app) == ["Logit", "Softmax", "Temperature", "Top-k", "Top-p", "Final"]
    trace = app.evaluate("() => window.decodelab.trace()")
    step = json.loads(trace)["steps"][2]
    chosen = card.locator(".pl-table tbody tr.is-chosen")
    assert chosen.count() == 1 and "chosen" in chosen.text_content()
    assert near(chosen.locator("td").last.inner_text(), step["prob"], 1)
    stages = card.locator(".pl-stages li").all_inner_texts()
    assert stages[0].startswith("Logits:") and any(s.startswith("Top-k 8") for s in stages)
    assert any(s.startswith("Top-p 0.8") and "crosses the line" in s for s in stages)
    assert any(s.startswith("Renormalised") for s in stages)
    draw = card.locator(".pl-draw figcaption").inner_text()
    assert f"u = {step['u']:.4f}" in draw and "lands in [" in draw
    # cuts are told apart by more than colour: a mark, struck text, words for screen readers
    cut = card.locator(".pl-cell.is-cut").first
    assert "✕" in cut.inner_text() and cut.locator("s").count() == 1
    assert "cut" in cut.text_content()
    assert card.locator(".pl-cell.is-gone").count() > 0  # removed at an earlier stage: "–"


def test_pipeline_numbers_equal_native_python(app):
    reset(app, Dataset="prose", Prompt="The ", Seed=4, Temperature=1.3, Top_k=15, Top_p=0.9,
          Min_p=0.02, Repetition_penalty=1.4, Max_new_tokens=20, Min_new_tokens=3)
    generate(app)
    native = native_run({"dataset": "prose", "prompt": "The ", "seed": 4, "temperature": 1.3,
                         "top_k": 15, "top_p": 0.9, "min_p": 0.02, "repetition_penalty": 1.4,
                         "max_new_tokens": 20, "min_new_tokens": 3})
    assert native["text"] == app.locator("#text-gen").inner_text()
    last = len(native["steps"]) - 1
    assert last >= 7
    for i in (0, 2, 7, last):
        in_page = app.evaluate(f"() => window.decodelab.lesson.explain({i})")
        here = api("explain_step", {"step": i})
        assert in_page["matches_record"] and in_page["token_id"] == native["steps"][i]["token_id"]
        assert_same_trace(in_page, here, tol=1e-9)
    # min new tokens: EOS blocked at the first steps, so the adjusted logits are shown too
    app.locator("#text-gen [data-step]").first.click()
    wait_pipeline(app, 0)
    assert column_titles(app)[:2] == ["Logit", "Adjusted"]
    assert "EOS blocked" in app.locator("#pipeline .pl-table thead").inner_text()
    assert app.locator("#pipeline .pl-phase").inner_text().lower() == "prefill"


def test_both_orders_shown_when_they_keep_different_sets(app):
    reset(app, **ORDERS_DIFFER)
    generate(app)
    trace = json.loads(app.evaluate("() => window.decodelab.trace()"))
    differ = [i for i, s in enumerate(trace["steps"]) if s["orders_differ"]]
    assert differ

    def shown_disagreement(i):  # a candidate kept by one order only is among the rows shown
        e = app.evaluate(f"() => window.decodelab.lesson.explain({i})")
        a, b = (e["pipelines"][o]["final"]["kept"] for o in ("temperature-first", "filter-first"))
        return a != b

    step = next(i for i in differ if shown_disagreement(i))
    app.locator(f"#text-gen [data-step='{step}']").click()
    card = wait_pipeline(app, step)
    box = card.locator(".pl-orders")
    assert "The two orders disagree here" in box.inner_text()
    compare = box.locator("table.pl-compare")
    assert compare.locator("thead").inner_text().split() == ["Candidate", "temperature-first",
                                                             "filter-first"]
    assert "removed" in compare.inner_text()
    # the other order, stage by stage: the filters first, temperature last
    card.get_by_label("filter-first", exact=True).check()
    assert column_titles(app) == ["Logit", "Softmax", "Top-k", "Top-p", "Temperature", "Final"]
    assert "belongs to the order in use" in card.inner_text()
    card.get_by_label("temperature-first (used)", exact=True).check()
    assert column_titles(app)[2] == "Temperature"
    # top-k alone keeps the same set in both orders (temperature never reorders candidates)
    generate(app, Top_p=1)
    app.locator("#text-gen [data-step]").nth(1).click()
    card = wait_pipeline(app, 1)
    assert "Both orders keep the same" in card.locator(".pl-orders").inner_text()
    assert card.locator("table.pl-compare").count() == 0


def test_greedy_pipeline_has_no_draw(app):
    reset(app, Greedy=True, Seed=2, Max_new_tokens=6, Ignore_EOS=True)
    generate(app)
    app.locator("#text-gen [data-step]").nth(3).click()
    card = wait_pipeline(app, 3)
    # Ignore EOS blocks end-of-sequence: the adjusted logits come before softmax
    assert column_titles(app) == ["Logit", "Adjusted", "Softmax", "Greedy", "Final"]
    assert card.locator(".pl-draw").count() == 0
    assert "with no random draw" in card.inner_text()


# --- the playground -------------------------------------------------------------------------------

def playground_final(page):
    rows = page.locator("#pg-view .pl-table tbody tr")
    return [rows.nth(i).locator("td").last.inner_text().strip() for i in range(rows.count())]


def preset(page, label):
    reveal(page, "#pg-presets").get_by_role("button", name=label, exact=True).click()
    page.wait_for_selector("#playground[data-state=ready]")


def test_playground_reproduces_the_worked_numbers(app):
    section = reveal(app, "#playground")
    preset(app, "[2, 1] at T = 0.5, 1, 2")
    sweep = section.locator(".pg-sweep-table")
    assert sweep.locator("thead").inner_text().split() == ["Candidate", "T", "=", "0.5", "T", "=",
                                                           "1", "T", "=", "2"]
    cells = [c.strip() for c in sweep.locator("tbody td").all_inner_texts()]
    assert cells == ["88.1%", "73.1%", "62.2%", "11.9%", "26.9%", "37.8%"]
    # u = 0.8 lands beyond A's 73.1%: sampling need not pick the likeliest
    caption = section.locator(".pl-draw figcaption").inner_text()
    assert "so “B” is chosen" in caption and "It was not the likeliest (“A” was)" in caption

    preset(app, "[0.6, 0.25, 0.15] with top-p 0.8")
    assert playground_final(app) == ["70.6%", "29.4%", "✕ removed"]
    assert "Σ 85.0%" in section.locator(".pl-table").inner_text()
    assert "reaches 0.8" in section.locator(".pl-table").inner_text()

    preset(app, "The same at T = 2: the orders differ")
    box = section.locator(".pl-orders")
    assert "The two orders disagree here" in box.inner_text()
    rows = [r.split() for r in box.locator("tbody tr").all_inner_texts()]
    assert rows == [["C", "23.3%", "✕", "removed"]]  # only where they disagree
    assert "Both keep the 2 likeliest" in box.inner_text()
    assert playground_final(app) == ["46.6%", "30.1%", "23.3%"]
    section.get_by_label("filter-first", exact=True).check()
    assert playground_final(app) == ["60.8%", "39.2%", "✕ removed"]

    preset(app, "Top-k 3, then top-p 0.75")
    assert playground_final(app) == ["57.1%", "42.9%", "✕ removed", "✕ removed"]
    preset(app, "Min-p 0.2")
    assert playground_final(app)[:3] == ["52.6%", "31.6%", "15.8%"]


def test_playground_errors_are_named_next_to_their_fields(app):
    section = reveal(app, "#playground")
    preset(app, "[2, 1] at T = 0.5, 1, 2")
    good = section.locator(".pg-sweep-table").inner_text()
    for label, value, words in (("Numbers", "2, x", "entry 2 is not a number"),
                                ("p (top-p)", "1.5", "Top-p must be a number greater than 0"),
                                ("u (the draw)", "1", "from 0 up to (not including) 1"),
                                ("Compare temperatures", "0.5, -1",
                                 "Compare temperatures: entry 2: Temperature must be")):
        field = section.get_by_label(label, exact=True)
        field.fill(value)
        app.wait_for_selector("#playground[data-state=invalid]")
        described = field.get_attribute("aria-describedby").split()
        messages = " ".join(app.locator(f"#{i}").inner_text() for i in described)
        assert words in messages, (label, messages)
        assert field.get_attribute("aria-invalid") == "true"
        assert section.locator(".pg-sweep-table").inner_text() == good  # the last good result
        preset(app, "[2, 1] at T = 0.5, 1, 2")
        assert field.get_attribute("aria-invalid") is None


# --- step-through ------------------------------------------------------------------------------------

def position(page):
    return page.locator("#st-position").inner_text()


def test_step_through_controls_and_timeline(app):
    reset(app, Seed=3, Max_new_tokens=12, Ignore_EOS=True, Temperature=0.9)
    generate(app)
    card = app.locator("#stepthrough")
    app.wait_for_selector("#stepthrough[data-state=ready]")
    assert card.locator("#st-prefill .st-bar.prefill").count() == 1  # prefill apart from decode
    assert card.locator("#st-decode .st-bar.decode").count() == 11
    button = lambda name: card.get_by_role("button", name=name, exact=True)  # noqa: E731
    button("Reset").click()
    assert position(app) == "Step 1 of 12"
    assert "Step 1 of 12" in app.locator("#inspector").inner_text()
    assert card.locator(".st-bar.is-future").count() == 11  # the rest is held back
    assert app.locator("#text-gen .st-future").count() == 11
    assert "prefill" in app.locator("#step-notes").inner_text()  # the step view says it once
    button("Step").click()
    assert position(app) == "Step 2 of 12"
    assert card.locator(".st-bar[aria-pressed=true]").get_attribute("data-step") == "1"
    wait_pipeline(app, 1)  # the rules in order follow the selection
    assert app.locator("#pipeline-phase").inner_text().lower().startswith("decode")
    # the step, described once: its chance and entropy from its record, surprisal (−ln p) in
    # the timeline's table
    trace = json.loads(app.evaluate("() => window.decodelab.trace()"))["steps"][1]
    stats = dict(zip(app.locator("#stats dt").evaluate_all("els => els.map(e => e.textContent)"),
                     app.locator("#stats dd").all_inner_texts()))
    assert near(stats["Chance"], trace["prob"], 1)
    assert near(stats["Entropy"].replace(" nats", ""), trace["entropy"])
    assert f"{trace['prob'] * 100:.1f}%" in card.locator(".st-bar").nth(1).get_attribute("aria-label")
    app.locator("#inspector").get_by_text("All the steps as a table").click()
    row = app.locator("#st-rows tr").nth(1).locator("td").all_inner_texts()
    assert near(row[3], -math.log(trace["prob"])) and near(row[4], trace["entropy"])
    # play to the end, fast
    card.get_by_label("Speed", exact=True).select_option("10")
    button("Play").click()
    assert button("Pause").is_enabled() and not button("Play").is_enabled()
    app.wait_for_function("() => document.querySelector('#st-position').textContent === 'Step 12 of 12'")
    app.wait_for_function("() => document.querySelector('#st-pause').disabled")
    assert card.locator(".st-bar.is-future").count() == 0
    assert app.locator("#text-gen .st-future").count() == 0
    # pause part-way at a slow speed (a step a second): the position stays. Playing has moved
    # on from step 1 when Pause is pressed; which step it is on depends on how quickly the
    # click arrives, so any step from the second on will do (at this speed, not the last).
    card.get_by_label("Speed", exact=True).select_option("1")
    button("Reset").click()
    button("Play").click()
    app.wait_for_function("""() => {
        const m = /^Step (\\d+) of 12$/.exec(document.querySelector('#st-position').textContent);
        return m && Number(m[1]) >= 2;
    }""")
    button("Pause").click()
    at = position(app)
    # paused: no step is due any more, so nothing can move the position until Play
    assert app.evaluate("() => window.decodelab.lesson.stepper.playing") is False
    assert card.get_attribute("data-playing") is None
    assert position(app) == at
    assert "Paused at step" in app.locator("#st-say").text_content()
    # the timeline's table alternative lists every step
    assert app.locator("#st-rows tr").count() == 12
    # bars can show surprisal instead of probability
    card.get_by_label("Bars show", exact=True).select_option("surprisal")
    assert "nats" in card.locator("#st-scale-top").inner_text()


def test_timeline_and_text_by_keyboard(app):
    reset(app, Seed=5, Max_new_tokens=8, Ignore_EOS=True)
    generate(app)
    app.wait_for_selector("#stepthrough[data-state=ready]")
    app.locator("#st-reset").focus()
    app.keyboard.press("Enter")
    assert position(app) == "Step 1 of 8"
    app.keyboard.press("Tab")  # -> Step
    assert app.evaluate("() => document.activeElement.id") == "st-step"
    app.keyboard.press(" ")
    assert position(app) == "Step 2 of 8"
    bar = app.locator(".st-bar[aria-pressed=true]")
    bar.focus()
    app.keyboard.press("ArrowRight")
    app.keyboard.press("ArrowRight")
    assert position(app) == "Step 4 of 8"
    assert app.evaluate("() => document.activeElement.dataset.step") == "3"
    app.keyboard.press("End")
    assert position(app) == "Step 8 of 8"
    # the focus is visible
    outline = app.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"



SELECTED_BAR_IN_VIEW = """() => {
    const box = document.querySelector('#stepthrough .st-scroll').getBoundingClientRect();
    const bar = document.querySelector('#stepthrough .st-bar[aria-pressed=true]').getBoundingClientRect();
    return bar.left >= box.left && bar.right <= box.right;
}"""


def test_the_timeline_follows_the_selected_step_and_leaves_a_scrolled_timeline_alone(app):
    reset(app, Seed=5, Max_new_tokens=400, Ignore_EOS=True)
    generate(app)
    app.wait_for_selector("#stepthrough[data-state=ready]")
    timeline = app.locator("#stepthrough .st-scroll")
    assert timeline.evaluate("b => b.scrollWidth > 3 * b.clientWidth")  # 400 bars: it scrolls
    app.wait_for_function(SELECTED_BAR_IN_VIEW)  # the last step, where the run ended
    assert timeline.evaluate("b => b.scrollLeft") > 0
    # the learner scrolls back to the start: nothing pulls the timeline back to the selection
    timeline.evaluate("b => { b.scrollLeft = 0; }")
    app.evaluate("() => new Promise(ok => requestAnimationFrame(() => requestAnimationFrame(ok)))")
    app.evaluate("() => new Promise(ok => setTimeout(ok, 100))")
    assert timeline.evaluate("b => b.scrollLeft") == 0
    # a newly selected step is brought into view, from wherever the timeline was scrolled to
    app.locator("#st-reset").click()
    assert position(app) == "Step 1 of 400"
    timeline.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
    app.locator("#st-step").click()
    assert position(app) == "Step 2 of 400"
    app.wait_for_function(SELECTED_BAR_IN_VIEW)
    assert timeline.evaluate("b => b.scrollLeft") < timeline.evaluate("b => b.clientWidth")

# --- the temperature experiment -------------------------------------------------------------------

def run_experiment(page, **fields):
    section = reveal(page, "#experiment")
    for label, value in fields.items():
        section.get_by_label(label, exact=True).fill(str(value))
    section.get_by_role("button", name="Run experiment", exact=True).click()
    page.wait_for_selector("#experiment[data-state=done], #experiment[data-state=invalid]",
                           timeout=60_000)
    return section


def table_cells(section):
    rows = section.locator(".xp-table tbody tr")
    out = {}
    for i in range(rows.count()):
        name = rows.nth(i).locator(".xp-measure").inner_text()
        out[name] = [c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
    return out


def test_experiment_one_run_per_temperature_with_metrics(app):
    reset(app, Dataset="prose", Prompt="The ", Seed=11, Max_new_tokens=120)
    reveal(app, "#xp-mode-single").check()
    section = run_experiment(app, **{"T values": "0.3, 1, 2"})
    assert app.locator("#experiment").get_attribute("data-state") == "done"
    assert "not what the model knows" in section.locator(".xp-takeaway").inner_text()
    titles = section.locator(".xp-sample-title").all_inner_texts()
    assert [t.strip() for t in titles] == ["T = 0.3", "T = 1", "T = 2"]
    assert section.locator(".xp-panel svg").count() == len(metrics.MEASURES)
    native = experiment(Library(ROOT / "artifacts"), {
        "settings": {"dataset": "prose", "prompt": "The ", "seed": 11, "max_new_tokens": 120},
        "temperatures": "0.3, 1, 2"})
    cells = table_cells(section)
    for m in metrics.MEASURES:
        for shown, row in zip(cells[m["label"]], native["rows"]):
            x = row["measures"][m["key"]]["mean"]
            empty = "too few tokens" if m["key"] == "spread" else "–"
            assert shown == empty if x is None else near(shown, x, 1 if "share" in m["key"] else 2), \
                (m["label"], shown, x)
    # what the numbers say: Python's findings, every one on the page as written
    takeaway = section.locator(".xp-takeaway").inner_text()
    assert all(f["text"] in takeaway for f in native["findings"]), (takeaway, native["findings"])
    texts = section.locator(".xp-texts li").evaluate_all("els => els.map(e => e.textContent)")
    assert texts == ["The " + r["texts"][0] for r in native["rows"]]


def test_experiment_repeated_samples_mean_and_spread(app):
    reset(app, Seed=1)
    reveal(app, "#xp-mode-repeated").check()
    section = run_experiment(app, **{"T values": "0.3, 2", "Samples per temperature": 20})
    cells = table_cells(section)
    assert all("±" in c for c in cells["Mean log-prob"])
    assert cells["Different texts"][0].endswith("of 20")
    assert "seeds 1 to 20" in section.locator(".xp-uses").inner_text()
    assert section.locator(".xp-whisker").count() > 0  # spread drawn as whiskers
    native = experiment(Library(ROOT / "artifacts"), {
        "settings": {"dataset": "names", "seed": 1}, "temperatures": "0.3, 2",
        "mode": "repeated", "samples": 20})
    lp = native["rows"][1]["measures"]["mean_logprob"]
    mean, spread = cells["Mean log-prob"][1].split("±")
    assert near(mean, lp["mean"]) and near(spread, lp["sd"])
    # the chart's table alternative is a real table with a caption
    assert "Mean ± spread" in section.locator(".xp-table caption").inner_text()


def test_experiment_errors_are_named(app):
    reset(app, Seed=1)
    section = reveal(app, "#experiment")
    reveal(app, "#xp-mode-repeated").check()
    run_experiment(app, **{"T values": "0.3, hot", "Samples per temperature": 500})
    temps = section.get_by_label("T values", exact=True)
    assert temps.get_attribute("aria-invalid") == "true"
    assert "T values: entry 2: Temperature must be" in section.locator("#xp-temps-error").inner_text()
    assert "from 2 to 200" in section.locator("#xp-samples-error").inner_text()
    # the budget: samples x temperatures x max new tokens
    set_fields(app, Max_new_tokens=1000)
    run_experiment(app, **{"T values": "0.3, 1, 2", "Samples per temperature": 50})
    assert "at most 100,000 tokens" in section.locator("#xp-samples-error").inner_text()
    # a bad setting above: said in words, nothing runs
    set_fields(app, Max_new_tokens=50, Top_p=3)
    run_experiment(app, **{"Samples per temperature": 5})
    assert "First fix the workbench’s settings (Top-p): their messages are next to them, in chapter 1." in section.locator("#xp-status").inner_text()
    reset(app)
    reveal(app, "#xp-mode-repeated").check()


def test_the_experiment_as_it_starts_measures_something_at_every_temperature(fresh_page):
    """The page's first run of the experiment, nothing changed: twenty samples per temperature
    (Python's page defaults), so every measure has a value at every temperature, not "too few
    tokens" or a share of exactly 0% or 100% from one short name."""
    app = fresh_page
    wait_ready(app)
    section = reveal(app, "#experiment")
    assert section.locator("#xp-mode-repeated").is_checked()
    assert section.get_by_label("Samples per temperature", exact=True).input_value() == "20"
    section = run_experiment(app)
    cells = table_cells(section)
    assert all("too few" not in c and c != "–" for c in cells["Spread"]), cells["Spread"]
    assert all(c.endswith("of 20") for c in cells["Different texts"])
    assert section.locator(".xp-panel text", has_text="n/a").count() == 0


# --- questions --------------------------------------------------------------------------------------

def test_questions_give_feedback(app):
    quiz = reveal(app, "#quiz")
    assert quiz.locator("form.q").count() >= 6
    q1 = quiz.locator("#q-knowledge")
    q1.get_by_label("At the lower temperature the model knew more about names.").check()
    q1.get_by_role("button", name="Check answer").click()
    assert "Not quite" in q1.locator(".q-feedback").inner_text()
    assert "same weights" in q1.locator(".q-feedback").inner_text()
    q1.get_by_label("Only how the next character was selected from the model’s scores.").check()
    q1.get_by_role("button", name="Check answer").click()
    assert "Correct" in q1.locator(".q-feedback").inner_text()
    assert q1.locator(".q-choice.is-right").count() == 1
    # the seed's question leads to the measurement that answers it
    link = q1.get_by_role("link", name="Measure it: right answers against temperature")
    assert link.get_attribute("href") == "#accuracy" and app.locator("#accuracy").count() == 1

    q3 = quiz.locator("#q-top_p")
    answer = q3.get_by_label("Your answer (candidates)", exact=True)
    for typed, words in (("abc", "Type a number"), ("2", "has not reached 0.75"), ("3", "Correct")):
        answer.fill(typed)
        q3.get_by_role("button", name="Check answer").click()
        assert words in q3.locator(".q-feedback").inner_text()
    total = quiz.locator("form.q").count()
    assert quiz.locator("#quiz-score").inner_text().startswith(f"2 of {total} right")

    q6 = quiz.locator("#q-kv_bytes")
    q6.get_by_label("Your answer (KiB)", exact=True).fill("131072")
    q6.get_by_role("button", name="Check answer").click()
    assert "Divide by 1024" in q6.locator(".q-feedback").inner_text()

    # "try it" puts the question's numbers into the playground
    q3.get_by_role("button", name="Try it in the playground").click()
    app.wait_for_selector("#playground[data-state=ready]")
    assert app.locator("#pg-values").input_value() == "0.45, 0.25, 0.15, 0.10, 0.05"
    final = playground_final(app)
    assert sum(1 for f in final if f != "✕ removed") == 3


def test_questions_by_keyboard(app):
    q7 = reveal(app, "#q-length")
    first = q7.locator("input[type=radio]").first
    first.focus()
    app.keyboard.press("ArrowDown")  # radios move by arrow key
    app.keyboard.press("ArrowDown")
    assert q7.locator("input:checked").get_attribute("id") == "q-length-2"
    app.keyboard.press("Tab")
    app.keyboard.press("Enter")
    assert "Correct" in q7.locator(".q-feedback").inner_text()


def test_nothing_left_the_origin_and_no_errors(app):
    assert app.guard.blocked == []
    assert app.errors == []


def test_experiment_and_pipeline_modules_are_the_native_ones():
    """The page runs decodelab.lesson.experiment and decodelab.lesson.pipeline: no module of the
    page computes a distribution of its own (turning a step's log-probability, as Python gave
    it, into a percentage is the only exponential)."""
    modules = sorted((ROOT / "web").rglob("*.js"))
    assert len(modules) > 40
    for path in modules:
        text = path.read_text()
        assert "softmax(" not in text, path
        assert re.findall(r"Math\.exp\((?![\w.]*logprob\))", text) == [], path
    assert callable(pipeline.explain) and callable(metrics.Experiment)
