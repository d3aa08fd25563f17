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
    before = webapi.trace()
    run, experiment = webapi._run, webapi._experiment

    out = json.loads(webapi.warm_up())
    assert out["models"] == ["bigram", "transformer"]
    assert out["steps"] == sum(s["max_new_tokens"] for s in webapi.WARM_UP) and out["ms"] >= 0
    assert webapi.trace() == before  # Export trace still gives the learner's run
    assert webapi._run is run and webapi._experiment is experiment
