"""The decodelab wheels, built by hand from py/decodelab/ (same input, same bytes).

Two wheels of the same package and version:

  the page's   code only; the browser worker installs it and fetches the corpora and models
               separately, each checked against the site's manifest, so they travel once.
  pip's        the same code plus the corpora and models as package data under
               decodelab/bundled/, so `pip install` gives a package that works anywhere.

The folder py/decodelab/bundled/ (filled by the build for `pip install .` from a checkout) is
never taken from the package folder: the data enter the pip wheel only from the list given.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import zipfile
from pathlib import Path

DATA_FOLDER = "bundled"  # decodelab/bundled/{data,models}/ in an installed package

# Fixed timestamp for wheel members (the earliest a zip file can store).
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def record_hash(data: bytes) -> str:
    """The hash format of a wheel RECORD: sha256=<urlsafe base64, no padding>."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def package_files(package_dir: Path) -> list[Path]:
    """The package's own files: no caches, no compiled files (nor the kernels' native build,
    which is this machine's alone), not the bundled data."""
    return [path for path in sorted(package_dir.rglob("*"))
            if path.is_file() and path.suffix != ".pyc"
            and not {"__pycache__", "built", DATA_FOLDER} & set(path.relative_to(package_dir).parts)]


def wheel_bytes(package_dir: Path, project: dict, data=()) -> tuple[str, bytes]:
    """A pure-Python wheel of `package_dir` as (file name, content).

    data: (path inside the data folder, bytes) pairs, stored as
    <package>/bundled/<path> (the pip wheel's corpora and models)."""
    name, version = project["name"], project["version"]
    dist = re.sub(r"[-_.]+", "_", name).lower()
    info = f"{dist}-{version}.dist-info"
    files = [(f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}", path.read_bytes())
             for path in package_files(package_dir)]
    files += [(f"{package_dir.name}/{DATA_FOLDER}/{inner}", content) for inner, content in data]

    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if project.get("description"):
        metadata.append(f"Summary: {project['description']}")
    licence = project.get("license")
    if isinstance(licence, dict) and licence.get("text"):
        metadata.append(f"License: {licence['text']}")
    if project.get("requires-python"):
        metadata.append(f"Requires-Python: {project['requires-python']}")
    metadata += [f"Requires-Dist: {req}" for req in project.get("dependencies", [])]
    files.append((f"{info}/METADATA", ("\n".join(metadata) + "\n").encode()))
    wheel = ["Wheel-Version: 1.0", "Generator: decodelab build.py", "Root-Is-Purelib: true",
             "Tag: py3-none-any"]
    files.append((f"{info}/WHEEL", ("\n".join(wheel) + "\n").encode()))
    scripts = project.get("scripts", {})
    if scripts:
        lines = ["[console_scripts]"] + [f"{cmd} = {target}" for cmd, target in scripts.items()]
        files.append((f"{info}/entry_points.txt", ("\n".join(lines) + "\n").encode()))
    record = [f"{arc},{record_hash(content)},{len(content)}" for arc, content in files]
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for arcname, content in files:
            member = zipfile.ZipInfo(arcname, date_time=ZIP_EPOCH)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = 0o644 << 16
            member.create_system = 3
            zf.writestr(member, content)
    return f"{dist}-{version}-py3-none-any.whl", buffer.getvalue()
