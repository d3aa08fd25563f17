"""Where kernels.c is and what its builds are called: the one rule the package (which opens a
build) and build.py (which makes one, before numpy may be installed) both follow. Standard
library only."""

import hashlib
from pathlib import Path

SOURCE = Path(__file__).with_name("kernels.c")
BUILT = Path(__file__).with_name("built")  # native builds, made by build.py (not committed)
WASM_NAME = "decodelab_kernels.so"  # the side module's name in the site and in Pyodide's /lib


def source_digest() -> str:
    """The first 16 hex digits of kernels.c's sha256: a build's name carries it, so a build of
    an older source is never opened for a newer one."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


def native_name() -> str:
    return f"decodelab_kernels-{source_digest()}.so"
