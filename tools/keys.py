"""One staleness rule for everything the build makes.

An artifact (a file, several files made together, or the site's folder) is up to date exactly
when the key of its inputs equals the key stored with it, and it is still what was made then.
The key is the sha256 of a JSON description of every input: the sha256 of each data file, the
configuration, and the sha256 of each source file of the code that decides the result (for a
trained model, of each file's syntax tree without its words: `syntax_digests`). Times of
modification play no part, so a fresh clone, a `touch` or a checkout of another branch and back
changes nothing, and any edit of an input, however small, does.

The keys live in artifacts/keys.json, one row per output path: {"key", "sha256"} (the sha256
of what was made, so an output changed by hand counts as stale too). An artifact worth keeping
(the corpora, the trained models) is also stored in the per-user cache under its key
(tools/cache.py); a stale one is copied from there when the cache has it, and made otherwise.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tools.common import ROOT, sha256_file

STAMPS_FILE = ROOT / "artifacts" / "keys.json"


def digest(path: Path) -> str:
    """sha256 of a file; for a folder, of every file's relative path and sha256, in order."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    rows = [f"{p.relative_to(path).as_posix()} {sha256_file(p)}\n"
            for p in sorted(path.rglob("*")) if p.is_file()]
    return hashlib.sha256("".join(rows).encode()).hexdigest()


def make_key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def source_digests(paths, base: Path = ROOT) -> dict:
    """{path relative to base: sha256} for the files that make up some code or data."""
    return {Path(p).relative_to(base).as_posix(): sha256_file(p) for p in sorted(paths)}


def syntax_digests(paths, base: Path = ROOT, package: str = "decodelab") -> dict:
    """{path relative to base: sha256 of the module's syntax tree} for Python source files, with
    what cannot change a result left out: comments and layout (the tree has none), docstrings,
    the message of a `raise` or an `assert`, and where in `package` an import comes from (a
    module moved to another folder, its imports following it, says the same). A trained model's
    key holds these, so a sentence edited in its code trains nothing again, while any change to
    a statement does."""
    return {Path(p).relative_to(base).as_posix(): _syntax_digest(Path(p).read_bytes(), package)
            for p in sorted(paths)}


def code_digests(paths, package: str = "decodelab") -> list:
    """The syntax digests of some code, sorted, without the files' paths: the code part of a key
    follows what the code says, not where its files lie, so moving a module trains nothing
    again. A package's __init__.py that holds words alone says nothing and is left out."""
    return sorted(d for d in syntax_digests(paths, Path("/"), package).values()
                  if d != _EMPTY)


@functools.lru_cache(maxsize=None)  # a build keys eight models on mostly the same files
def _syntax_digest(source: bytes, package: str = "decodelab") -> str:
    tree = _without_words(ast.parse(source.decode("utf-8")), package)
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def _without_words(tree: ast.AST, package: str = "decodelab") -> ast.AST:
    inside = lambda name: name == package or name.startswith(package + ".")  # noqa: E731
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            node.exc.args, node.exc.keywords = [], []
        elif isinstance(node, ast.Assert):
            node.msg = None
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and inside(node.module or ""):
            node.module = package  # (a module by its name alone, wherever its room)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if inside(alias.name):  # (the same for a plain import)
                    alias.name = f"{package}.{alias.name.rpartition('.')[2]}"
    return tree


_EMPTY = hashlib.sha256(ast.dump(ast.Module(body=[ast.Pass()], type_ignores=[])).encode()).hexdigest()


def module_files(package_dir: Path, entries) -> list[Path]:
    """The source files of a package that importing `entries` (dotted names) loads.

    That is each entry, the __init__.py of every package on the way, and, followed through the
    package, every module named by an import that runs at import time: in the module's body,
    also inside `if`, `try` and class bodies, but not inside functions (those load when the
    function is called; an entry that calls one must list what it imports).
    """
    package = package_dir.name
    found, todo = set(), list(entries)
    while todo:
        name = todo.pop()
        path = _module_path(package_dir, name)
        if path is None or path in found:
            continue
        found.add(path)
        parts = name.split(".")
        for i in range(1, len(parts)):  # importing a.b.c imports a and a.b first
            todo.append(".".join(parts[:i]))
        is_package = path.name == "__init__.py"
        for imported in _import_time_imports(path.read_bytes(), name, is_package):
            if imported == package or imported.startswith(package + "."):
                todo.append(imported)
    return sorted(found)


def _module_path(package_dir: Path, name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != package_dir.name:
        return None
    base = package_dir.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    module = base.with_suffix(".py")
    return module if len(parts) > 1 and module.is_file() else None


@functools.lru_cache(maxsize=None)
def _import_time_imports(source: bytes, name: str, is_package: bool) -> tuple[str, ...]:
    """Dotted names a module imports at import time ('from p import m' gives p and p.m)."""
    tree = ast.parse(source.decode("utf-8"), name)
    here = name if is_package else name.rpartition(".")[0]
    names, stack = [], list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..y import z
                anchor = here.split(".")[:len(here.split(".")) - (node.level - 1)]
                module = ".".join(anchor + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names if alias.name != "*"]
        stack.extend(ast.iter_child_nodes(node))
    return tuple(names)


class Stamps:
    """The key stored with each output (artifacts/keys.json)."""

    def __init__(self, path: Path = STAMPS_FILE):
        self.path = Path(path)
        try:
            self.rows = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.rows = {}

    @staticmethod
    def _name(output: Path) -> str:
        try:
            return Path(output).resolve().relative_to(ROOT).as_posix()
        except ValueError:
            return str(Path(output).resolve())

    def fresh(self, outputs, key: str) -> bool:
        for output in outputs:
            row = self.rows.get(self._name(output))
            if not row or row.get("key") != key or not Path(output).exists() \
                    or digest(output) != row.get("sha256"):
                return False
        return True

    def record(self, outputs, key: str) -> None:
        for output in outputs:
            self.rows[self._name(output)] = {"key": key, "sha256": digest(output)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".keys-")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.rows, fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, self.path)


@dataclass
class Artifact:
    """Files made together by one recipe from the inputs described in `inputs`."""

    name: str
    outputs: list
    inputs: dict
    cached: bool = True  # worth keeping in the per-user cache (slow to make, or downloaded)
    command: list = field(default_factory=list)  # what makes it (its key holds it as it sees fit)
    key: str = field(init=False)

    def __post_init__(self):
        self.outputs = [Path(p) for p in self.outputs]
        self.key = make_key(self.inputs)
        names = [p.name for p in self.outputs]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: outputs must have distinct file names: {names}")


def restore(artifact: Artifact, stamps: Stamps, cache) -> str | None:
    """'up to date' when the outputs are fresh, 'from the cache' when they were just copied
    from the per-user cache, None when the artifact must be made."""
    if stamps.fresh(artifact.outputs, artifact.key):
        return "up to date"
    entry = cache.entry(artifact.key) if artifact.cached else None
    if entry is None:
        return None
    place(artifact, entry, stamps)
    return "from the cache"


def store(artifact: Artifact, staged: Path, stamps: Stamps, cache) -> None:
    """Take the outputs just made in the folder `staged` (by file name): into the cache when the
    artifact is kept there, then into place, and stamp them with the key."""
    if artifact.cached:
        staged = cache.keep_entry(artifact.key, artifact.inputs,
                                  [staged / p.name for p in artifact.outputs])
    place(artifact, staged, stamps)


def place(artifact: Artifact, folder: Path, stamps: Stamps) -> None:
    for output in artifact.outputs:
        output.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}-")
        os.close(fd)
        shutil.copyfile(folder / output.name, tmp)
        os.replace(tmp, output)
    stamps.record(artifact.outputs, artifact.key)
