"""Assembling static/, the whole site: the page, the runtime, the wheels, the lesson files.

    static/              the page (web/): index.html assembled from its parts and the field table
                         (tools/page.py), style.css from its sheets, the scripts as they are
    static/pyodide/      the runtime files, the numpy, micropip and packaging wheels, the
                         page's decodelab wheel, a pyodide-lock.json trimmed to those packages,
                         and integrity.json (every runtime file's sha256, checked by the worker)
    static/assets/       the corpora and models, and manifest.json with each file's sha256
    static/models/       the real model's GGUF file and models.json (its name, bytes, sha256 and
                         credit), unless the site is built without it; the page downloads it
                         when the learner asks and keeps it in Cache Storage itself, so it is
                         neither in the service worker's list nor precompressed
    static/sw.js         the service worker, with every file's SHA-256 (offline after a visit)
    static/**.gz, .br    gzip and brotli copies of the files they make smaller, for hosts that
                         serve them
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import shutil
from pathlib import Path

from tools import page as pagelib
from tools.common import human, sha256_file
from tools.fetch import PYODIDE_PACKAGES


def lock_entry(wheel_path: Path, project: dict) -> dict:
    """The pyodide-lock.json entry that lets loadPackage('decodelab') install our wheel."""
    return {
        "name": project["name"],
        "version": project["version"],
        "file_name": wheel_path.name,
        "install_dir": "site",
        "sha256": sha256_file(wheel_path),
        "package_type": "package",
        "imports": ["decodelab"],
        "depends": ["numpy"],
        "unvendored_tests": False,
        "shared_library": False,
    }


def site_lock(base_lock: dict, extra: dict) -> dict:
    """The npm lock's info, only the packages the page uses, and decodelab."""
    packages = {name: base_lock["packages"][name] for name in PYODIDE_PACKAGES}
    packages[extra["name"]] = extra
    return {"info": base_lock["info"], "packages": packages}


def subresource_integrity(digest: bytes) -> str:
    """A SHA-256 digest as a Subresource Integrity value, as fetch(url, {integrity}) takes it."""
    return "sha256-" + base64.b64encode(digest).decode("ascii")


# The runtime files every start of the page fetches: Pyodide itself, and the wheels of the two
# packages the worker loads (numpy and decodelab). The others (micropip, packaging) are in the
# lock but never loaded.
STARTUP_FILES = re.compile(r"pyodide\.mjs|pyodide\.asm\.js|pyodide\.asm\.wasm|python_stdlib\.zip"
                           r"|pyodide-lock\.json|numpy-.+\.whl|decodelab-.+\.whl")


def write_integrity(folder: Path) -> Path:
    """pyodide/integrity.json: every runtime file with its SHA-256, as hex and as a Subresource
    Integrity value, and whether a start fetches it; the worker checks each file against it
    before it runs (web/runtime/integrity.js) and counts the bytes of a start by it
    (web/runtime/downloads.js)."""
    rows = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != "integrity.json":
            digest = hashlib.sha256(path.read_bytes()).digest()
            rows.append({"path": path.name, "bytes": path.stat().st_size, "sha256": digest.hex(),
                         "integrity": subresource_integrity(digest),
                         "startup": bool(STARTUP_FILES.fullmatch(path.name))})
    target = folder / "integrity.json"
    target.write_text(json.dumps({"files": rows}, indent=2) + "\n")
    return target


def copy_assets(assets: list[tuple[str, Path]], dest: Path) -> list[dict]:
    """Copy (path in the site, source) pairs into dest; return the manifest rows."""
    rows = []
    for path, src in assets:
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / path)
        rows.append({"path": path, "sha256": sha256_file(src), "bytes": src.stat().st_size})
    return rows


MODELS = "models"  # the folder of the real model's file, apart from the rest of the site
MODEL_FILES = re.compile(r"models/[^/]+\.gguf")


def copy_models(dest: Path, models: list[dict]) -> None:
    """models/: each file given ({"model", "path": source, "sha256", "credit", "license"}) and
    models.json, what the page reads before it downloads one (an empty list: none on this site)."""
    folder = dest / MODELS
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for m in models:
        src = Path(m["path"])
        shutil.copyfile(src, folder / src.name)
        rows.append({**m, "path": f"{MODELS}/{src.name}", "bytes": src.stat().st_size})
    (folder / "models.json").write_text(json.dumps({"files": rows}, indent=2) + "\n")


def assemble(dest: Path, web_dir: Path, runtime: list[Path], wheel_path: Path, lock: dict,
             assets: list[tuple[str, Path]], models: list[dict] = ()) -> dict:
    """Write the site into the empty or missing folder `dest`; return its weight by part."""
    shutil.copytree(web_dir, dest, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    # the page written whole (its parts included, its fields from Python's table) and one
    # stylesheet; the parts themselves are not files of the site
    (dest / "index.html").write_text(pagelib.page(web_dir))
    (dest / "style.css").write_text(pagelib.stylesheet(web_dir))
    for part in pagelib.parts(web_dir):
        (dest / part).unlink()
    pyodide_dir = dest / "pyodide"
    pyodide_dir.mkdir(parents=True, exist_ok=True)
    for path in [*runtime, wheel_path]:
        shutil.copyfile(path, pyodide_dir / path.name)
    (pyodide_dir / "pyodide-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    write_integrity(pyodide_dir)

    assets_dir = dest / "assets"
    assets_dir.mkdir(parents=True, exist_ok=True)
    rows = copy_assets(assets, assets_dir)
    (assets_dir / "manifest.json").write_text(json.dumps({"files": rows}, indent=2) + "\n")
    copy_models(dest, list(models))
    write_start_weight(dest)
    write_service_worker(dest, (web_dir / "sw.js").read_text())
    write_precompressed(dest)
    return weight(dest)


PRECOMPRESSED = (".gz", ".br")  # copies beside the files, not files of the site
# Brotli's quality 9: 3.9 MB of copies in about 2 s here, against 3.3 MB in 38 s at 11 (the
# largest), for a build that runs often; gzip's copies of the same files hold 4.6 MB.
BROTLI_QUALITY = 9


def write_precompressed(site: Path, saving: float = 0.1) -> dict:
    """Beside every file that gzip makes at least `saving` smaller, its gzipped copy (name.gz,
    level 9, no timestamp: the same bytes every build) and, where brotli makes it smaller still,
    its brotli copy (name.br), for hosts that send a precompressed copy to browsers that accept
    it. Returns the bytes each kind of copy holds."""
    import brotli  # the build's one package (pyproject's `build` group; setup installs it)

    total = {"gzip": 0, "brotli": 0}
    for path in sorted(site.rglob("*")):
        if not path.is_file() or path.name.endswith(PRECOMPRESSED) \
                or MODEL_FILES.fullmatch(path.relative_to(site).as_posix()):
            continue  # (quantized weights do not compress)
        data = path.read_bytes()
        packed = gzip.compress(data, compresslevel=9, mtime=0)
        if len(packed) > len(data) * (1 - saving):
            continue
        path.with_name(path.name + ".gz").write_bytes(packed)
        total["gzip"] += len(packed)
        squeezed = brotli.compress(data, quality=BROTLI_QUALITY)
        if len(squeezed) < len(packed):
            path.with_name(path.name + ".br").write_bytes(squeezed)
            total["brotli"] += len(squeezed)
    return total


START_WEIGHT = "{{START_MB}}"  # in the widget's poster: what pressing Start downloads


def start_weight(site: Path) -> int:
    """The bytes a start of the page fetches: the runtime files it needs, and every lesson file."""
    runtime = json.loads((site / "pyodide" / "integrity.json").read_text())["files"]
    assets = json.loads((site / "assets" / "manifest.json").read_text())["files"]
    return sum(f["bytes"] for f in runtime if f["startup"]) + sum(f["bytes"] for f in assets)


def write_start_weight(site: Path) -> None:
    """Put the start's weight, in whole MiB (the page's one unit: web/ui/bytes.js), where the
    poster's words claim it."""
    weight = f"{start_weight(site) / 2**20:.0f} MiB"
    for name in ("embed.html", "embed/poster.js"):
        path = site / name
        text = path.read_text()
        if START_WEIGHT not in text:
            raise ValueError(f"{name} no longer says {START_WEIGHT} (tools/site.py fills it in)")
        path.write_text(text.replace(START_WEIGHT, weight))


SW_BUILD = "const BUILD = null; // filled in by the build"
SW_FILES = "const FILES = []; // [path relative to this file, \"sha256-...\"], filled in by the build"


def write_service_worker(site: Path, template: str) -> str:
    """Write sw.js from its template (web/sw.js, which says how they are used) with every other
    file of the site and its Subresource Integrity value, and the build's name, a digest of that
    list. Returns the name."""
    if SW_BUILD not in template or SW_FILES not in template:
        raise ValueError("sw.js no longer has the lines the build fills in (tools/site.py)")
    files = []
    for path in sorted(site.rglob("*")):
        name = path.relative_to(site).as_posix()
        if path.is_file() and name != "sw.js" and not name.endswith(PRECOMPRESSED) \
                and not MODEL_FILES.fullmatch(name):
            digest = hashlib.sha256(path.read_bytes()).digest()
            files.append([name, subresource_integrity(digest)])
    build = hashlib.sha256(json.dumps(files).encode()).hexdigest()[:16]
    listing = ",\n".join("  " + json.dumps(row) for row in files)
    text = template.replace(SW_BUILD, f'const BUILD = "{build}";').replace(
        SW_FILES, f"const FILES = [\n{listing},\n];")
    (site / "sw.js").write_text(text)
    return build


def weight(folder: Path) -> dict:
    sizes = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.name.endswith(PRECOMPRESSED):
            top = path.relative_to(folder).parts[0]
            part = top if top in ("assets", "pyodide", MODELS) else "page"  # HTML, CSS, JS
            sizes[part] = sizes.get(part, 0) + path.stat().st_size
    return sizes


def describe(sizes: dict) -> str:
    parts = ", ".join(f"{k} {human(v)}" for k, v in sorted(sizes.items()))
    return f"total page weight {human(sum(sizes.values()))} ({parts})"
