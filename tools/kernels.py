"""Build kernels.c twice: a native shared library for the package here, and a WebAssembly side
module for the page (Debian's clang-16 and lld-16: no Emscripten SDK needed; Pyodide loads
the module into its own heap). Each build is named by the source's digest and made only when
missing. Without a compiler the step says so in one line and the package runs the same
arithmetic in numpy."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tools.common import BuildError, package_file, run, say

NAMING = package_file("core/kernels/source.py")
# No fused multiply-add anywhere: the same bits natively, in WebAssembly and in numpy.
COMMON = ["-O3", "-ffp-contract=off", "-fno-fast-math", "-std=c11", "-Wall", "-Werror"]
CLANG, WASM_LD = "clang-16", "wasm-ld-16"
WASM_TOOLS = ("clang-16", "lld-16")  # Debian's packages that carry them


def native_compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def build_native() -> Path | None:
    """The package's native library (py/decodelab/core/kernels/built/), or None when this
    machine has no C compiler."""
    target = NAMING.BUILT / NAMING.native_name()
    if target.exists():
        say(f"kernels: native {target.name} present")
        return target
    cc = native_compiler()
    if cc is None:
        say("kernels: no C compiler here (cc, gcc or clang), so the package runs its kernels' "
            "arithmetic in numpy")
        return None
    NAMING.BUILT.mkdir(exist_ok=True)
    for old in NAMING.BUILT.glob("decodelab_kernels-*.so"):
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / target.name
        if run([cc, *COMMON, "-march=native", "-fPIC", "-shared", "-o", str(out),
                str(NAMING.SOURCE)]).returncode != 0:
            raise BuildError(f"{cc} could not build {NAMING.SOURCE.name} (see above)")
        shutil.move(out, target)
    say(f"kernels: native {target.name} built with {cc}")
    return target


def wasm_tools_present() -> bool:
    return all(shutil.which(t) for t in (CLANG, WASM_LD))


def setup_wasm_tools() -> None:
    """clang-16 and lld-16 from Debian, as chromium is installed: with apt-get where this
    user may, else a sentence (the page then runs the kernels' arithmetic in numpy)."""
    if wasm_tools_present():
        say(f"setup: {CLANG} and {WASM_LD} present")
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        say(f"setup: {CLANG} and {WASM_LD} missing and apt-get is not at hand: the page will "
            "run its kernels' arithmetic in numpy (apt-get install clang-16 lld-16 to build "
            "them)")
        return
    say(f"setup: {CLANG} and {WASM_LD} missing: installing Debian's {' and '.join(WASM_TOOLS)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *WASM_TOOLS]):
        if run(cmd, env=env).returncode != 0:
            say(f"setup: {' '.join(cmd)} failed: the page will run its kernels' arithmetic in "
                "numpy")
            return


def wasm_module(folder: Path) -> Path | None:
    """The side module of this source in `folder`, where it has been built."""
    target = folder / f"decodelab_kernels-{NAMING.source_digest()}.wasm.so"
    return target if target.exists() else None


def build_wasm(folder: Path) -> Path | None:
    """The page's side module in `folder` (named by the source's digest), or None without
    clang-16 and wasm-ld-16."""
    target = folder / f"decodelab_kernels-{NAMING.source_digest()}.wasm.so"
    if target.exists():
        say(f"kernels: WebAssembly {target.name} present")
        return target
    if not wasm_tools_present():
        say(f"kernels: {CLANG} or {WASM_LD} missing, so the page runs its kernels' arithmetic "
            "in numpy")
        return None
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        obj, out = Path(tmp) / "kernels.o", Path(tmp) / target.name
        steps = ([CLANG, "--target=wasm32-unknown-emscripten", *COMMON, "-fPIC", "-msimd128",
                  "-ffreestanding", "-nostdlib", "-c", str(NAMING.SOURCE), "-o", str(obj)],
                 [WASM_LD, "--experimental-pic", "-shared", "--no-entry", "--export-all",
                  "-o", str(out), str(obj)])
        for cmd in steps:
            if run(cmd).returncode != 0:
                raise BuildError(f"{cmd[0]} could not build the side module")
        shutil.move(out, target)
    say(f"kernels: WebAssembly {target.name} built ({target.stat().st_size:,} bytes)")
    return target
