"""Every file and module the project names, in its docs and in its own comments, exists.

A reader follows a path in the README, in docs/, or in a comment or docstring of the code to
find what it describes; when a file moves and the sentence stays, the sentence sends the next
maintainer to nothing. This test reads

- README.md and docs/*.md, whole;
- the comments and docstrings (not the code) of build.py and of every .py file under py/,
  tools/ and tests/, and the comments of every .js, .mjs, .html and .css file under web/ and
  tests/;

and picks out five kinds of name:

- repository paths that start with a top folder (`web/ui/form.js`, `tests/e2e/test_offline.py`,
  `tools/keys.py`, `docs/course.md`, `static/sw.js`) or are `build.py`; a glob or a brace list
  (`docs/screenshot-*.png`, `web/lesson/experiment.{js,html,css}`) must match at least one file;
- paths inside the package or the page that start with one of their folders (`core/loops/beam.py`,
  `webapi/serving.py`, `kv/cache.js`, `state/store.js`), which must exist in py/decodelab/ (or
  its entry/) or in web/;
- a file named alone (`fields.py`, `sw.js`, `course.md`): some file of the checkout has that
  name;
- dotted names of the package (`decodelab.core.rules.sampling`, `decodelab.core.loops.generate.Generation`):
  each must be a module or package under py/decodelab, and a name after the module must be
  defined (or imported) at its top level;
- in README.md and docs/, each link to a file of the checkout (`[the map](architecture.md)`),
  with its #anchor, which must be a heading of that file.

Each package's docstring that lists its modules in a table (four spaces, a name, two spaces or
more, what it is) is held to the package too: each name listed is one of its modules or
subpackages, and the top package's table lists every one of its own.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from itertools import product
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "py" / "decodelab"
WEB = ROOT / "web"
SKIP = ("node_modules", "__pycache__", "bundled")  # not the project's own text

# --------------------------------------------------------------------------------------
# What a name may be, though no file of the checkout has it. Keep these short: every entry is
# a place a stale name could hide.

GENERATED = {  # a path that starts with one of these is made by the build, and git-ignored
    # static/ is the built site. Its page files are web/'s as the build copies them, and are
    # checked there (repo_path_ok); these parts the build writes from other inputs.
    "static/pyodide/": "the runtime, its wheels and integrity.json (tools/site.py)",
    "static/assets/": "the corpora, the models and manifest.json (tools/site.py)",
    "static/models/": "the real model's GGUF file and models.json (tools/site.py)",
    "static/**": "the gzip and brotli copies beside the site's files (tools/site.py)",
    "py/decodelab/bundled/": "the corpora and models as pip's wheel carries them (build.py)",
}
NOT_IN_CHECKOUT = {  # a file named alone that is real, but not a file of this checkout
    "repeat.py": "the script in the zip of Take it to transformers (lesson/handoff.py)",
    "conf.py": "a Sphinx site's own settings, in docs/embedding.md's recipe",
    "pyodide.mjs": "a file of npm's pyodide package, which the build fetches (tools/fetch.py)",
}
# artifacts/, dist/, node_modules/ and build/ are made by the build too; names under them are
# not picked out at all (they are not among the top folders below).

TOP = ("py", "web", "tests", "tools", "docs", "static")
INNER = {  # the folder a package- or page-relative path starts with -> where it may be
    "core": [PACKAGE],
    "lesson": [PACKAGE, WEB],
    "entry": [PACKAGE],
    "webapi": [PACKAGE / "entry"],
    "state": [WEB],
    "runtime": [WEB],
    "ui": [WEB],
    "course": [WEB],
    "kv": [WEB],
    "search": [WEB],
    "serving": [WEB],
    "embed": [WEB],
    "e2e": [ROOT / "tests"],
}
EXTENSIONS = r"(?:py|js|mjs|html|css|md)"

NOT_AFTER = r"(?<![\w./$~@-])"  # not the middle of a longer path, a URL or a package name
PATH_CHARS = r"[\w.*{},/-]"
REPO_PATH = re.compile(rf"{NOT_AFTER}(?:(?:{'|'.join(TOP)})/{PATH_CHARS}*|build\.py\b)")
INNER_PATH = re.compile(rf"{NOT_AFTER}(?:{'|'.join(INNER)})/{PATH_CHARS}*\.{EXTENSIONS}\b")
ALONE = re.compile(rf"{NOT_AFTER}[\w-]+\.{EXTENSIONS}\b(?![/\w-])")
MODULE = re.compile(rf"{NOT_AFTER}decodelab(?:\.[A-Za-z_]\w*)+")
LINK = re.compile(r"\]\(([^)\s]+)\)")


# --------------------------------------------------------------------------------------
# the text that is read


def python_prose(source: str) -> list[tuple[int, str]]:
    """The comments, and every string that stands alone as a statement (the docstrings), as
    (line, text) pairs."""
    out = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
           if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            out += [(node.lineno + k, line) for k, line in enumerate(node.value.value.splitlines())]
    return sorted(out)


REGEX_MAY_FOLLOW = set("(,=:[!&|?{};+-*%<>~^") | {""}


def script_comments(source: str) -> list[tuple[int, str]]:
    """The // and /* */ comments of JavaScript or CSS, passing over strings, template literals
    and regular expression literals (where // or a quote is no comment), as (line, text)
    pairs."""
    out, i, n, last = [], 0, len(source), ""
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            out.append((i, source[i + 2:end]))
            i = end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            end = n if end < 0 else end
            out.append((i, source[i + 2:end]))
            i = end + 2
        elif c in "'\"`":
            i += 1
            while i < n and source[i] != c:
                i += 2 if source[i] == "\\" else 1
            i += 1
            last = c
        elif c == "/" and last in REGEX_MAY_FOLLOW:  # a regular expression literal
            i += 1
            in_class = False
            while i < n and (in_class or source[i] != "/") and source[i] != "\n":
                if source[i] == "\\":
                    i += 1
                elif source[i] in "[]":
                    in_class = source[i] == "["
                i += 1
            i += 1
            last = "/"
        else:
            if not c.isspace():
                last = "a" if c.isalnum() or c in "_$" else c
            i += 1
    return lines_of(source, out)


def html_comments(source: str) -> list[tuple[int, str]]:
    return lines_of(source, [(m.start(), m.group(1))
                             for m in re.finditer(r"<!--(.*?)-->", source, re.S)])


def lines_of(source: str, pieces: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(offset in source, text) pieces as (line, text) pairs, a pair for each line."""
    return [(source.count("\n", 0, offset) + 1 + k, line)
            for offset, text in pieces for k, line in enumerate(text.splitlines())]


def files_to_read() -> list[Path]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    code = [ROOT / "build.py"]
    for folder in ("py", "tools", "tests", "web"):
        code += sorted(p for p in (ROOT / folder).rglob("*")
                       if p.suffix in (".py", ".js", ".mjs", ".html", ".css")
                       and not set(SKIP) & set(p.relative_to(ROOT).parts))
    return docs + code


def prose(path: Path) -> list[tuple[int, str]]:
    """What is read of a file, as (line, text) pairs."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return list(enumerate(text.splitlines(), 1))
    if path.suffix == ".py":
        return python_prose(text)
    if path.suffix == ".html":
        return html_comments(text)
    return script_comments(text)


# --------------------------------------------------------------------------------------
# resolving a name


def expand(name: str) -> list[str]:
    """A brace list stands for each of its names, as `web/lesson/experiment.{js,html,css}` does
    for three files."""
    parts = re.split(r"\{([^{}]*)\}", name)
    choices = [[p] if k % 2 == 0 else p.split(",") for k, p in enumerate(parts)]
    return ["".join(c) for c in product(*choices)]


def exists(base: Path, name: str) -> bool:
    for one in expand(name):
        if any(ch in one for ch in "*?["):
            pattern = re.sub(r"\*\*(?!/)", "**/*", one.rstrip("/"))  # `static/**.gz`
            if not any(base.glob(pattern)):
                return False
        elif not (base / one).exists() or (one.endswith("/") and not (base / one).is_dir()):
            return False
    return True


def clean(name: str) -> str:
    """Punctuation that ends a sentence or closes a bracket is not part of the path."""
    while name and (name[-1] in ".,:;" or (name[-1] == "}" and name.count("{") < name.count("}"))):
        name = name[:-1]
    return name


def repo_path_ok(name: str) -> bool:
    if any(name.startswith(prefix) for prefix in GENERATED):
        return True
    if name.startswith("static/"):
        rest = name[len("static/"):]
        return rest == "" or exists(WEB, rest)
    return exists(ROOT, name)


def inner_path_ok(name: str) -> bool:
    return any(exists(base, name) for base in INNER[name.split("/", 1)[0]])


@cache
def file_names() -> frozenset[str]:
    """The names of the checkout's own files (not the build's outputs, nor npm's packages)."""
    files = [*ROOT.glob("*"),
             *(p for top in TOP if top != "static" for p in (ROOT / top).rglob("*"))]
    return frozenset(p.name for p in files if not set(SKIP) & set(p.relative_to(ROOT).parts))


@cache
def top_level_names(module: Path) -> frozenset[str]:
    """What a module defines or imports at its top level."""
    names = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def module_ok(dotted: str) -> bool:
    """Packages, then a module, then at most one name checked: the module must define it."""
    here = PACKAGE
    parts = dotted.split(".")[1:]
    for k, part in enumerate(parts):
        if (here / part / "__init__.py").is_file():
            here = here / part
        elif (here / f"{part}.py").is_file():
            rest = parts[k + 1:]
            return not rest or rest[0] in top_level_names(here / f"{part}.py")
        else:  # a name the package itself defines
            return part in top_level_names(here / "__init__.py")
    return True


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def link_ok(doc: Path, target: str) -> bool:
    if re.match(r"[a-z]+:", target):
        return True  # a web address
    path, _, anchor = target.partition("#")
    file = (doc.parent / path).resolve() if path else doc
    if not file.exists():
        return False
    if anchor and file.suffix == ".md":
        headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.M)
        return anchor in {slug(h) for h in headings}
    return True


def stale_names(text: str, doc: Path | None = None) -> list[str]:
    """Every name in `text` that names nothing; `doc` is the Markdown file it is, if it is one."""
    found = []
    for m in REPO_PATH.finditer(text):
        name = clean(m.group(0))
        if not repo_path_ok(name):
            found.append(name)
    for m in INNER_PATH.finditer(text):
        name = clean(m.group(0))
        if not inner_path_ok(name):
            found.append(name)
    for m in ALONE.finditer(text):
        if m.group(0) not in file_names() and m.group(0) not in NOT_IN_CHECKOUT:
            found.append(m.group(0))
    for m in MODULE.finditer(text):
        if not module_ok(m.group(0)):
            found.append(m.group(0))
    if doc is not None:
        for m in LINK.finditer(text):
            if not link_ok(doc, m.group(1)):
                found.append(f"({m.group(1)})")
    return found


# --------------------------------------------------------------------------------------
# the tests

FILES = files_to_read()


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_path_and_module_named_exists(path):
    doc = path if path.suffix == ".md" else None
    stale = [f"{path.relative_to(ROOT)}:{number}: {name}" for number, line in prose(path)
             for name in stale_names(line, doc)]
    assert not stale, f"names of nothing: {stale}"


def test_the_checks_catch_stale_names():
    """Names that moved or never were are caught; names that are there pass."""
    here = ROOT / "README.md"
    for gone in ["web/validate.js", "web/kept.js", "tests/e2e/test_nothing.py", "docs/DESIGN.md",
                 "web/lesson/experiment.{js,html,txt}", "docs/screenshot-none-*.png",
                 "core/metrics.py", "kv/kept.js", "webapi/validity.py", "DESIGN.md",
                 "decodelab.metrics", "decodelab.core.nothing", "decodelab.core.loops.generate.Nothing",
                 "static/nothing.js", "[a link](docs/nothing.md)", "[a link](docs/course.md#nope)"]:
        assert stale_names(f"see {gone}, and more", here), gone
    for there in ["web/runtime/kept.js", "tests/e2e/test_offline.py", "tools/keys.py",
                  "docs/course.md", "build.py", "web/lesson/experiment.{js,html,css}",
                  "docs/screenshot-*.png", "core/loops/beam.py", "webapi/serving.py", "kv/cache.js",
                  "lesson/preview.js", "lesson/handoff.py", "fields.py", "sw.js",
                  "decodelab.core.rules.sampling", "decodelab.core.loops.generate.Generation",
                  "static/sw.js", "static/pyodide/integrity.json", "static/",
                  "https://example.org/decodelab/embed.html", "node_modules/pyodide/x.js",
                  "[the map](docs/architecture.md#the-map)", "window.decodelab.lastRun"]:
        assert not stale_names(f"see {there}, and more", here), there


def web_names(pairs: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(n, name) for n, line in pairs for name in re.findall(r"web/\w\.js", line)]


def test_python_prose_is_comments_and_docstrings_only():
    source = ('"""Module: web/a.js."""\nx = "web/b.js"  # web/c.js\n'
              'def f():\n    """web/d.js"""\n    return "web/e.js"\n')
    assert web_names(python_prose(source)) == [(1, "web/a.js"), (2, "web/c.js"), (4, "web/d.js")]


def test_script_comments_pass_over_strings_and_regular_expressions():
    source = ('const a = "http://x//y"; // web/a.js\nconst r = /["\'\\/]/g; /* web/b.js */\n'
              "const t = `// web/c.js`; x = 4 / 2; // web/d.js\n")
    assert web_names(script_comments(source)) == [(1, "web/a.js"), (2, "web/b.js"), (3, "web/d.js")]


def module_table(package: Path) -> list[str]:
    """The names a package's docstring lists in its table of modules."""
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return re.findall(r"^    ([a-z_][\w.]*)\s{2,}\S", docstring, re.M)


def own_modules(package: Path) -> set[str]:
    return {p.stem for p in package.glob("*.py") if not p.name.startswith("__")} | \
        {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}


PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "bundled" not in p.parts)


@pytest.mark.parametrize("package", PACKAGES, ids=[str(p.relative_to(PACKAGE.parent))
                                                    for p in PACKAGES])
def test_a_package_docstring_lists_only_its_own_modules(package):
    dotted = package.relative_to(PACKAGE.parent).as_posix().replace("/", ".")
    missing = [name for name in module_table(package)
               if name.split(".")[0] not in own_modules(package)
               or not module_ok(f"{dotted}.{name}")]
    assert not missing, f"{package.name}'s docstring lists modules it does not have: {missing}"


def test_the_top_package_docstring_lists_each_of_its_parts():
    assert set(module_table(PACKAGE)) == own_modules(PACKAGE)
