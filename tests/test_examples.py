"""Every example a reader is given shows what it says: each link, element and snippet in the
README and docs/, and the page's own defaults, writes text, at its own settings and at every
temperature a widget's slider invites. (A seed can end a run at once: with seed 3 the first
draw is u = 0.086, and after "ma" end-of-sequence, first in id order, holds more than that
share at every temperature up to 3, so a widget on it always says "No new text".)"""

import html
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from decodelab.core.loops.generate import start
from decodelab.core.library import Library
from decodelab.core.rules.settings import NAMES
from decodelab.fields import FIELD_BY_NAME

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEMPERATURES = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0)  # the slider's range, from calm to wild
LINK = re.compile(r"(?:embed|index)\.html\?[^\s\"'`)<>]*")
ELEMENT = re.compile(r"<decodelab-embed\b([^>]*)>")
ATTR = re.compile(r"([\w-]+)=\"([^\"]*)\"")


def settings_of(pairs) -> dict:
    """The run settings among a link's parameters or an element's attributes (the rest are the
    widget's own: panels, controls, lms, ...)."""
    out = {}
    for key, value in pairs:
        name = key.replace("-", "_")
        if name not in NAMES:
            continue
        if FIELD_BY_NAME[name].kind == "lines":
            out.setdefault(name, []).append(value)
        else:
            out[name] = value
    return out


def examples():
    found = {}
    for doc in DOCS:
        text = doc.read_text()
        for m in LINK.finditer(text):
            query = urlsplit(html.unescape(m.group(0))).query
            found.setdefault(m.group(0), (doc.name, settings_of(parse_qsl(query))))
        for m in ELEMENT.finditer(text):
            found.setdefault(m.group(0), (doc.name, settings_of(ATTR.findall(m.group(1)))))
    found["the page's defaults"] = ("fields.py", {})
    return found


EXAMPLES = examples()


def test_the_docs_hold_the_examples_this_test_runs():
    where = {doc for doc, _ in EXAMPLES.values()}
    assert {"README.md", "embedding.md", "testing.md"} <= where, where
    assert len(EXAMPLES) >= 12


@pytest.fixture(scope="module")
def library(artifacts):
    return Library(artifacts)


@pytest.mark.parametrize("example", list(EXAMPLES), ids=list(EXAMPLES))
def test_every_documented_example_writes_text_at_every_temperature(library, example):
    doc, settings = EXAMPLES[example]
    given = [float(settings["temperature"])] if "temperature" in settings else []
    empty = []
    for temperature in dict.fromkeys(given + list(TEMPERATURES)):
        run = start(library, {**settings, "temperature": temperature}).run()
        trace = run.trace()
        if not trace["text"]:
            empty.append((temperature, trace["finish_reason"], trace.get("stop_reason")))
    assert not empty, f"{example} ({doc}) writes nothing at: {empty}"
