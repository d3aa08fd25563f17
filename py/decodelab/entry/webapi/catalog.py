"""setup: what the page needs to know when Python is up: the field table (with the datasets that
exist), the models, each dataset with its models, tokenizers and loss, the defaults, the
endpoints, and the few numbers the page draws with (candidates per step, the cache check's
tolerance, the experiments' defaults, a held-out card to start from).
"""

from decodelab import __version__
from decodelab.core.kernels.library import use as use_kernels
from decodelab.core.tasks import data as tasks
from decodelab.core.tokens.bpe import FIRST_MERGE
from decodelab.core.loops.generate import TOP_N
from decodelab.core.models.base import Model
from decodelab.core.models.checks import check_tolerance
from decodelab.core.models.kvcache import cache_shape
from decodelab.core.loops.livecheck import CHECK_EVERY
from decodelab.core.rules.settings import Settings
from decodelab.entry.webapi.pretrained import state
from decodelab.entry.webapi.registry import ENDPOINTS, Session, endpoint
from decodelab.errors import FieldError
from decodelab.fields import FIELD_BY_NAME, FIELDS, MODELS, PRETRAINED, from_file
from decodelab.lesson.accuracy import about as accuracy_about
from decodelab.lesson.experiment import PAGE_DEFAULTS as EXPERIMENT_DEFAULTS
from decodelab.lesson.search import ACCEPTANCE_DEFAULTS, BEAM_FIELDS, DRAFT_FIELDS
from decodelab.lesson.serving import LINK_FIELDS as SERVING_LINK_FIELDS
from decodelab.lesson.serving import PRETRAINED_DEFAULTS as SERVING_PRETRAINED
from decodelab.lesson.shapes import DEFAULTS as VALIDITY_DEFAULTS
from decodelab.pretrained.card import card

# the models' words, as the form's choices say them, and what each is in a sentence
MODEL_LABELS = dict(zip(MODELS + PRETRAINED, FIELD_BY_NAME["model"].choice_labels))
MODEL_ABOUT = dict(zip(MODELS + PRETRAINED, FIELD_BY_NAME["model"].choice_help))


def models() -> list:
    """The Model field's choices as the page draws them: the trained models, then the real one
    (read when the learner asks), with its name and the words of its card."""
    return [{"id": m, "label": MODEL_LABELS[m], "about": MODEL_ABOUT[m],
             "pretrained": from_file(m), **(card() if from_file(m) else {})}
            for m in MODELS + PRETRAINED]


def _transformer_info(library, name: str, tokenizer: str = "chars"):
    if not library.has_model("transformer", name, tokenizer):
        return None
    m = library.model("transformer", name, tokenizer)
    cfg = m.cfg
    return {"params": m.n_params, "val_nll": m.info.get("val_nll"), "curve": m.curve,
            "n_head": cfg.n_head, "n_embd": cfg.n_embd, "train_seconds": m.info.get("seconds"),
            # K and V of every layer, as the page's sessions hold them (in its generation dtype)
            **cache_shape(m)}


def held_out_nll(bigram, corpus):
    """A bigram's loss on the corpus's held-out split (None if it has none): as measured when
    it was counted, or now for a model saved without it."""
    if not corpus.val:
        return None
    return bigram.val_nll if bigram.val_nll is not None else bigram.nll(corpus.val)


def dataset_info(library, name: str) -> dict:
    corpus = library.corpus(name)
    tokenizer = library.tokenizers(name)[0]  # the dataset's own (chars, or BPE for tasks)
    model = library.model("bigram", name, tokenizer)
    prov = library.provenance(name)
    return {"name": name, "label": prov.get("title", name),
            "description": prov.get("description", ""), "licence": prov.get("licence", ""),
            "source": prov.get("source", ""),
            "models": [k for k in MODELS if library.has_model(k, name, tokenizer)],
            "transformer": _transformer_info(library, name, tokenizer),
            # the characters a character model knows (a BPE-only dataset has none to list)
            "vocab": model.tokenizer.labels() if model.tokenizer.name == "chars" else [],
            "vocab_words": model.tokenizer.describe(),
            "n_train": len(corpus.train),
            # the held-out loss the page shows for a character model (a BPE one's is in "bpe")
            "n_val": len(corpus.val),
            "val_nll": held_out_nll(model, corpus) if tokenizer == "chars" else None,
            "examples": corpus.train[:5],
            "tokenizers": library.tokenizers(name),
            # a model that calls tools (the tasks data), and a question to start it with
            "tools": tasks.has_template(model.tokenizer),
            "sample_question": (tasks.held_out(corpus.val, "arithmetic", 1) or [None])[0]
            if tasks.has_template(model.tokenizer) else None,
            "bpe": _bpe_info(library, name)}


def _bpe_info(library, name: str):
    """The dataset's BPE models, when it has a tokenizer and any model on it (else None)."""
    if "bpe" not in library.tokenizers(name):
        return None
    tokens = library.tokenizer("bpe", name)
    corpus = library.corpus(name)
    bigram = library.model("bigram", name, "bpe") if library.has_model("bigram", name, "bpe") \
        else None
    # per token; not for the tasks data, whose held-out questions are for the accuracy
    # experiment (and scoring them all at start-up would cost the page a second)
    scored = bigram and corpus.val and not tasks.has_template(tokens)
    return {"models": [k for k in MODELS if library.has_model(k, name, "bpe")],
            "val_nll": held_out_nll(bigram, corpus) if scored else None,
            "vocab_size": tokens.vocab_size, "transformer": _transformer_info(library, name, "bpe"),
            "first_merges": [tokens.label(i) for i in range(FIRST_MERGE, min(FIRST_MERGE + 48,
                                                                             tokens.vocab_size))]}


def sample_card(library):
    if "tasks" not in library.datasets():
        return None
    return (tasks.held_out(library.corpus("tasks").val, "card", 1) or [None])[0]


@endpoint
def _setup(session: Session, req: dict) -> dict:
    """{"assets": folder, "kernels": path or null, "kernels_problem": words} -> what the page
    needs to know: the field table (with the datasets that exist), the models, the datasets,
    the defaults and the endpoints. The page's worker names the kernels' side module it has
    loaded into Python's heap (or what kept it from loading one) before the first model is
    read: every quantized product runs there from then on."""
    library = session.library
    if "kernels" in req or "kernels_problem" in req:
        path, problem = req.get("kernels"), req.get("kernels_problem")
        for name, value in (("kernels", path), ("kernels_problem", problem)):
            if value is not None and not isinstance(value, str):
                raise FieldError("request", f"setup's {name} must be a path or null.")
        use_kernels(path, problem)
    fields = [f.to_json() for f in FIELDS]
    for f in fields:
        if f["name"] == "dataset":
            f["choices"] = library.datasets()
    return {"version": __version__,
            # the trained models, then the real one (read when the learner asks: "pretrained")
            "models": models(),
            "pretrained": state(library),
            "datasets": {n: dataset_info(library, n) for n in library.datasets()},
            "fields": fields, "defaults": Settings().to_json(), "endpoints": list(ENDPOINTS),
            "top_n": TOP_N,  # the likeliest candidates each step record lists
            # the accuracy experiment on each model it runs: defaults, questions, grading
            "accuracy": {m: accuracy_about(m) for m in ("transformer", *PRETRAINED)},
            "serving_pretrained": SERVING_PRETRAINED,  # the serving form's own for a real model
            "validity_defaults": VALIDITY_DEFAULTS,
            "experiment_defaults": EXPERIMENT_DEFAULTS,  # what the temperature experiment starts with
            "acceptance_defaults": ACCEPTANCE_DEFAULTS,  # and the draft's acceptance experiment
            # the settings a search panel owns (its own form; a link may carry them)
            "panel_settings": {"beam": list(BEAM_FIELDS), "speculative": list(DRAFT_FIELDS),
                               "serving": list(SERVING_LINK_FIELDS)},
            # a held-out card question, for the lesson's three answers
            "sample_card": sample_card(library),
            # what the live cache check of a run of a model trained here is judged against
            # (the page draws it): its limit in what those models generate in
            "cache_tolerance": check_tolerance(Model()),
            # and how far behind the text it may fall before it catches up (in steps)
            "cache_check_every": CHECK_EVERY}
