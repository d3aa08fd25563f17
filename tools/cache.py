"""The per-user cache: downloads by their sha256, and what the build made by its content key.

It lives outside every checkout, so a new clone on a machine that built before takes its
downloads and trained models from here instead of fetching and training again. Where:
$DECODELAB_CACHE, else $XDG_CACHE_HOME/decodelab, else ~/.cache/decodelab.

    downloads/<sha256>/<file name>   a downloaded file whose content has that sha256
    builds/<key>/<file names>        the files one recipe made from inputs with that key
    builds/<key>/entry.json          the inputs the key hashes, and each file's sha256

Nothing enters the cache unverified, every write is atomic (a temporary name, then a rename),
and a copy that does not match its sha256 any more is ignored. Two builds may share the cache
at once: when both make the same entry, the first rename wins and the other copy is dropped.
Old entries are never removed; delete the folder to reclaim the space.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from tools.common import package_file, sha256_file

ENTRY_FILE = "entry.json"


def cache_dir(environ=None) -> Path:
    """The folder, by the package's rule (decodelab/pretrained/files.py: an installed package
    looks for the real model's file there)."""
    return package_file("pretrained/files.py").cache_dir(environ)


class UserCache:
    def __init__(self, root=None):
        self.root = Path(root) if root is not None else cache_dir()

    # downloads ------------------------------------------------------------------------

    def download_path(self, sha256: str, filename: str) -> Path:
        return self.root / "downloads" / sha256 / filename

    def find_download(self, sha256: str, filename: str) -> tuple[Path | None, str]:
        """(path, "") for a verified copy, else (None, why there is none)."""
        path = self.download_path(sha256, filename)
        if not path.exists():
            return None, "not present"
        got = sha256_file(path)
        if got != sha256:
            return None, f"sha256 mismatch (got {got})"
        return path, ""

    def keep_download(self, sha256: str, filename: str, data: bytes) -> Path:
        """Store verified bytes (the caller checked them against sha256)."""
        path = self.download_path(sha256, filename)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return path

    # built artifacts ------------------------------------------------------------------

    def entry(self, key: str) -> Path | None:
        """The folder of a complete, intact entry for `key`, or None."""
        folder = self.root / "builds" / key
        try:
            meta = json.loads((folder / ENTRY_FILE).read_text())
        except (OSError, ValueError):
            return None
        files = meta.get("files", {})
        if meta.get("key") != key or not files:
            return None
        for name, sha256 in files.items():
            path = folder / name
            if not path.is_file() or sha256_file(path) != sha256:
                return None
        return folder

    def keep_entry(self, key: str, inputs: dict, files: list[Path]) -> Path:
        """Copy `files` (distinct names) into the entry for `key`; return the entry's folder."""
        builds = self.root / "builds"
        builds.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=builds, prefix=".part-"))
        try:
            meta = {"key": key, "inputs": inputs, "files": {}}
            for path in files:
                shutil.copyfile(path, tmp / path.name)
                meta["files"][path.name] = sha256_file(tmp / path.name)
            (tmp / ENTRY_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            final = builds / key
            if final.exists() and self.entry(key) is None:
                shutil.rmtree(final)  # a damaged entry: replace it
            try:
                os.rename(tmp, final)
            except OSError:
                if self.entry(key) is None:  # not another build's finished copy: a real failure
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final
