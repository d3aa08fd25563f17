"""Both models side by side: the same settings (prompt, seed, rules) run once with each model,
start to finish, each summed up with its text, probabilities and cache check."""

from decodelab.core.loops.generate import start as start_generation
from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.errors import FieldError
from decodelab.fields import MODELS

COMPARE_MAX_TOKENS = 500  # the side-by-side run is not cancellable: keep it short


def _summary(run) -> dict:
    checks = [r["cache_diff"] for r in run.records if "cache_diff" in r]
    n = len(run.records)
    return {"text": run.text, "prompt": run.settings.prompt, "finish_reason": run.finish_reason,
            "stop_reason": run.stop_reason, "steps": n,
            "tokens": [{"text": r["token_text"], "prob": r["prob"]} for r in run.records],
            "mean_prob": sum(r["prob"] for r in run.records) / n if n else None,
            "mean_entropy": sum(r["entropy"] for r in run.records) / n if n else None,
            "params": run.model.n_params,
            "cache_max_diff": max(checks) if checks else None,
            "cache_ok": all(r["cache_ok"] for r in run.records) if checks else None}


@endpoint
def _compare(session: Session, req: dict) -> dict:
    """The same settings (prompt, seed, rules) run once with each model, start to finish."""
    runs = {}
    for kind in MODELS:
        run = start_generation(session.library, {**req, "model": kind})
        if run.settings.max_new_tokens > COMPARE_MAX_TOKENS:
            raise FieldError("max_new_tokens", f"Max new tokens: the side-by-side run takes at "
                                               f"most {COMPARE_MAX_TOKENS} per model; got "
                                               f"{run.settings.max_new_tokens}.")
        runs[kind] = _summary(run.run())
    return {"settings": run.settings.to_json(), "greedy": run.rules.is_greedy, "runs": runs}
