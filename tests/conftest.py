import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"

NAMES = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn",
         "abigail", "emily", "ella", "elizabeth", "camila", "luna", "sofia", "avery", "mila",
         "aria", "scarlett", "penelope", "layla", "chloe", "victoria", "madison", "eleanor"]


@pytest.fixture(scope="session")
def small_model():
    from decodelab.bigram import BigramModel
    from decodelab.corpus import Corpus

    return BigramModel.fit(Corpus("small", NAMES * 3))


@pytest.fixture(scope="session")
def artifacts():
    """The real corpora and models (build.py makes them once; later runs reuse them)."""
    needed = [ARTIFACTS / "data" / f"{d}.txt" for d in ("names", "prose")] + \
             [ARTIFACTS / "models" / f"{m}-{d}.npz" for d in ("names", "prose")
              for m in ("bigram", "transformer")]
    if not all(p.exists() for p in needed):
        subprocess.run([sys.executable, str(ROOT / "build.py"), "artifacts"], check=True)
    return ARTIFACTS
