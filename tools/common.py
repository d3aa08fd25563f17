"""What every build module shares: the checkout's paths, messages, hashing, running commands."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY_DIR = ROOT / "py"
PACKAGE_DIR = PY_DIR / "decodelab"
ARTIFACTS_DIR = ROOT / "artifacts"


class BuildError(Exception):
    """A step failed; the message says what and why (printed without a traceback)."""


def say(message: str) -> None:
    print(message, flush=True)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def rel(path: Path) -> str:
    """A path relative to the checkout when it is inside it (for messages)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def human(n_bytes: int) -> str:
    if n_bytes >= 1_000_000:
        return f"{n_bytes / 1_000_000:.1f} MB"
    if n_bytes >= 1_000:
        return f"{n_bytes / 1_000:.1f} kB"
    return f"{n_bytes} B"


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    say("  $ " + " ".join(cmd))
    return subprocess.run(cmd, cwd=ROOT, **kwargs)


def package_file(relative: str):
    """A module of the package loaded from its file alone (py/decodelab/<relative>), without
    importing the package: the build reads a rule the package owns (a recipe, where the cache
    is) before numpy may even be installed. Only for modules that import the standard library."""
    return module_from_file(PACKAGE_DIR / relative)


def module_from_file(path: Path):
    import importlib.util
    import sys

    name = "decodelab_build_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass looks its module up while it is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module
