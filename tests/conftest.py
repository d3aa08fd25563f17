import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
E2E = ROOT / "tests" / "e2e"


def pytest_collection_modifyitems(config, items):
    """The browser tier is a folder: every test under tests/e2e/ is marked `browser`, so
    `-m "not browser"` never starts Chromium (pyproject.toml lists the tiers). The few that
    hold the page to a clock (a watchdog's deadline, a task's time, a throttled download) say
    `@pytest.mark.alone` themselves."""
    for item in items:
        if E2E in Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)


NAMES = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn",
         "abigail", "emily", "ella", "elizabeth", "camila", "luna", "sofia", "avery", "mila",
         "aria", "scarlett", "penelope", "layla", "chloe", "victoria", "madison", "eleanor"]


@pytest.fixture(scope="session")
def small_model():
    from decodelab.core.models.bigram import BigramModel
    from decodelab.core.tokens.corpus import Corpus

    return BigramModel.fit(Corpus("small", NAMES * 3))


@pytest.fixture(scope="session")
def artifacts():
    """The real corpora and models (build.py makes them once; later runs reuse them)."""
    needed = [ARTIFACTS / "data" / f"{d}.txt" for d in ("names", "prose")] + \
             [ARTIFACTS / "models" / f"{m}-{d}.npz" for d in ("names", "prose")
              for m in ("bigram", "transformer")] + \
        [ARTIFACTS / "models" / "bpe-prose.npz"]
    needed += [ARTIFACTS / "models" / f"{m}-{d}-bpe.npz" for m in ("bigram", "transformer")
               for d in ("prose", "tasks")]
    needed += [ARTIFACTS / "data" / "tasks.txt", ARTIFACTS / "models" / "bpe-tasks.npz"]
    if not all(p.exists() for p in needed):
        subprocess.run([sys.executable, str(ROOT / "build.py"), "artifacts"], check=True)
    return ARTIFACTS


def api(name, request=None, text=None, session="page", sliced=False) -> dict:
    """One request through the worker's entry point (webapi.call), as the page sends it:
    a JSON object in (or raw `text`), the parsed JSON reply out. sliced: as the worker calls it
    (a long call answers "pending" after its first slice); else it runs to its end."""
    import json

    from decodelab.entry import webapi

    body = text if text is not None else json.dumps({} if request is None else request)
    return json.loads(webapi.call(name, body, session, sliced))


def run_to_end(settings=None, session="page") -> dict:
    """Start a run, advance it in batches until it is done, and return its trace."""
    started = api("start", settings or {}, session=session)
    assert started["ok"], started
    while not api("advance", {"budget_ms": 500}, session=session)["done"]:
        pass
    return api("trace", session=session)["trace"]


def experiment(library, req) -> dict:
    """A whole temperature experiment at once (the page runs it in batches)."""
    from decodelab.lesson.experiment import Experiment

    return Experiment(library, req).run().result()


def decode_distribution(z, **rules):
    """(p_temp, kept, p_final) that the rules make of logits z."""
    import numpy as np
    from decodelab.core.rules import sampling

    d = sampling.decide(np.asarray(z, dtype=np.float64), sampling.Rules(**rules))
    return d.p_temp, d.kept, d.p_final


@pytest.fixture
def float64_steps(monkeypatch):
    """transformers' Llama with its two float32 steps in float64: the norm computed in its
    input's dtype, and the rotation tables decodelab's (sin without decodelab's folded sign).
    (tests/test_hf.py says why; the reference tier's tests use it.)"""
    import numpy as np
    import torch
    from decodelab.core.models import layers
    from transformers.models.llama import modeling_llama

    def norm(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                              + self.variance_epsilon))

    def rotary(self, x, position_ids):
        cfg = layers.Config(vocab_size=2, n_embd=self.config.head_dim * 2, n_head=2,
                            n_kv_head=1, rope_theta=self.config.rope_parameters["rope_theta"])
        n = int(position_ids.max()) + 1
        cos, sin = (t.copy() for t in layers.rope_tables(cfg, np.float64, n))
        sin[:, :cfg.head_dim // 2] *= -1
        pick = lambda t: torch.from_numpy(t)[position_ids].to(x.dtype)  # noqa: E731
        return pick(cos), pick(sin)
    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", norm)
    monkeypatch.setattr(modeling_llama.LlamaRotaryEmbedding, "forward", rotary)
