"""Where corpora and trained models live, and loading them once.

Layout of an assets folder (build.py writes it; the browser worker copies it into Pyodide's
file system after checking every file's hash):

    data/<dataset>.txt        one sequence per line
    data/<dataset>.json       provenance: source, licence, sha256, description
    models/<kind>-<dataset>.npz       a model that reads characters
    models/bpe-<dataset>.npz          a byte-level BPE learned from the dataset
    models/<kind>-<dataset>-bpe.npz   a model that reads that BPE's tokens

Natively, without a folder given, `Library()` takes the first of these places that holds a
corpus (data/*.txt):

    1. $DECODELAB_ASSETS, when set;
    2. the package's own data, decodelab/bundled/ (the wheel from `python3 build.py wheel`
       carries it, and the build fills it in a checkout, so `pip install .` carries it too);
    3. in a source checkout, the build's output, artifacts/ beside py/.
"""

import json
import os
import sys
from pathlib import Path

from decodelab.core.tasks import data as tasks
from decodelab.core.models.bigram import BigramModel
from decodelab.core.tokens.corpus import Corpus, read_corpus
from decodelab.core.tokens.tokenizer import CharTokenizer
from decodelab.errors import FieldError
from decodelab.fields import MODELS, PRETRAINED, check, from_file

PACKAGE_DATA = Path(__file__).resolve().parents[1] / "bundled"  # decodelab/bundled
HOW_TO_BUILD = ("build them with `python3 build.py artifacts` in a source checkout (or install "
                "the wheel from `python3 build.py wheel`, which carries them), or point "
                "$DECODELAB_ASSETS or --assets at a folder holding data/<dataset>.txt")


# The models read from a file rather than trained here, by the Model field's value: name ->
# read(path or None) -> model, raising a FieldError that names the field at fault. A package of
# such models registers its reader when it is imported (decodelab.pretrained registers SmolLM2's),
# so core knows none of them and nothing here imports upwards.
FILE_MODELS = {}


class NotLoaded(FieldError):
    """A right setting that waits for the learner: the real model, chosen but not loaded in the
    page yet. A run is refused with it; a link or a host may still set it (`pending`, which the
    page's checks read). It lives here, not in decodelab.errors, which the training code
    imports: a class there would change every model's key."""

    pending = "load"


def search_path() -> list:
    """The places Library() looks, in order, as (description, folder or None)."""
    env = os.environ.get("DECODELAB_ASSETS")
    places = [("$DECODELAB_ASSETS", Path(env) if env else None),
              ("the package's data", PACKAGE_DATA)]
    checkout = PACKAGE_DATA.parents[2]
    if PACKAGE_DATA.parents[1].name == "py" and (checkout / "build.py").is_file():
        places.append(("the checkout's build output", checkout / "artifacts"))
    return places


def has_corpora(folder) -> bool:
    return folder is not None and any((Path(folder) / "data").glob("*.txt"))


def default_dir():
    """The first folder of search_path() that holds a corpus, or None."""
    for _, folder in search_path():
        if has_corpora(folder):
            return folder
    return None


def nothing_found(root) -> str:
    """Why there are no datasets, naming where they were looked for and how to make them."""
    if root is not None:
        return f"No datasets in {Path(root) / 'data'}/ (no .txt files): {HOW_TO_BUILD}."
    looked = "; ".join(f"{label} ({folder if folder is not None else 'not set'})"
                       for label, folder in search_path())
    return f"No datasets were found; looked in: {looked}. To get them, {HOW_TO_BUILD}."


class Library:
    """The datasets and models available in one assets folder, loaded lazily and cached."""

    def __init__(self, root=None, gguf=None, engine: str = "reference"):
        """root: an assets folder; None takes the first place of search_path() with a corpus
        (when there is none, asking for any dataset says where it looked). gguf: the file the
        pretrained model is read from (default: SmolLM2's, where the build keeps it); engine:
        the arithmetic it runs on (decodelab.pretrained.engines)."""
        self.gguf, self.engine = gguf, engine
        self.given = root is not None
        self.root = Path(root) if root is not None else default_dir()
        self._corpora, self._models, self._custom = {}, {}, {}
        self._custom_models = {}  # models of the learner's own text, never shared
        self._found = None  # the datasets of the folder, once looked up
        self._catalog = None

    def sharing(self) -> "Library":
        """A library on the same folder that shares this one's loaded corpora and models, with
        custom datasets of its own: one Python serving several widgets loads each model once,
        and text one widget trained on stays that widget's."""
        other = Library(self.root, self.gguf, self.engine)
        other.given = self.given
        other._corpora, other._models = self._corpora, self._models
        return other

    def _cache(self, dataset: str) -> dict:
        return self._custom_models if dataset in self._custom else self._models

    def _file(self, folder: str, name: str):
        """A file of the assets folder, or None when there is no folder or no such file."""
        path = None if self.root is None else self.root / folder / name
        return path if path is not None and path.exists() else None

    def datasets(self) -> list:
        """The dataset names; with none at all, a FieldError that says where it looked."""
        if self._found is None:  # the folder's files do not change while it is in use
            self._found = [] if self.root is None else \
                sorted(p.stem for p in (self.root / "data").glob("*.txt"))
        found = self._found
        names = found + [n for n in self._custom if n not in found]
        if not names:
            raise FieldError("dataset", nothing_found(self.root if self.given else None))
        return names

    def own_text(self, dataset: str) -> bool:
        """Is this dataset text the learner gave (it lives only in this Python)?"""
        return dataset in self._custom

    def provenance(self, dataset: str) -> dict:
        if dataset in self._custom:
            return {"name": dataset, "title": "Your text", "licence": "yours",
                    "source": "pasted into the page", "description": "Text you pasted."}
        path = self._file("data", f"{dataset}.json")
        return json.loads(path.read_text(encoding="utf-8")) if path else {}

    def corpus(self, dataset: str) -> Corpus:
        if dataset in self._custom:
            return self._custom[dataset]
        if dataset not in self._corpora:
            path = self._file("data", f"{dataset}.txt")
            if path is None:
                known = ", ".join(self.datasets())  # says where it looked when there are none
                raise FieldError("dataset", f"Dataset must be one of {known}; got {dataset!r}.")
            self._corpora[dataset] = Corpus(dataset, read_corpus(path))
        return self._corpora[dataset]

    def model(self, kind: str, dataset: str, tokenizer: str = "chars"):
        """A model of `kind` trained on `dataset` read by `tokenizer` ("chars" or "bpe");
        FieldErrors name the field at fault and what exists instead. A pretrained kind brings
        its own tokenizer and training: `dataset` and `tokenizer` play no part."""
        if from_file(kind):
            return self.pretrained()
        key = (kind, dataset, tokenizer)
        models = self._cache(dataset)
        if key not in models:
            if kind not in MODELS:
                raise FieldError("model", f"Model must be one of {', '.join(MODELS)}; got {kind!r}.")
            self.corpus(dataset)  # a clear message for an unknown dataset
            if check("tokenizer", tokenizer) != "bpe" and self.bpe_only(dataset):
                raise FieldError("tokenizer", "Tokenizer: the tasks data is read as BPE tokens "
                                              "with special tokens for the question, the answer, "
                                              "a tool call and its result; choose bpe.")
            if check("tokenizer", tokenizer) == "bpe":
                models[key] = self._bpe_model(kind, dataset)
            else:
                loader = self._bigram if kind == "bigram" else self._transformer
                models[key] = loader(dataset)
        return models[key]

    def pretrained(self):
        """The pretrained model, read once from `gguf` or from the file the build keeps."""
        key = ("pretrained", str(self.gguf), self.engine)
        if key not in self._models:
            if self.gguf is None and sys.platform == "emscripten":
                raise NotLoaded("model", "Model: SmolLM2 is not loaded in this page yet; load "
                                         "it first (its card's Load the model, or Load it in "
                                         "the form that asks for it).")
            read = FILE_MODELS.get(PRETRAINED[0])
            if read is None:
                raise FieldError("model", f"Model: {PRETRAINED[0]} is read by decodelab.pretrained,"
                                          f" which this Python has not imported.")
            self._models[key] = read(self.gguf, self.engine)
        return self._models[key]

    def keep_pretrained(self, model) -> None:
        """The pretrained model read elsewhere (the page reads it a part at a time): runs that
        ask for it get this one, and so do the libraries that share this one's models."""
        self.engine = model.engine  # runs ask for the model as it was read
        self._models[("pretrained", str(self.gguf), model.engine)] = model

    def has_pretrained(self) -> bool:
        """Is the pretrained model read already (so asking for it costs nothing)?"""
        return ("pretrained", str(self.gguf), self.engine) in self._models

    def for_settings(self, settings):
        """The model a run with these settings uses."""
        return self.model(settings.model, settings.dataset, settings.tokenizer)

    def _bpe_model(self, kind: str, dataset: str):
        self.tokenizer("bpe", dataset)  # a clear message when the dataset has no BPE
        path = self._file("models", f"{kind}-{dataset}-bpe.npz")
        if path is None:
            raise FieldError("model", f"Model: no {kind} was trained on the BPE tokens of "
                                      f"{dataset!r} (run: python3 build.py artifacts).")
        if kind == "bigram":
            return BigramModel.load(path)
        from decodelab.core.models.transformer import TransformerModel

        return TransformerModel.load(path)

    def _bigram(self, dataset: str):
        path = self._file("models", f"bigram-{dataset}.npz")
        if dataset not in self._custom and path:
            return BigramModel.load(path)
        # counting is cheap: train it now (pasted text, or a folder without models)
        return BigramModel.fit(self.corpus(dataset))

    def _transformer(self, dataset: str):
        from decodelab.core.models.transformer import TransformerModel

        if dataset in self._custom:
            raise FieldError("model", "Model: the transformer is trained at build time and not on "
                                      "pasted text; choose bigram for your own text.")
        path = self._file("models", f"transformer-{dataset}.npz")
        if path is None:
            raise FieldError("model", f"Model: no transformer was trained on {dataset!r} "
                                      f"(run: python3 build.py artifacts); choose bigram.")
        return TransformerModel.load(path)

    def tokenizer(self, name: str, dataset: str):
        """The tokenizer `name` ("chars" or "bpe") of a dataset; a FieldError naming the
        tokenizers that exist when this one does not."""
        name = check("tokenizer", name)
        corpus = self.corpus(dataset)  # a clear message for an unknown dataset
        if name == "chars":
            return CharTokenizer(corpus.chars)
        key = ("bpe", dataset)  # kept beside the models (their keys have three parts)
        models = self._cache(dataset)
        if key not in models:
            path = None if dataset in self._custom else self._file("models", f"bpe-{dataset}.npz")
            if path is None:
                have = [d for d in self.datasets() if self._file("models", f"bpe-{d}.npz")]
                where = (f"learned from the {' and the '.join(have)} data only" if have else
                         "not built here (run: python3 build.py artifacts)")
                raise FieldError("tokenizer", f"Byte-level BPE is {where}: the {dataset} data is "
                                              f"read one character at a time, so with it "
                                              f"Tokenizer must be Characters (chars).")
            from decodelab.core.tokens.bpe import BPE

            models[key] = BPE.load(path)
        return models[key]

    def has_model(self, kind: str, dataset: str, tokenizer: str = "chars") -> bool:
        if dataset in self._custom:
            return kind == "bigram" and tokenizer == "chars"
        if kind == "bigram" and tokenizer == "chars":
            return not self.bpe_only(dataset)  # counted on demand when no file holds it
        suffix = "" if tokenizer == "chars" else f"-{tokenizer}"
        return self._file("models", f"{kind}-{dataset}{suffix}.npz") is not None

    def tokenizers(self, dataset: str) -> list:
        """The tokenizers that have at least one model on this dataset, its own first: BPE
        alone for a dataset whose BPE has the question template's special tokens (the tasks
        data: characters cannot spell its markers), else characters, then BPE if any."""
        bpe = ["bpe"] if any(self._bpe_file(k, dataset) for k in MODELS) else []
        return bpe if self.bpe_only(dataset) else ["chars"] + bpe

    def bpe_only(self, dataset: str) -> bool:
        """Is the dataset read as BPE tokens only (its tokenizer has the question markers)?"""
        if dataset in self._custom or not self._file("models", f"bpe-{dataset}.npz"):
            return False
        return tasks.has_template(self.tokenizer("bpe", dataset))

    def catalog(self) -> dict:
        """{dataset: its tokenizers, its own first}: what `settings.validate` checks against."""
        if self._catalog is None:
            self._catalog = {name: self.tokenizers(name) for name in self.datasets()}
        return self._catalog

    def _bpe_file(self, kind: str, dataset: str) -> bool:
        return dataset not in self._custom and \
            self._file("models", f"{kind}-{dataset}-bpe.npz") is not None

    def add_custom(self, corpus: Corpus):
        """Register a learner's own corpus and train a bigram on it at once."""
        self._custom[corpus.name] = corpus
        self._catalog = None
        self._custom_models.pop(("bigram", corpus.name, "chars"), None)
        return self.model("bigram", corpus.name)
