"""Fast, offline tests of the build: build.py and its parts in tools/."""

import base64
import csv
import functools
import hashlib
import io
import json
import os
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import build  # noqa: E402
from tools import corpora, fetch, keys  # noqa: E402
from tools import site as sitelib
from tools import wheel as wheels
from tools.cache import UserCache, cache_dir  # noqa: E402

PROJECT = {
    "name": "decodelab",
    "version": "1.2.3",
    "description": "A test package.",
    "requires-python": ">=3.10",
    "dependencies": ["numpy>=1.26"],
}


def make_package(root: Path) -> Path:
    package = root / "decodelab"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("VERSION = '1.2.3'\n")
    (package / "sub" / "mod.py").write_text("def f():\n    return 1\n")
    (package / "data.json").write_text('{"a": 1}\n')
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0junk")
    return package


def test_record_hash_is_urlsafe_base64_without_padding():
    assert wheels.record_hash(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    value = wheels.record_hash(b"\xff" * 100).split("=", 1)[1]
    assert "=" not in value and "+" not in value and "/" not in value
    padded = value + "=" * (-len(value) % 4)
    assert base64.urlsafe_b64decode(padded) == hashlib.sha256(b"\xff" * 100).digest()


def test_wheel_record_matches_every_member(tmp_path):
    package = make_package(tmp_path)
    filename, data = wheels.wheel_bytes(package, PROJECT)
    assert filename == "decodelab-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = zf.namelist()
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        assert {"decodelab/__init__.py", "decodelab/sub/mod.py", "decodelab/data.json"} <= set(names)
        info = "decodelab-1.2.3.dist-info/"
        assert {info + "METADATA", info + "WHEEL", info + "RECORD"} <= set(names)
        rows = list(csv.reader(io.StringIO(zf.read(info + "RECORD").decode())))
        recorded = {row[0]: row for row in rows}
        assert set(recorded) == set(names)
        assert recorded[info + "RECORD"][1:] == ["", ""]
        for name in names:
            if name == info + "RECORD":
                continue
            content = zf.read(name)
            assert recorded[name][1] == wheels.record_hash(content)
            assert recorded[name][2] == str(len(content))
        metadata = zf.read(info + "METADATA").decode()
        assert "Name: decodelab\n" in metadata and "Version: 1.2.3\n" in metadata
        assert "Requires-Dist: numpy>=1.26\n" in metadata
        wheel = zf.read(info + "WHEEL").decode()
        assert "Root-Is-Purelib: true" in wheel and "Tag: py3-none-any" in wheel
        assert all(i.date_time == wheels.ZIP_EPOCH for i in zf.infolist())


def test_wheel_is_reproducible(tmp_path):
    package = make_package(tmp_path)
    first = wheels.wheel_bytes(package, PROJECT)
    # New modification times and a new stray cache file must not change the bytes.
    for path in package.rglob("*.py"):
        path.write_text(path.read_text())
    (package / "__pycache__" / "other.pyc").write_bytes(b"more")
    assert wheels.wheel_bytes(package, PROJECT) == first
    (package / "__init__.py").write_text("VERSION = '1.2.4'\n")
    assert wheels.wheel_bytes(package, PROJECT)[1] != first[1]


def test_lock_entry_and_site_lock(tmp_path):
    wheel = tmp_path / "decodelab-1.2.3-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes")
    entry = sitelib.lock_entry(wheel, PROJECT)
    assert entry == {
        "name": "decodelab",
        "version": "1.2.3",
        "file_name": wheel.name,
        "install_dir": "site",
        "sha256": hashlib.sha256(b"wheel bytes").hexdigest(),
        "package_type": "package",
        "imports": ["decodelab"],
        "depends": ["numpy"],
        "unvendored_tests": False,
        "shared_library": False,
    }
    base = {
        "info": {"version": "0.27.7", "python": "3.12.7"},
        "packages": {name: {"name": name, "file_name": f"{name}.whl"}
                     for name in ("numpy", "micropip", "packaging", "scipy", "pandas")},
    }
    lock = sitelib.site_lock(base, entry)
    assert lock["info"] == base["info"]
    assert list(lock["packages"]) == ["numpy", "micropip", "packaging", "decodelab"]
    assert lock["packages"]["numpy"] == base["packages"]["numpy"]
    assert lock["packages"]["decodelab"] is entry
    json.dumps(lock)


def source(label, data=None, error=None):
    calls = []

    def get():
        calls.append(label)
        if error:
            raise error
        return data
    return (label, get), calls


def test_obtain_failure_names_file_hash_and_every_source(tmp_path):
    good = b"the real file"
    expected = hashlib.sha256(good).hexdigest()
    cache = UserCache(tmp_path)
    cached = cache.download_path(expected, "pkg.whl")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"junk")
    cdn, _ = source("https://cdn.example/pkg.whl", error=OSError("name resolution failed"))
    pypi, _ = source("PyPI other==1.0", data=b"something else")
    with pytest.raises(fetch.BuildError) as caught:
        fetch.obtain("pkg.whl", expected, [cdn, pypi], cache)
    message = str(caught.value)
    assert "pkg.whl" in message and expected in message
    assert "sha256 mismatch (got " + hashlib.sha256(b"junk").hexdigest() in message
    assert "https://cdn.example/pkg.whl" in message and "name resolution failed" in message
    assert "PyPI other==1.0" in message
    assert hashlib.sha256(b"something else").hexdigest() in message
    assert cached.read_bytes() == b"junk"  # nothing unverified is stored


def test_obtain_falls_back_and_caches_the_verified_file(tmp_path):
    good = b"the real file"
    expected = hashlib.sha256(good).hexdigest()
    cache = UserCache(tmp_path)
    cached = cache.download_path(expected, "pkg.whl")
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"corrupted")
    cdn, cdn_calls = source("cdn", error=OSError("offline"))
    pypi, pypi_calls = source("pypi", data=good)
    path = fetch.obtain("pkg.whl", expected, [cdn, pypi], cache)
    assert path == tmp_path / "downloads" / expected / "pkg.whl" and path.read_bytes() == good
    assert cdn_calls == ["cdn"] and pypi_calls == ["pypi"]
    # A verified cache hit does not touch any source.
    again, again_calls = source("pypi", data=good)
    assert fetch.obtain("pkg.whl", expected, [again], cache) == path
    assert again_calls == []


def test_names_corpus_from_sdist(tmp_path):
    sdist = tmp_path / "names-0.3.0.tar.gz"
    files = {
        "names-0.3.0/names/dist.male.first": "JAMES          3.318  3.318      1\n"
                                             "JEAN           0.010  3.328      2\n",
        "names-0.3.0/names/dist.female.first": "MARY           2.629  2.629      1\n"
                                               "JEAN           0.100  2.729      2\n\n",
    }
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    names, members = corpora.names_corpus(sdist)
    assert names == ["james", "jean", "mary"]
    assert members == ["names/dist.male.first", "names/dist.female.first"]


RST = """\
.. include:: ../header.txt

==============
 A Title Here
==============

:Author: Somebody
:Copyright: This document has been placed in the public domain.

.. contents::

Section
=======

This is a *plain* paragraph of **running** text, with a `reference`_ and
a ``literal`` and a footnote [#]_ that continues on a second line::

    code block that must not appear

* A bullet item that is long enough to count as a real paragraph of text
  and wraps onto a second line.
* Short item.

+-------+-------+
| table | cells |
+-------+-------+

    An indented quotation that is dropped even though it is long enough.

.. _reference: https://example.org/
"""


def test_rst_paragraphs_keep_running_text_only():
    paragraphs = [corpora.clean_inline(p) for p in corpora.rst_paragraphs(RST)]
    prose = [p for p in paragraphs if corpora.is_prose(p)]
    assert prose == [
        "This is a plain paragraph of running text, with a reference and a literal "
        "and a footnote that continues on a second line:",
        "A bullet item that is long enough to count as a real paragraph of text "
        "and wraps onto a second line.",
    ]
    assert not any("code block" in p or "table" in p or "Title" in p for p in paragraphs)


def test_clean_inline_markup():
    clean = corpora.clean_inline
    assert clean("see `the docs <https://x.org/>`__ now") == "see the docs now"
    assert clean("a :PEP:`287` b") == "a 287 b"
    assert clean("the |name|_ here") == "the name here"
    assert clean('the characters "-", "|" and "*".') == 'the characters "-", "|" and "*".'
    assert clean("keep snake_case words and trailing refs_.") == \
        "keep snake_case words and trailing refs."
    assert clean("Example ::") == "Example"


def test_is_prose_rejects_code_tables_and_urls():
    assert corpora.is_prose("The quick brown fox jumps over the lazy dog again today.")
    assert not corpora.is_prose("Too short to count.")
    assert not corpora.is_prose("See https://example.org for all the details you need here.")
    assert not corpora.is_prose("name     value     other     columns     of     a     table here")
    assert not corpora.is_prose("x = f(a[0], b[1]) + g(c[2], d[3]) * h(e[4]) / k(z[9]);")


def test_server_mime_types_and_no_cache(tmp_path):
    for name in ("a.wasm", "a.mjs", "a.js", "a.whl", "a.zip", "a.npz", "a.json"):
        (tmp_path / name).write_bytes(b"x")
    server = build.make_server(tmp_path, "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        expected = {
            "a.wasm": "application/wasm",
            "a.mjs": "text/javascript",
            "a.js": "text/javascript",
            "a.whl": "application/octet-stream",
            "a.zip": "application/octet-stream",
            "a.npz": "application/octet-stream",
            "a.json": "application/json",
        }
        for name, mime in expected.items():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/{name}", timeout=5) as r:
                assert r.headers["Content-Type"] == mime, name
                assert r.headers["Cache-Control"] == "no-cache"
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------------------
# the two wheels


def test_wheel_never_takes_the_bundled_folder_from_the_package(tmp_path):
    package = make_package(tmp_path)
    (package / "bundled" / "data").mkdir(parents=True)
    (package / "bundled" / "data" / "names.txt").write_text("ann\n")
    with zipfile.ZipFile(io.BytesIO(wheels.wheel_bytes(package, PROJECT)[1])) as zf:
        assert not any("/bundled/" in n for n in zf.namelist())
        assert "decodelab/__init__.py" in zf.namelist()


def test_pip_wheel_carries_the_data_and_the_console_script(tmp_path):
    package = make_package(tmp_path)
    project = {**PROJECT, "scripts": {"decodelab": "decodelab.entry.cli:main"},
               "license": {"text": "MIT"}}
    data = [("data/names.txt", b"ann\nbob\n"), ("models/bigram-names.npz", b"npz bytes")]
    filename, content = wheels.wheel_bytes(package, project, data)
    assert filename == "decodelab-1.2.3-py3-none-any.whl"
    info = "decodelab-1.2.3.dist-info/"
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        assert zf.read("decodelab/bundled/data/names.txt") == b"ann\nbob\n"
        assert zf.read("decodelab/bundled/models/bigram-names.npz") == b"npz bytes"
        assert zf.read(info + "entry_points.txt").decode() == \
            "[console_scripts]\ndecodelab = decodelab.entry.cli:main\n"
        assert "License: MIT\n" in zf.read(info + "METADATA").decode()
        recorded = {row[0]: row for row in
                    csv.reader(io.StringIO(zf.read(info + "RECORD").decode()))}
        assert set(recorded) == set(zf.namelist())
        assert recorded["decodelab/bundled/data/names.txt"][1] == wheels.record_hash(b"ann\nbob\n")


# --------------------------------------------------------------------------------------
# the per-user cache and the staleness rule


def test_cache_folder_follows_the_environment(tmp_path):
    assert cache_dir({"DECODELAB_CACHE": str(tmp_path / "a"),
                      "XDG_CACHE_HOME": str(tmp_path / "x")}) == tmp_path / "a"
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path / "x")}) == tmp_path / "x" / "decodelab"
    assert cache_dir({}) == Path.home() / ".cache" / "decodelab"
    assert cache_dir({"DECODELAB_CACHE": ""}) == Path.home() / ".cache" / "decodelab"


def test_make_key_is_the_same_for_the_same_inputs_in_any_order():
    a = keys.make_key({"data": "1", "code": {"x.py": "2", "y.py": "3"}})
    assert a == keys.make_key({"code": {"y.py": "3", "x.py": "2"}, "data": "1"})
    assert a != keys.make_key({"data": "1", "code": {"x.py": "2", "y.py": "4"}})


def test_an_output_is_fresh_exactly_while_its_key_and_content_match(tmp_path):
    out = tmp_path / "model.npz"
    out.write_bytes(b"weights")
    stamps = keys.Stamps(tmp_path / "keys.json")
    assert not stamps.fresh([out], "k1")  # never stamped
    stamps.record([out], "k1")
    assert keys.Stamps(tmp_path / "keys.json").fresh([out], "k1")  # stored on disk
    assert not stamps.fresh([out], "k2")  # other inputs
    os.utime(out, (1, 1))  # times play no part
    assert stamps.fresh([out], "k1")
    out.write_bytes(b"edited by hand")
    assert not stamps.fresh([out], "k1")
    out.unlink()
    assert not stamps.fresh([out], "k1")


def test_a_folder_is_stamped_by_its_whole_content(tmp_path):
    folder = tmp_path / "static"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.js").write_text("a")
    (folder / "sub" / "b.js").write_text("b")
    stamps = keys.Stamps(tmp_path / "keys.json")
    stamps.record([folder], "k")
    assert stamps.fresh([folder], "k")
    (folder / "sub" / "c.js").write_text("new file")
    assert not stamps.fresh([folder], "k")


def test_store_and_restore_through_the_per_user_cache(tmp_path):
    cache = UserCache(tmp_path / "cache")
    out_dir = tmp_path / "checkout" / "models"
    artifact = keys.Artifact("model x", [out_dir / "x.npz", out_dir / "x.json"],
                             {"data": "d", "code": {"m.py": "c"}})
    stamps = keys.Stamps(tmp_path / "checkout" / "keys.json")
    assert keys.restore(artifact, stamps, cache) is None  # nothing anywhere: make it
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "x.npz").write_bytes(b"made")
    (staged / "x.json").write_text("{}")
    keys.store(artifact, staged, stamps, cache)
    assert (out_dir / "x.npz").read_bytes() == b"made"
    assert keys.restore(artifact, stamps, cache) == "up to date"
    entry = cache.entry(artifact.key)
    assert entry == tmp_path / "cache" / "builds" / artifact.key
    assert json.loads((entry / "entry.json").read_text())["inputs"] == artifact.inputs

    # A fresh clone: no outputs, no stamps, the same inputs; the cache has it.
    clone = keys.Stamps(tmp_path / "clone" / "keys.json")
    moved = keys.Artifact("model x", [tmp_path / "clone" / "x.npz", tmp_path / "clone" / "x.json"],
                          dict(artifact.inputs))
    assert moved.key == artifact.key
    assert keys.restore(moved, clone, cache) == "from the cache"
    assert (tmp_path / "clone" / "x.npz").read_bytes() == b"made"
    assert clone.fresh(moved.outputs, moved.key)

    # A damaged cache entry is not used.
    (entry / "x.npz").write_bytes(b"damaged")
    (tmp_path / "clone" / "x.npz").unlink()
    assert cache.entry(artifact.key) is None
    assert keys.restore(moved, clone, cache) is None


def test_artifacts_that_are_not_cached_never_touch_the_cache(tmp_path):
    cache = UserCache(tmp_path / "cache")
    artifact = keys.Artifact("wheel", [tmp_path / "out" / "w.whl"], {"code": "c"}, cached=False)
    stamps = keys.Stamps(tmp_path / "keys.json")
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "w.whl").write_bytes(b"wheel")
    keys.store(artifact, staged, stamps, cache)
    assert keys.restore(artifact, stamps, cache) == "up to date"
    assert not (tmp_path / "cache").exists()


def write_package(root: Path, files: dict) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_module_files_follow_import_time_imports_only(tmp_path):
    package = write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/entry.py": "import numpy\nfrom pkg.a import f\nfrom pkg import b\n"
                        "from . import c\ntry:\n    from .sub.d import g\nexcept ImportError:\n"
                        "    pass\n\ndef later():\n    from pkg import lazy\n",
        "pkg/a.py": "import pkg.e\n",
        "pkg/b.py": "class K:\n    from pkg import f_in_class\n",
        "pkg/c.py": "",
        "pkg/e.py": "",
        "pkg/f_in_class.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/d.py": "from ..c import x\n",
        "pkg/lazy.py": "",
        "pkg/unused.py": "",
    })
    found = {p.relative_to(tmp_path).as_posix() for p in keys.module_files(package, ["pkg.entry"])}
    assert found == {"pkg/__init__.py", "pkg/entry.py", "pkg/a.py", "pkg/b.py", "pkg/c.py",
                     "pkg/e.py", "pkg/f_in_class.py", "pkg/sub/__init__.py", "pkg/sub/d.py"}
    both = keys.module_files(package, ["pkg.entry", "pkg.lazy"])
    assert package / "lazy.py" in both and package / "unused.py" not in both


# Run the real `python -m decodelab.core.models.train` main() for a tiny training (the fallback settings
# shrunk to two steps) and list the package modules that were loaded by the end.
LOADED_BY_TRAINING = """
import json, sys
from decodelab.core.models import recipes, train
recipes.FALLBACK = ({"context_size": 16}, recipes.TrainConfig(steps=2, batch_size=2, eval_every=1))
train.main(sys.argv[1:])
print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items()
                        if n.split(".")[0] == "decodelab" and getattr(m, "__file__", None))))
"""


@pytest.mark.parametrize("kind", ["bigram", "transformer"])
def test_a_models_key_covers_every_module_its_training_loads(kind, tmp_path):
    data = tmp_path / "tiny.txt"
    data.write_text("".join(f"{n}\n" for n in ["ann", "bob", "cyd", "dee", "eve"] * 4))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    proc = subprocess.run([sys.executable, "-c", LOADED_BY_TRAINING, "--model", kind,
                           "--dataset", "tiny", "--data", str(data), "--out",
                           str(tmp_path / "m.npz")], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(f"train: {kind} tiny")
    loaded = {Path(p).resolve() for p in json.loads(proc.stdout.splitlines()[-1])}
    covered = set(keys.module_files(build.PACKAGE_DIR, build.TRAIN_MODULES[kind]))
    assert build.PACKAGE_DIR / "core" / "models" / "train.py" in loaded
    assert loaded <= covered, f"loaded but not in the key: {sorted(loaded - covered)}"
    # generating is not training: its modules stay out of the process, and so out of the key
    assert not {build.PACKAGE_DIR / "core" / f"{m}.py" for m in ("models/session", "models/cachedforward", "rules/sampling")} & loaded
    assert build.PACKAGE_DIR / "fields.py" not in loaded
    assert (tmp_path / "m.npz").exists()


def test_syntax_digests_skip_words_and_keep_statements(tmp_path):
    source = tmp_path / "m.py"

    def digest(text):
        source.write_text(text)
        return keys.syntax_digests([source], tmp_path)["m.py"]

    first = digest('"""Doc."""\n\ndef f(x):\n    """Doc."""\n    assert x, "x must be set"\n'
                   '    if x < 0:\n        raise ValueError(f"{x} is negative")\n    return x * 2\n')
    assert digest('"""Another doc."""\n# a comment\n\ndef f(x):\n    """Other."""\n'
                  '    assert x, "x is needed"\n    if x < 0:  # never\n'
                  '        raise ValueError("negative: " + str(x))\n\n    return x * 2\n') == first
    assert digest('def f(x):\n    assert x\n    if x < 0:\n        raise ValueError()\n'
                  '    return x * 2\n') == first
    assert digest('def f(x):\n    assert x\n    if x < 0:\n        raise TypeError()\n'
                  '    return x * 2\n') != first  # another exception is another program
    assert digest('def f(x):\n    assert x\n    if x < 0:\n        raise ValueError()\n'
                  '    return x * 3\n') != first


def model_keys(data: dict) -> dict:
    return {build.model_name(*m): build.model_artifact(*m, data[m[1]]).key for m in build.MODELS}


def test_only_what_training_reads_changes_a_models_key(tmp_path, monkeypatch):
    """A sentence edited anywhere trains nothing; a recipe's setting retrains its model alone;
    the training's code, or another numpy, retrains every model that runs it."""
    import shutil

    package = tmp_path / "py" / "decodelab"
    shutil.copytree(build.PACKAGE_DIR, package,
                    ignore=shutil.ignore_patterns("__pycache__", "bundled"))
    monkeypatch.setattr(build, "PACKAGE_DIR", package)
    monkeypatch.setattr(build, "RECIPES", package / "core" / "models" / "recipes.py")
    monkeypatch.setattr(build, "MODELS_DIR", tmp_path)
    data = {}
    for dataset in {m[1] for m in build.MODELS}:
        (tmp_path / f"bpe-{dataset}.npz").write_bytes(f"merges of {dataset}".encode())
        data[dataset] = tmp_path / f"{dataset}.txt"
        data[dataset].write_text(f"a line of {dataset}\n")
    before = model_keys(data)
    assert len(set(before.values())) == len(build.MODELS)
    tasks_tokenizer = build.tokenizer_artifact("tasks", data["tasks"]).key

    def edit(path, old, new, moved={}):
        path = package / moved.get(path, path)
        text = path.read_text()
        assert old in text, (path, old)
        path.write_text(text.replace(old, new, 1))

    # a training module moved to a room of its own, every import of it following
    room = package / "core" / "elsewhere"
    room.mkdir()
    (room / "__init__.py").write_text('"""A room of words alone."""\n')
    (package / "core" / "models" / "layers.py").rename(room / "layers.py")
    for path in package.rglob("*.py"):
        text = path.read_text()
        path.write_text(text.replace("decodelab.core.models.layers", "decodelab.core.elsewhere.layers")
                        .replace("from decodelab.core.models import layers",
                                 "from decodelab.core.elsewhere import layers"))
    assert model_keys(data) == before
    assert build.tokenizer_artifact("tasks", data["tasks"]).key == tasks_tokenizer
    edit = functools.partial(edit, moved={"core/models/layers.py": "core/elsewhere/layers.py"})

    edit("fields.py", '"Temperature"', '"How hot"')  # a label and its help
    edit("core/rules/sampling.py", "\n\n", "\n\n# a comment of no consequence\n")
    edit("core/models/train.py", '"""Training the transformer', '"""Training, explained again: the transformer')
    edit("core/tokens/corpus.py", "Training text must be text.", "Please paste text.")  # an error's words
    edit("core/models/layers.py", "\n\n", "\n\n# another comment\n")
    edit("core/models/session.py", "\n\n", "\nSOMETHING_NEW = 1\n\n")  # generating, not training
    assert model_keys(data) == before
    assert build.tokenizer_artifact("tasks", data["tasks"]).key == tasks_tokenizer

    edit("core/models/recipes.py", "TrainConfig(steps=1500,", "TrainConfig(steps=1400,")  # the names model's
    after = model_keys(data)
    assert {m for m in before if after[m] != before[m]} == {"transformer-names"}

    edit("core/models/layers.py", "EPS = 1e-5", "EPS = 1e-6")
    changed = model_keys(data)
    assert {m for m in after if changed[m] != after[m]} == {build.model_name(*m) for m in build.MODELS}

    monkeypatch.setattr(build, "numpy_version", lambda: "0.0.1")
    assert not set(model_keys(data).values()) & set(changed.values())


def test_model_key_changes_with_data_code_and_command(tmp_path, monkeypatch):
    data = tmp_path / "names.txt"
    data.write_text("ann\n")
    first = build.model_artifact("transformer", "names", "chars", data)
    assert first.outputs == [build.MODELS_DIR / "transformer-names.npz"]
    assert first.key == build.model_artifact("transformer", "names", "chars", data).key
    def code_of(module):  # its digest, as a key holds it
        return keys.code_digests([build.PACKAGE_DIR / module])[0]

    assert code_of("core/models/train.py") in first.inputs["code"]
    assert code_of("entry/cli.py") not in first.inputs["code"]  # not part of training
    assert code_of("core/models/recipes.py") not in first.inputs["code"]  # its settings are, below
    assert first.inputs["settings"]["train"]["steps"] == 1500
    assert build.model_artifact("bigram", "names", "chars", data).key != first.key
    data.write_text("bob\n")
    assert build.model_artifact("transformer", "names", "chars", data).key != first.key


def test_a_bpe_model_key_covers_its_tokenizer_and_the_bpe_code(tmp_path, monkeypatch):
    data = tmp_path / "prose.txt"
    data.write_text("the cat\n")
    monkeypatch.setattr(build, "MODELS_DIR", tmp_path)
    (tmp_path / "bpe-prose.npz").write_bytes(b"merges one")
    first = build.model_artifact("transformer", "prose", "bpe", data)
    assert first.outputs == [tmp_path / "transformer-prose-bpe.npz"]
    assert keys.code_digests([build.PACKAGE_DIR / "core" / "tokens" / "bpe.py"])[0] in first.inputs["code"]
    assert first.key != build.model_artifact("transformer", "prose", "chars", data).key
    (tmp_path / "bpe-prose.npz").write_bytes(b"merges two")  # new merges: a new model
    assert build.model_artifact("transformer", "prose", "bpe", data).key != first.key


# --------------------------------------------------------------------------------------
# commands


def test_the_test_command_runs_every_tier_and_the_timed_browser_tests_alone():
    native, browser, alone = build.pytest_runs([])
    assert native[-2:] == ["-m", "not browser"] and "-n" in native
    assert browser[-2:] == ["-m", "browser and not alone"] and "-n" in browser
    assert alone[-2:] == ["-m", "browser and alone"] and "-n" not in alone
    fast, = build.pytest_runs(["--fast"])
    assert fast[-2:] == ["-m", build.FAST_TIER] and "--fast" not in fast
    assert all(f"not {tier}" in build.FAST_TIER for tier in ("browser", "install", "quality",
                                                             "reference"))
    given, = build.pytest_runs(["tests/test_sampling.py", "-k", "top_p"])
    assert given[-3:] == ["tests/test_sampling.py", "-k", "top_p"] and "-n" in given
    assert given.count("-m") == 1  # python -m pytest, no tier chosen


def test_the_tests_run_with_one_blas_thread_per_process_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    env = build.testing_env()
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "1"
    assert env["OMP_NUM_THREADS"] == "3"  # the caller's own choice
    assert env["PATH"] == __import__("os").environ["PATH"]


def test_help_lists_every_command_once(capsys):
    assert build.main(["help"]) == 0
    text = capsys.readouterr().out
    for name in build.COMMANDS:
        assert sum(line.startswith(f"  {name} ") for line in text.splitlines()) == 1, name
    assert "DECODELAB_CACHE" in text


def test_unknown_command_names_the_commands(capsys):
    assert build.main(["bulid"]) == 2
    err = capsys.readouterr().err
    assert "'bulid'" in err and "build" in err and "test" in err


# --------------------------------------------------------------------------------------
# the test server and dropped connections


def serve(server):
    """Serve in a thread; return an Event set after each request's connection is closed and
    the list of exception types the server was asked to handle."""
    handled, seen = threading.Event(), []
    close, handle_error = server.shutdown_request, server.handle_error

    def shutdown_request(request):
        close(request)
        handled.set()

    def recording_handle_error(request, address):
        seen.append(sys.exc_info()[0])
        handle_error(request, address)

    server.shutdown_request = shutdown_request
    server.handle_error = recording_handle_error
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return handled, seen


def test_server_is_silent_when_the_browser_drops_the_connection(tmp_path, capsys):
    (tmp_path / "big.bin").write_bytes(bytes(32 << 20))  # more than socket buffers hold
    server = build.make_server(tmp_path, quiet=True)
    handled, seen = serve(server)
    try:
        client = socket.create_connection(server.server_address[:2])
        client.sendall(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        head, chunk = b"", b"-"
        while b"\r\n" not in head and chunk:  # the status line: the server is answering
            chunk = client.recv(4096)
            head += chunk
        assert head.startswith(b"HTTP/1.0 200")
        # Close with a reset while the server is still writing, as a closed tab does.
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        assert handled.wait(60)
    finally:
        server.shutdown()
        server.server_close()
    assert seen and issubclass(seen[0], build.DROPPED_CONNECTION)
    err = capsys.readouterr().err
    assert "Exception occurred" not in err and "Traceback" not in err


def test_server_still_reports_any_other_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "a.txt").write_text("a")

    def broken(self):
        raise RuntimeError("a bug in the handler")

    monkeypatch.setattr(build.StaticHandler, "send_head", broken)
    server = build.make_server(tmp_path, quiet=True)
    handled, seen = serve(server)
    try:
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/a.txt",
                                   timeout=60)
        assert handled.wait(60)
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [RuntimeError]
    err = capsys.readouterr().err
    assert "Exception occurred during processing of request" in err
    assert "RuntimeError: a bug in the handler" in err


@pytest.mark.parametrize("error", [BrokenPipeError, ConnectionResetError,
                                   ConnectionAbortedError, ValueError, OSError])
def test_server_silences_exactly_the_dropped_connection_errors(error, capsys):
    server = build.make_server(ROOT, quiet=True)
    try:
        try:
            raise error("from the handler")
        except Exception:
            server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    err = capsys.readouterr().err
    dropped = error in (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
    assert ("Exception occurred" in err) != dropped


def test_service_worker_lists_every_other_file_with_its_digest(tmp_path):
    template = (ROOT / "web" / "sw.js").read_text()
    site = tmp_path / "site"
    (site / "pyodide").mkdir(parents=True)
    (site / "sw.js").write_text(template)
    (site / "index.html").write_text("<!doctype html>")
    (site / "pyodide" / "a.wasm").write_bytes(bytes(range(256)))
    (site / "index.html.gz").write_bytes(b"precompressed copies are not listed")
    (site / "index.html.br").write_bytes(b"nor are these")
    build = sitelib.write_service_worker(site, template)
    text = (site / "sw.js").read_text()
    listed = json.loads(text.split("const FILES = ", 1)[1].split(";\n", 1)[0].replace(",\n]", "\n]"))
    expected = [[name, "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()]
                for name, data in (("index.html", b"<!doctype html>"),
                                   ("pyodide/a.wasm", bytes(range(256))))]
    assert listed == expected
    assert f'const BUILD = "{build}";' in text
    # the same files give the same build; one changed byte gives a new one
    assert sitelib.write_service_worker(site, template) == build
    (site / "pyodide" / "a.wasm").write_bytes(bytes(range(255)))
    assert sitelib.write_service_worker(site, template) != build
    # a template without the lines to fill in is refused, not written half-filled
    with pytest.raises(ValueError, match="sw.js"):
        sitelib.write_service_worker(site, "const BUILD = 1;")


def test_precompressed_copies_are_the_files_gzipped_where_that_pays(tmp_path):
    import gzip

    (tmp_path / "sub").mkdir()
    text = ("the cat sat on the mat. " * 400).encode()
    noise = os.urandom(4000)  # gzip cannot shrink it: no copy
    (tmp_path / "app.js").write_bytes(text)
    (tmp_path / "sub" / "model.npz").write_bytes(noise)
    import brotli

    total = sitelib.write_precompressed(tmp_path)
    copy, squeezed = tmp_path / "app.js.gz", tmp_path / "app.js.br"
    assert gzip.decompress(copy.read_bytes()) == text and total["gzip"] == copy.stat().st_size
    assert brotli.decompress(squeezed.read_bytes()) == text and total["brotli"] == squeezed.stat().st_size
    assert squeezed.stat().st_size < copy.stat().st_size
    assert not (tmp_path / "sub" / "model.npz.gz").exists() and not (tmp_path / "sub" / "model.npz.br").exists()
    # the same bytes again (no timestamp), and a copy is never compressed again
    first = copy.read_bytes()
    sitelib.write_precompressed(tmp_path)
    assert copy.read_bytes() == first and not (tmp_path / "app.js.gz.gz").exists()
    assert not (tmp_path / "app.js.br.gz").exists() and not (tmp_path / "app.js.gz.br").exists()
    # the site's weight counts the files, not their copies
    assert sum(sitelib.weight(tmp_path).values()) == len(text) + len(noise)


def test_the_posters_weight_is_what_a_start_fetches(tmp_path):
    (tmp_path / "pyodide").mkdir()
    (tmp_path / "assets").mkdir()
    for name, size in (("pyodide.asm.wasm", 3_000_000), ("numpy-2.0.2-cp312-cp312-pyodide.whl", 1_400_000),
                       ("micropip-0.8.0-py3-none-any.whl", 900_000)):
        (tmp_path / "pyodide" / name).write_bytes(b"x" * size)
    sitelib.write_integrity(tmp_path / "pyodide")
    rows = json.loads((tmp_path / "pyodide" / "integrity.json").read_text())["files"]
    assert {r["path"]: r["startup"] for r in rows} == {  # micropip is never loaded
        "micropip-0.8.0-py3-none-any.whl": False, "numpy-2.0.2-cp312-cp312-pyodide.whl": True,
        "pyodide.asm.wasm": True}
    (tmp_path / "assets" / "manifest.json").write_text(json.dumps({"files": [{"path": "m.npz", "bytes": 600_000}]}))
    assert sitelib.start_weight(tmp_path) == 5_000_000
    (tmp_path / "embed.html").write_text("<p>Python loads once (about {{START_MB}})</p>")
    (tmp_path / "embed").mkdir()
    (tmp_path / "embed" / "poster.js").write_text('note = "(about {{START_MB}}, once)";')
    sitelib.write_start_weight(tmp_path)
    assert (tmp_path / "embed.html").read_text() == "<p>Python loads once (about 5 MiB)</p>"
    assert "(about 5 MiB, once)" in (tmp_path / "embed" / "poster.js").read_text()
    with pytest.raises(ValueError, match="embed.html"):  # already filled in: refused, not guessed
        sitelib.write_start_weight(tmp_path)
