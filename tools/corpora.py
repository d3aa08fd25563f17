"""Preparing the two corpora from pinned PyPI source distributions.

Both sources are pinned by sha256 (tools/fetch.py checks them), and so is the text written from
them, so the trained models are reproducible:

  names  US Census 1990 first names from the `names` package (MIT): lower case, each once.
  prose  English paragraphs from the docutils documentation files that state they have been
         placed in the public domain: reStructuredText reduced to running text.

A corpus is two files in a folder: <name>.txt (one sequence per line) and <name>.json (its
provenance: source, licence, sha256, counts, description).
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from tools.common import BuildError, say, sha256_bytes

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
SOURCES = {"names": NAMES_SDIST, "prose": DOCUTILS_SDIST}

# sha256 of the corpus text files; a rebuild must give the same bytes.
TEXT_SHA256 = {
    "names": "cba14f452b7768bd7fe093035a67491d4a334061634ccfd51522fb796910e75e",
    "prose": "8c8742bfc96bb6034c8cce51d881250dfa05f138da9b6718b2f0d83d4af9009f",
}


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


def write_corpus(name: str, sequences: list[str], provenance: dict, folder: Path) -> Path:
    """Write <name>.txt (one sequence per line) and <name>.json into `folder`.

    The text must hash to TEXT_SHA256[name]; otherwise nothing is written and the build
    stops (a different text would silently change every trained model).
    """
    text = "".join(seq + "\n" for seq in sequences).encode("utf-8")
    digest = sha256_bytes(text)
    expected = TEXT_SHA256.get(name)
    if expected and digest != expected:
        raise BuildError(f"data/{name}.txt would have sha256 {digest}, "
                         f"pinned {expected}: the source or the extraction changed")
    folder.mkdir(parents=True, exist_ok=True)
    txt = folder / f"{name}.txt"
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
    (folder / f"{name}.json").write_text(json.dumps(meta, indent=2) + "\n")
    vocab = len(set("".join(sequences)))
    say(f"corpus {name}: {len(sequences)} sequences, {meta['characters']} characters, "
        f"{vocab} symbols, sha256 {digest}")
    return txt


def prepare(name: str, sdist: Path, folder: Path) -> Path:
    """Write corpus `name` from its source distribution into `folder`; return the .txt."""
    package, version, filename = SOURCES[name][:3]
    if name == "names":
        names, members = names_corpus(sdist)
        return write_corpus("names", names, {
            "title": "US first names",
            "source": f"PyPI package {package} {version} ({filename}): " + ", ".join(members),
            "licence": "MIT (names package); the data are US Census Bureau 1990 name "
                       "frequency lists",
            "description": "First names from the 1990 US Census (male and female lists), "
                           "lower case, each name once, sorted; one name per line.",
        }, folder)
    if name == "prose":
        paragraphs, documents = prose_corpus(sdist)
        return write_corpus("prose", paragraphs, {
            "title": "English prose",
            "source": f"PyPI package {package} {version} ({filename}): the {len(documents)} "
                      "documents under docs/ (*.txt) that state they have been placed in the "
                      "public domain",
            "licence": "public domain (docutils documentation)",
            "description": "Paragraphs of running English text from the docutils "
                           "documentation: markup, code, tables and lists of fields removed, "
                           "printable ASCII only; one paragraph per line.",
        }, folder)
    raise BuildError(f"unknown corpus {name!r}; corpora: {', '.join(SOURCES)}")
