"""The page's JavaScript modules fit together: every static import names a file of web/ that
exists and a name that file exports. A browser finds a broken import only when it loads the
module, and then the whole page (or the widget's poster) stops before it draws anything; here
it is found in a second, for every module, including those only an embed or a worker loads.

Read as text: ES module syntax is regular enough for this (the imports and exports of web/ are
written one statement each, as below)."""

import re
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[1] / "web"
MODULES = sorted(WEB.rglob("*.js"))
BUILT = ("../pyodide/",)  # the runtime the build copies in beside web/'s files

IMPORT = re.compile(r'^\s*(?:import|export)\s+(?:\{([^}]*)\}|\*\s+as\s+\w+)\s+from\s+"([^"]+)";',
                    re.M)
SIDE_EFFECT = re.compile(r'^\s*import\s+"([^"]+)";', re.M)
DYNAMIC = re.compile(r'\bimport\(\s*"([^"]+)"\s*\)')
DECLARED = re.compile(r"^\s*export\s+(?:async\s+)?(?:function\*?|const|let|var|class)\s+([\w$]+)",
                      re.M)
LISTED = re.compile(r"^\s*export\s+\{([^}]*)\}", re.M)


def names(listing: str, side: int) -> set:
    """The names of `{ a, b as c }`: side 0 the names as the other module has them, 1 as here."""
    out = set()
    for item in listing.split(","):
        item = item.split("//")[0].strip()
        if item:
            parts = [p.strip() for p in item.split(" as ")]
            out.add(parts[side] if len(parts) > 1 else parts[0])
    return out


def exports(path: Path) -> set:
    text = path.read_text(encoding="utf-8")
    return set(DECLARED.findall(text)) | {n for block in LISTED.findall(text)
                                          for n in names(block, 1)}


def problems(path: Path) -> list:
    text = path.read_text(encoding="utf-8")
    found = []
    targets = [(m.group(2), names(m.group(1), 0) if m.group(1) is not None else set())
               for m in IMPORT.finditer(text)]
    targets += [(spec, set()) for spec in SIDE_EFFECT.findall(text) + DYNAMIC.findall(text)]
    for spec, wanted in targets:
        if spec.startswith(BUILT):
            continue
        if not spec.startswith((".", "/")):
            found.append(f"imports {spec!r}: the page has no bundler, so only paths work")
            continue
        target = (path.parent / spec).resolve()
        if not target.is_file():
            found.append(f"imports {spec}, which does not exist")
            continue
        missing = sorted(wanted - exports(target))
        if missing:
            found.append(f"imports {', '.join(missing)} from {spec}, which does not export it")
    return found


def test_the_reader_sees_each_kind_of_import_and_export(tmp_path):
    (tmp_path / "a.js").write_text('export function f() {}\nexport const K = 1;\n'
                                   'const g = 2;\nexport { g as G };\n')
    (tmp_path / "b.js").write_text('import { f, K as k } from "./a.js";\n'
                                   'import {\n  G,\n  H, // not there\n} from "./a.js";\n'
                                   'import "./gone.js";\n')
    assert exports(tmp_path / "a.js") == {"f", "K", "G"}
    assert problems(tmp_path / "b.js") == ["imports H from ./a.js, which does not export it",
                                           "imports ./gone.js, which does not exist"]


def test_there_are_modules():
    assert len(MODULES) > 40


@pytest.mark.parametrize("path", MODULES, ids=[p.relative_to(WEB).as_posix() for p in MODULES])
def test_every_import_names_a_file_and_an_export(path):
    assert problems(path) == []
