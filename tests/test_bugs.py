"""Break it on purpose: every injected bug is caught by its check, the correct cache passes the
same checks, and the normal generation path never reaches a bug."""

import json
import os
import re
import subprocess
import sys

import pytest
from decodelab.core.models.base import Model
from decodelab.core.models.kvcache import KVCache
from decodelab.core.library import Library
from decodelab.errors import FieldError
from decodelab.lesson import bugs
from decodelab.lesson.batch import batch_run

from tests.conftest import ROOT, api
from tests.test_kvcache import make_model

CACHE_BUGS = [b for b, spec in bugs.BUGS.items() if spec.check == "cache"]


@pytest.fixture(scope="module")
def library(artifacts):
    return Library(artifacts)


def test_there_are_five_bugs_each_with_a_label_a_check_and_a_sentence():
    assert set(bugs.BUGS) == {"frozen-position", "token-twice", "no-causal-mask", "dropout-on",
                              "unmasked-padding"}
    assert bugs.BUG_IDS[0] == "none"  # the selector starts switched off
    for spec in bugs.BUGS.values():
        assert spec.check in ("cache", "batch")
        assert spec.label and len(spec.what_went_wrong.split()) > 15


@pytest.mark.parametrize("kind", ["mha", "gqa", "mqa"])
@pytest.mark.parametrize("bug", CACHE_BUGS)
def test_each_cache_bug_fails_the_live_cache_check(kind, bug):
    model = make_model(kind, context=24)
    for prompt in ([1, 2, 3], [4, 4, 7, 1, 9]):
        clean = bugs.run_bug(model, "none", prompt, 8, seed=2)["cache"]
        broken = bugs.run_bug(model, bug, prompt, 8, seed=2)["cache"]
        assert clean["ok"] and clean["max_abs_diff"] < Model.check_tolerance["float64"]
        assert not broken["ok"], (kind, bug, broken["per_step"])
        # not a rounding accident: wrong by many orders of magnitude beyond the tolerance
        assert broken["max_abs_diff"] > 1e4 * broken["tolerance"]


@pytest.mark.parametrize("kind", ["mha", "gqa", "mqa"])
def test_padding_without_a_mask_fails_the_batch_check_and_only_on_padded_rows(kind):
    model = make_model(kind, context=24)
    prompts = [[1, 2, 3, 4, 5], [6], []]
    clean = batch_run(model, prompts, 6, seed=1)
    assert clean["ok"] and clean["diff"].max() < 1e-9
    out = bugs.run_bug(model, "unmasked-padding", [], 6, seed=1, batch_prompts=prompts)
    per_row = out["batch"]["diff"].max(axis=0)
    assert not out["batch"]["ok"]
    assert per_row[0] < 1e-9  # the longest prompt has no padding: still right
    assert per_row[1] > 1e-3 and per_row[2] > 1e-3


@pytest.mark.parametrize("dataset,prompt", [("names", "mar"), ("prose", "The cache ")])
def test_every_bug_is_caught_on_the_trained_models(library, dataset, prompt):
    model = library.model("transformer", dataset)
    ids = model.tokenizer.encode(prompt)
    batch = [model.tokenizer.encode(p) for p in ("", prompt[:2], prompt)]
    assert bugs.run_bug(model, "none", ids, 12, seed=5)["cache"]["ok"]
    for bug, spec in bugs.BUGS.items():
        out = bugs.run_bug(model, bug, ids, 12, seed=5, batch_prompts=batch)
        result = out["cache"] if spec.check == "cache" else out["batch"]
        assert not result["ok"], bug
        assert out["what_went_wrong"] == spec.what_went_wrong.format(unit="character")


def test_where_each_bug_shows_up_first():
    """Which step first disagrees follows from what each bug breaks."""
    model = make_model("gqa", context=24, seed=3)
    first_bad = {}
    for bug in CACHE_BUGS:
        per_step = bugs.run_bug(model, bug, [1, 2, 3], 8, seed=0)["cache"]["per_step"]
        first_bad[bug] = next(i for i, d in enumerate(per_step) if d > 1e-6)
    assert first_bad["no-causal-mask"] == 0  # the prefill itself is wrong
    assert first_bad["dropout-on"] == 0  # noise from the first call
    assert first_bad["token-twice"] == 1  # the first decode step feeds the duplicate
    assert first_bad["frozen-position"] == 2  # the first decode's frozen position is still right


def test_the_frozen_position_is_shown_as_the_angles_it_put_on_the_keys():
    """The dials: per decode step the position it should have had and the one it got, as the
    fastest pair's angle (one radian per position) and the slowest's, in degrees; the first
    decode is right, then each step falls a radian further behind. Recomputed here."""
    import math

    model = make_model("gqa", context=24, seed=3)
    prompt = [1, 2, 3]
    out = bugs.run_bug(model, "frozen-position", prompt, 8, seed=0)
    rot = out["rotations"]
    D, theta = model.cfg.head_dim, model.cfg.rope_theta
    assert rot["degrees_per_position"] == pytest.approx(180 / math.pi)
    assert rot["slowest_degrees_per_position"] == pytest.approx(
        math.degrees(theta ** (-(D - 2) / D)))
    rows = rot["rows"]
    assert [r["step"] for r in rows] == [2, 3, 4, 5]  # step 1 is the prefill
    for k, r in enumerate(rows):
        assert (r["right"], r["used"]) == (len(prompt) + 1 + k, len(prompt) + 1)  # after EOS, prompt
        assert r["right_deg"] == pytest.approx(math.degrees(r["right"]) % 360)
        assert r["used_deg"] == pytest.approx(math.degrees(r["used"]) % 360)
    # the first wrong step is the first failing one, and the sentence names it and its angles
    per_step = out["cache"]["per_step"]
    assert next(i for i, d in enumerate(per_step) if d > 1e-6) + 1 == rows[1]["step"]
    assert f"At step {rows[1]['step']}" in rot["sentence"]
    assert f"{rows[1]['used_deg']:.0f}\u00b0" in rot["sentence"] and "57\u00b0 short" in rot["sentence"]
    assert "rotations" not in bugs.run_bug(model, "token-twice", prompt, 4)


def test_dropout_left_on_is_not_even_consistent_with_itself():
    model = make_model("mha", context=24)
    a = bugs.run_bug(model, "dropout-on", [1, 2], 6, seed=1)["cache"]["per_step"]
    b = bugs.run_bug(model, "dropout-on", [1, 2], 6, seed=2)["cache"]["per_step"]
    assert a != b


def test_the_buggy_classes_really_differ_from_the_correct_ones():
    model = make_model("gqa", context=24)
    assert issubclass(bugs.NoCausalMaskCache, KVCache) and bugs.NoCausalMaskCache.causal_mask \
        is not KVCache.causal_mask
    s = bugs.NoCausalMaskSession(model)
    assert type(s.cache) is bugs.NoCausalMaskCache
    b = bugs.UnmaskedPaddingBatch(model, 2)
    b.prefill([[1, 2, 3], [4]])
    assert b.cache.key_bias is None  # the padding was never recorded


def test_bad_requests_name_the_field():
    model = make_model("gqa", context=24)
    with pytest.raises(FieldError) as e:
        bugs.run_bug(model, "off-by-one", [1], 4)
    assert e.value.field == "bug" and "frozen-position" in e.value.message
    with pytest.raises(FieldError) as e:
        bugs.run_bug(model, "no-causal-mask", [], 4)
    assert e.value.field == "test_prompt"


def test_webapi_break_it_reports_the_failure_and_the_sentence(artifacts):
    api("setup", {"assets": str(artifacts)})
    out = api("break_it", {"bug": "frozen-position", "dataset": "names", "test_prompt": "an",
                           "check_steps": 10, "seed": 1})
    assert out["ok"] and out["check"] == "cache" and not out["cache"]["ok"]
    assert out["what_went_wrong"].startswith("Every decode step was fed at the same position")
    out = api("break_it", {"bug": "unmasked-padding", "dataset": "names", "test_prompt": "",
                           "check_steps": 6, "prompts": ["", "al", "chris"]})
    assert out["ok"] and not out["batch"]["ok"]
    assert [r["ok"] for r in out["batch"]["rows"]] == [False, False, True]
    clean = api("break_it", {"bug": "none", "dataset": "prose", "test_prompt": "The ",
                             "check_steps": 6})
    assert clean["ok"] and clean["cache"]["ok"] and clean["what_went_wrong"] is None
    for request, field, words in (
            ({"bug": "nope"}, "bug", "Bug must be one of none, frozen-position"),
            ({"bug": "token-twice", "test_prompt": "ZZ"}, "test_prompt",
             "Test prompt has characters"),
            ({"bug": "token-twice", "check_steps": 100}, "check_steps",
             "Check steps must be a whole number"),
            ({"bug": "token-twice", "check_steps": 40, "test_prompt": "a" * 40}, "check_steps",
             "context holds"),
            ({"bug": "no-causal-mask", "test_prompt": ""}, "test_prompt", "at least one character"),
            ({"bug": "unmasked-padding", "prompts": ["ab", "cd"]}, "prompts", "differ in length"),
            ({"bug": "unmasked-padding", "prompts": ["a"]}, "prompts", "at least 2 are needed"),
            ({"bug": "token-twice", "dataset": "klingon"}, "dataset", "Dataset must be one of")):
        out = api("break_it", {"dataset": "names", **request})
        assert not out["ok"], request
        assert out["errors"][0]["field"] == field and words in out["errors"][0]["message"], out


def test_the_normal_path_never_loads_or_builds_a_bug(artifacts):
    """Generate through the CLI's and the page's entry points in a fresh interpreter: the bugs
    module is never even imported, and the sessions are the plain correct classes."""
    code = f"""
import json, sys
from decodelab.entry import webapi
from decodelab.core.loops import generate
from decodelab.core.models import kvcache, session
from decodelab.core.library import Library
call = lambda name, req: json.loads(webapi.call(name, json.dumps(req)))
call("setup", {{"assets": {str(artifacts)!r}}})
for ds in ("names", "prose"):
    call("start", {{"model": "transformer", "dataset": ds, "prompt": "a", "seed": 1}})
    while not call("advance", {{"budget_ms": 50}})["done"]:
        pass
    steps = call("trace", {{}})["trace"]["steps"]
    assert steps and all(s["cache_ok"] for s in steps)
assert call("batch_view", {{"dataset": "names", "prompts": ["", "al"]}})["ok"]
model = Library({str(artifacts)!r}).model("transformer", "names")
s = model.session()
assert type(s) is session.Session and type(s.cache) is kvcache.KVCache
print(json.dumps(sorted(m for m in sys.modules if m.startswith("decodelab"))))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    loaded = json.loads(out.stdout)
    assert "decodelab.core.models.transformer" in loaded and "decodelab.lesson.bugs" not in loaded


def test_only_the_break_it_entry_point_refers_to_the_bugs_module():
    uses = re.compile(r"from decodelab\.lesson import[^\n]*\bbugs\b|decodelab\.lesson\.bugs\b"
                      r"|\bbugs\.\w")
    package = ROOT / "py" / "decodelab"
    users = sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                   if p.name != "bugs.py" and uses.search(p.read_text(encoding="utf-8")))
    assert users == []
    text = (package / "entry" / "webapi" / "bugs.py").read_text(encoding="utf-8")
    before, _, after = text.partition("def _break_it(")
    body = after  # the endpoint _break_it is the module's one function
    assert not uses.search(before)
    assert uses.search(body)


def test_the_course_of_a_check_is_told_from_its_numbers():
    tol = 1e-9
    assert bugs.course([1e-15, 2e-15], tol) == ("At every one of the 2 steps the difference "
                                                "stayed within the tolerance 10⁻⁹ (largest "
                                                "2.0 × 10⁻¹⁵).")
    grew = bugs.course([1e-15, 0.1, 0.5, 2.0], tol)
    assert grew.startswith("The check failed first at step 2 and at 3 of the 4 steps")
    assert "grew from 0.1 at step 2 to 2 at step 4" in grew
    shrank = bugs.course([0.9, 0.5, 0.2], tol)
    assert "shrank from 0.9 at step 1 to 0.2 at step 3" in shrank
    held = bugs.course([0.4, 0.5, 0.6], tol)
    assert "held between 0.4 and 0.6" in held
    varied = bugs.course([0.1, 2.0, 0.2], tol)
    assert "went up and down between 0.1 and 2" in varied
    once = bugs.course([1e-15, 0.3, 1e-15], tol)
    assert once.startswith("The check failed first at step 2, at that step only, by 0.3")


@pytest.mark.parametrize("bug", list(bugs.BUG_IDS))
def test_every_bug_reports_the_course_its_own_numbers_show(bug):
    model = make_model("gqa", context=24)
    out = bugs.run_bug(model, bug, [1, 2, 3], 8, seed=2, batch_prompts=[[1, 2, 3], [4]])
    per_step = (out["cache"]["per_step"] if out["check"] == "cache"
                else out["batch"]["diff"].max(axis=1).tolist())
    tolerance = out["cache" if out["check"] == "cache" else "batch"]["tolerance"]
    assert out["course"] == bugs.course(per_step, tolerance)
    failed = [i for i, d in enumerate(per_step) if d > tolerance]
    if failed:
        assert f"failed first at step {failed[0] + 1}" in out["course"]
    else:
        assert bug == "none" and out["course"].startswith("At every one of the 8 steps")


@pytest.mark.parametrize("bug", ["none", "frozen-position", "token-twice", "no-causal-mask",
                                 "dropout-on", "unmasked-padding"])
def test_the_lab_works_on_the_transformer_that_reads_bpe_tokens(artifacts, bug):
    """The batch view and every bug on the BPE model: the clean cache passes its check, each bug
    fails it (a test prompt of several tokens, a batch whose prompts differ in length)."""
    api("setup", {"assets": str(artifacts)})
    out = api("break_it", {"bug": bug, "dataset": "prose", "tokenizer": "bpe",
                           "test_prompt": "The parser reads", "check_steps": 8, "seed": 1,
                           "prompts": ["The", "The parser reads", "A"]})
    assert out["ok"], out
    result = out["batch"] if bug == "unmasked-padding" else out["cache"]
    assert result["ok"] == (bug == "none"), out
    batch = api("batch_view", {"dataset": "prose", "tokenizer": "bpe",
                               "prompts": ["The", "The parser reads"], "batch_steps": 4})
    assert batch["ok"] and all(row["ok"] for row in batch["rows"])  # each row = run alone
    assert batch["max_abs_diff"] <= batch["tolerance"]


def test_the_bugs_garble_a_real_answer(artifacts):
    """Every bug on SmolLM2: its check fails at the real model's own float32 limit, what went
    wrong is told in tokens, and the answer the broken cache makes the model write is not the
    correct cache's, which is the model's own greedy answer (a plain run of the same prompt).
    (The last token fed twice may leave the likeliest token unchanged: the check still fails.)"""
    from decodelab.core.loops.generate import Generation, prepare
    from decodelab.pretrained.files import find_smollm2
    from decodelab.pretrained.model import load

    api("setup", {"assets": str(artifacts)})
    library = __import__("decodelab.entry.webapi", fromlist=["SESSIONS"]).SESSIONS["page"].library
    if not library.has_pretrained():
        library.keep_pretrained(load(find_smollm2()))
    prompt = "The capital of France is"
    settings, model, _ = prepare(library, {"model": "smollm2", "prompt": prompt, "greedy": True,
                                           "max_new_tokens": 6})
    plain = Generation(model, settings).run().text
    assert "Paris" in plain
    for bug in bugs.BUG_IDS:
        out = api("break_it", {"bug": bug, "model": "smollm2", "test_prompt": prompt,
                               "check_steps": 6, "seed": 1,
                               "prompts": ["The", "The capital of France is"]})
        assert out["ok"], (bug, out)
        result = out["batch"] if bug == "unmasked-padding" else out["cache"]
        assert result["tolerance"] == 1e-3 and result["ok"] == (bug == "none"), (bug, result)
        if bug == "unmasked-padding":
            continue
        assert out["cache"]["dtype"] == "float32"
        assert out["answers"]["correct"] == plain
        if bug == "none":
            assert out["answers"]["broken"] is None and out["what_went_wrong"] is None
        else:  # the last token fed twice moves the logits (by ~5) but may keep their order
            assert out["answers"]["broken"] != plain or bug == "token-twice", bug
            assert "character" not in out["what_went_wrong"], out["what_went_wrong"]
    refused = api("break_it", {"bug": "token-twice", "model": "smollm2", "test_prompt": "",
                               "check_steps": 6})
    assert not refused["ok"] and refused["errors"][0]["field"] == "test_prompt"
    assert "no token of its own" in refused["errors"][0]["message"]


def test_the_real_model_s_check_is_kept_short(artifacts):
    """Its check is a full pass per step, about a second each in the page: the steps are capped,
    by name, for SmolLM2 alone."""
    from decodelab.pretrained.files import find_smollm2
    from decodelab.pretrained.model import load

    api("setup", {"assets": str(artifacts)})
    library = __import__("decodelab.entry.webapi", fromlist=["SESSIONS"]).SESSIONS["page"].library
    if not library.has_pretrained():
        library.keep_pretrained(load(find_smollm2()))
    smol = library.pretrained()
    out = api("break_it", {"bug": "none", "model": "smollm2", "test_prompt": "Hi",
                           "check_steps": smol.limits["check_steps"] + 1})
    assert not out["ok"] and out["errors"][0]["field"] == "check_steps"
    assert f"with SmolLM2 at most {smol.limits['check_steps']}" in out["errors"][0]["message"]
    assert api("break_it", {"bug": "none", "dataset": "names", "test_prompt": "an",
                            "check_steps": 40})["ok"]  # the trained models keep their range
