"""Fast, offline tests of the pure parts of build.py."""

import base64
import csv
import hashlib
import io
import json
import sys
import tarfile
import threading
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import build  # noqa: E402

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
    assert build.record_hash(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    value = build.record_hash(b"\xff" * 100).split("=", 1)[1]
    assert "=" not in value and "+" not in value and "/" not in value
    padded = value + "=" * (-len(value) % 4)
    assert base64.urlsafe_b64decode(padded) == hashlib.sha256(b"\xff" * 100).digest()


def test_wheel_record_matches_every_member(tmp_path):
    package = make_package(tmp_path)
    filename, data = build.wheel_bytes(package, PROJECT)
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
            assert recorded[name][1] == build.record_hash(content)
            assert recorded[name][2] == str(len(content))
        metadata = zf.read(info + "METADATA").decode()
        assert "Name: decodelab\n" in metadata and "Version: 1.2.3\n" in metadata
        assert "Requires-Dist: numpy>=1.26\n" in metadata
        wheel = zf.read(info + "WHEEL").decode()
        assert "Root-Is-Purelib: true" in wheel and "Tag: py3-none-any" in wheel
        assert all(i.date_time == build.ZIP_EPOCH for i in zf.infolist())


def test_wheel_is_reproducible(tmp_path):
    package = make_package(tmp_path)
    first = build.wheel_bytes(package, PROJECT)
    # New modification times and a new stray cache file must not change the bytes.
    for path in package.rglob("*.py"):
        path.write_text(path.read_text())
    (package / "__pycache__" / "other.pyc").write_bytes(b"more")
    assert build.wheel_bytes(package, PROJECT) == first
    (package / "__init__.py").write_text("VERSION = '1.2.4'\n")
    assert build.wheel_bytes(package, PROJECT)[1] != first[1]


def test_lock_entry_and_site_lock(tmp_path):
    wheel = tmp_path / "decodelab-1.2.3-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes")
    entry = build.lock_entry(wheel, PROJECT)
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
    lock = build.site_lock(base, entry)
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
    (tmp_path / "pkg.whl").write_bytes(b"junk")
    cdn, _ = source("https://cdn.example/pkg.whl", error=OSError("name resolution failed"))
    pypi, _ = source("PyPI other==1.0", data=b"something else")
    with pytest.raises(build.BuildError) as caught:
        build.obtain("pkg.whl", expected, [cdn, pypi], cache_dir=tmp_path)
    message = str(caught.value)
    assert "pkg.whl" in message and expected in message
    assert "sha256 mismatch (got " + hashlib.sha256(b"junk").hexdigest() in message
    assert "https://cdn.example/pkg.whl" in message and "name resolution failed" in message
    assert "PyPI other==1.0" in message
    assert hashlib.sha256(b"something else").hexdigest() in message
    assert (tmp_path / "pkg.whl").read_bytes() == b"junk"  # nothing unverified is stored


def test_obtain_falls_back_and_caches_the_verified_file(tmp_path):
    good = b"the real file"
    expected = hashlib.sha256(good).hexdigest()
    (tmp_path / "pkg.whl").write_bytes(b"corrupted")
    cdn, cdn_calls = source("cdn", error=OSError("offline"))
    pypi, pypi_calls = source("pypi", data=good)
    path = build.obtain("pkg.whl", expected, [cdn, pypi], cache_dir=tmp_path)
    assert path == tmp_path / "pkg.whl" and path.read_bytes() == good
    assert cdn_calls == ["cdn"] and pypi_calls == ["pypi"]
    # A verified cache hit does not touch any source.
    again, again_calls = source("pypi", data=good)
    assert build.obtain("pkg.whl", expected, [again], cache_dir=tmp_path) == path
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
    names, members = build.names_corpus(sdist)
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
    paragraphs = [build.clean_inline(p) for p in build.rst_paragraphs(RST)]
    prose = [p for p in paragraphs if build.is_prose(p)]
    assert prose == [
        "This is a plain paragraph of running text, with a reference and a literal "
        "and a footnote that continues on a second line:",
        "A bullet item that is long enough to count as a real paragraph of text "
        "and wraps onto a second line.",
    ]
    assert not any("code block" in p or "table" in p or "Title" in p for p in paragraphs)


def test_clean_inline_markup():
    clean = build.clean_inline
    assert clean("see `the docs <https://x.org/>`__ now") == "see the docs now"
    assert clean("a :PEP:`287` b") == "a 287 b"
    assert clean("the |name|_ here") == "the name here"
    assert clean('the characters "-", "|" and "*".') == 'the characters "-", "|" and "*".'
    assert clean("keep snake_case words and trailing refs_.") == \
        "keep snake_case words and trailing refs."
    assert clean("Example ::") == "Example"


def test_is_prose_rejects_code_tables_and_urls():
    assert build.is_prose("The quick brown fox jumps over the lazy dog again today.")
    assert not build.is_prose("Too short to count.")
    assert not build.is_prose("See https://example.org for all the details you need here.")
    assert not build.is_prose("name     value     other     columns     of     a     table here")
    assert not build.is_prose("x = f(a[0], b[1]) + g(c[2], d[3]) * h(e[4]) / k(z[9]);")


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
