"""The worker's Python side, natively: the start-up warm-up leaves no trace in the state a
learner sees, and the page's info carries the tolerance the live cache check is judged by."""

import json

from decodelab import webapi
from decodelab.kvcache import CHECK_TOLERANCE


def test_warm_up_runs_every_model_and_keeps_nothing(artifacts):
    info = json.loads(webapi.setup(str(artifacts)))
    assert info["cache_tolerance"] == CHECK_TOLERANCE["float64"] == 1e-9
    assert json.loads(webapi.start(json.dumps({"seed": 5, "max_new_tokens": 12})))["ok"]
    json.loads(webapi.advance(10_000))
    assert json.loads(webapi.explain_step(json.dumps({"step": 1})))["ok"]  # the lesson's replay
    assert json.loads(webapi.experiment_start(json.dumps(
        {"settings": {"seed": 2, "max_new_tokens": 10}, "temperatures": "0.5, 1"})))["ok"]
    before = webapi.trace()
    run, replay, experiment = webapi._run, webapi._replay, webapi._experiment
    assert replay is not None and experiment is not None

    out = json.loads(webapi.warm_up())
    assert out["models"] == ["bigram", "transformer"]
    assert out["steps"] == sum(s["max_new_tokens"] for s in webapi.WARM_UP) and out["ms"] >= 0
    assert webapi.trace() == before  # Export trace still gives the learner's run
    assert webapi._run is run and webapi._replay is replay and webapi._experiment is experiment


def run_to_end(settings):
    assert json.loads(webapi.start(json.dumps(settings)))["ok"]
    while not json.loads(webapi.advance(10_000))["done"]:
        pass
    return json.loads(webapi.trace())


def test_restore_makes_the_same_run_again_finished_or_stopped(artifacts):
    webapi.setup(str(artifacts))
    settings = {"seed": 8, "max_new_tokens": 60, "stop": ["an"], "top_k": 12, "temperature": 1.3}
    finished = run_to_end(settings)
    webapi.setup(str(artifacts))  # as in a new worker: no run at all
    assert json.loads(webapi.trace()) is None
    out = json.loads(webapi.restore(json.dumps({"settings": finished["settings"],
                                                "steps": len(finished["steps"])})))
    assert out["ok"] and out["text"] == finished["text"]
    assert json.loads(webapi.trace()) == finished
    assert json.loads(webapi.explain_step(json.dumps({"step": 2})))["matches_record"]

    # a run the learner stopped after 7 steps, with text still held back for a stop string
    stopped_settings = {"seed": 3, "max_new_tokens": 500, "ignore_eos": True, "stop": ["zzz"]}
    assert json.loads(webapi.start(json.dumps(stopped_settings)))["ok"]
    for _ in range(7):
        json.loads(webapi.advance(0))  # a budget of 0 runs one step
    json.loads(webapi.cancel())
    stopped = json.loads(webapi.trace())
    assert len(stopped["steps"]) == 7 and stopped["finish_reason"] == "cancelled"
    webapi.setup(str(artifacts))
    out = json.loads(webapi.restore(json.dumps({"settings": stopped["settings"], "steps": 7})))
    assert out["ok"] and out["finish_reason"] == "cancelled"
    assert json.loads(webapi.trace()) == stopped


def test_restore_names_what_is_wrong(artifacts):
    webapi.setup(str(artifacts))
    for request, field in [({"settings": {"seed": 1}, "steps": -1}, "steps"),
                           ({"settings": {"seed": 1}, "steps": "5"}, "steps"),
                           ({"settings": {"top_p": 7}, "steps": 5}, "top_p"),
                           ([1, 2], "settings")]:
        out = json.loads(webapi.restore(json.dumps(request)))
        assert not out["ok"] and out["errors"][0]["field"] == field, (request, out)


def test_restore_in_batches_gives_the_same_run(artifacts):
    webapi.setup(str(artifacts))
    finished = run_to_end({"model": "transformer", "seed": 6, "max_new_tokens": 25,
                           "ignore_eos": True})
    webapi.setup(str(artifacts))
    no_start = json.loads(webapi.restore_advance(10))
    assert not no_start["ok"] and "restore_start" in no_start["errors"][0]["message"]
    request = json.dumps({"settings": finished["settings"], "steps": 25})
    assert json.loads(webapi.restore_start(request)) == {"ok": True, "done": False, "steps": 0}
    progress = []
    while True:
        out = json.loads(webapi.restore_advance(0))  # a budget of 0 runs one step
        if out["done"]:
            break
        progress.append(out["steps"])
    assert progress == list(range(1, 25)) and out["steps"] == 25
    assert json.loads(webapi.trace()) == finished
