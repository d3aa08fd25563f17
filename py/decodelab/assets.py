"""Where corpora and trained models live, and loading them once.

Layout of an assets folder (build.py writes it; the browser worker copies it into Pyodide's
file system after checking every file's hash):

    data/<dataset>.txt        one sequence per line
    data/<dataset>.json       provenance: source, licence, sha256, description
    models/<kind>-<dataset>.npz

Natively the folder is $DECODELAB_ASSETS, or artifacts/ at the top of the source tree.
"""

import json
import os
from pathlib import Path

from decodelab.bigram import BigramModel
from decodelab.fields import MODELS
from decodelab.corpus import Corpus, read_corpus
from decodelab.fields import FieldError


def default_dir() -> Path:
    env = os.environ.get("DECODELAB_ASSETS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "artifacts"


class Library:
    """The datasets and models available in one assets folder, loaded lazily and cached."""

    def __init__(self, root=None):
        self.root = Path(root) if root is not None else default_dir()
        self._corpora, self._models, self._custom = {}, {}, {}

    def datasets(self) -> list:
        found = sorted(p.stem for p in (self.root / "data").glob("*.txt"))
        return found + [n for n in self._custom if n not in found]

    def provenance(self, dataset: str) -> dict:
        if dataset in self._custom:
            return {"name": dataset, "title": "Your text", "licence": "yours",
                    "source": "pasted into the page", "description": "Text you pasted."}
        path = self.root / "data" / f"{dataset}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    def corpus(self, dataset: str) -> Corpus:
        if dataset in self._custom:
            return self._custom[dataset]
        if dataset not in self._corpora:
            path = self.root / "data" / f"{dataset}.txt"
            if not path.exists():
                known = ", ".join(self.datasets()) or "none (run: python3 build.py artifacts)"
                raise FieldError("dataset", f"Dataset must be one of {known}; got {dataset!r}.")
            self._corpora[dataset] = Corpus(dataset, read_corpus(path))
        return self._corpora[dataset]

    def model(self, kind: str, dataset: str):
        key = (kind, dataset)
        if key not in self._models:
            if kind not in MODELS:
                raise FieldError("model", f"Model must be one of {', '.join(MODELS)}; got {kind!r}.")
            self.corpus(dataset)  # a clear message for an unknown dataset
            loader = self._bigram if kind == "bigram" else self._transformer
            self._models[key] = loader(dataset)
        return self._models[key]

    def _bigram(self, dataset: str):
        path = self.root / "models" / f"bigram-{dataset}.npz"
        if dataset not in self._custom and path.exists():
            return BigramModel.load(path)
        # counting is cheap: train it now (pasted text, or a folder without models)
        return BigramModel.fit(self.corpus(dataset))

    def _transformer(self, dataset: str):
        from decodelab.transformer import TransformerModel

        path = self.root / "models" / f"transformer-{dataset}.npz"
        if dataset in self._custom:
            raise FieldError("model", "Model: the transformer is trained at build time and not on "
                                      "pasted text; choose bigram for your own text.")
        if not path.exists():
            raise FieldError("model", f"Model: no transformer was trained on {dataset!r} "
                                      f"(run: python3 build.py artifacts); choose bigram.")
        return TransformerModel.load(path)

    def has_model(self, kind: str, dataset: str) -> bool:
        if kind == "bigram":
            return True
        return dataset not in self._custom and \
            (self.root / "models" / f"{kind}-{dataset}.npz").exists()

    def add_custom(self, corpus: Corpus):
        """Register a learner's own corpus and train a bigram on it at once."""
        self._custom[corpus.name] = corpus
        self._models.pop(("bigram", corpus.name), None)
        return self.model("bigram", corpus.name)
