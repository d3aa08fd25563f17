"""The page's HTML and CSS, assembled when the site is built.

web/index.html is the page's frame; each part of the page lives beside its script, as an HTML
fragment (web/ui/workbench.html, web/kv/batch.html, ...), pulled in by

    <!-- include: kv/batch.html -->

Every control of a setting is written from Python's field table (decodelab.fields): its label,
its help, its range, its default, its choices and their words. A fragment only says where a
field goes and, for a panel's own form, what differs there:

    <field name="top_k"></field>                   a workbench control (id and name: top_k)
    <field name="top_k" id="pg-top-k" label="k" aside="(top-k)">
      <hint>Top-k: {allowed}.</hint>               a panel's: its own id, label and hint
    </field>
    <fields group="more"></fields>                 every field of a workbench group not placed
                                                   by name anywhere on the page, in table order

A <field> may also hold <option value="...">words</option> (a panel's own choices) and any
other markup, which follows the error line inside the field (a "What it does" box). Attributes:
id, label, aside (words for screen readers after the label), class (added to the field's box),
box-id (the box's id), hidden, control ("text": a text box for a number), hint ("none": no
hint line; "elsewhere": its hint is elsewhere on the page, but the control names it), options
("none": the page fills them).

style.css is the list of the stylesheets of the parts, in cascade order, as @import lines; the
build writes them into one style.css, in that order.

Left out: anything that runs in the page (the scripts fill in only what depends on what Python
loaded: the datasets, the models' words).
"""

from __future__ import annotations

import html
import re
import sys
import textwrap
from pathlib import Path

from tools.common import PY_DIR

if str(PY_DIR) not in sys.path:  # the field table is the package's (numpy is not needed for it)
    sys.path.insert(0, str(PY_DIR))

INCLUDE = re.compile(r"^([ \t]*)<!-- include: ([\w./-]+) -->[ \t]*\n", re.M)
FIELD = re.compile(r"^([ \t]*)<field\s+([^>]*)>(.*?)</field>[ \t]*\n", re.M | re.S)
GROUP = re.compile(r"^([ \t]*)<fields\s+group=\"(\w+)\"></fields>[ \t]*\n", re.M)
ATTR = re.compile(r'([\w-]+)="([^"]*)"|([\w-]+)(?=\s|$)')
IMPORT = re.compile(r'^@import url\("([\w./-]+)"\);[ \t]*\n', re.M)


class PageError(ValueError):
    pass


def _attrs(text: str) -> dict:
    return {m.group(1) or m.group(3): m.group(2) if m.group(1) else True
            for m in ATTR.finditer(text)}


def include(text: str, web: Path, seen=()) -> str:
    """Every <!-- include: path --> replaced by that file (itself expanded), indented as it."""
    def one(m):
        indent, path = m.group(1), m.group(2)
        if path in seen:
            raise PageError(f"{path} includes itself")
        source = web / path
        if not source.is_file():
            raise PageError(f"web/{path} is missing (included by the page)")
        body = include(source.read_text(), web, (*seen, path))
        return "".join(indent + line if line.strip() else line
                       for line in body.splitlines(keepends=True))
    return INCLUDE.sub(one, text)


def _sampling_only() -> frozenset:
    from decodelab.core.rules.sampling import GREEDY_IGNORES

    return frozenset(GREEDY_IGNORES)


def _allowed(spec) -> str:
    words = spec.allowed()
    return words[:1].upper() + words[1:]


def _number_text(x) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _input(spec, cid: str, named: str, control: str, described: str) -> str:
    """The control itself: a box, a switch, a choice or a text area."""
    e = html.escape
    common = f'id="{cid}" {named}'
    if spec.kind == "bool":
        return f'<input {common} type="checkbox" disabled aria-describedby="{described}">'
    if spec.kind == "lines":
        rows = spec.rows or 2
        return (f'<textarea {common} rows="{rows}" spellcheck="false" disabled '
                f'aria-describedby="{described}"></textarea>')
    value = ""  # the default, as the box shows it before the page fills it in
    default = spec.default
    if isinstance(default, (int, float, str)) and not isinstance(default, bool) and default != "":
        value = f' value="{e(default if isinstance(default, str) else _number_text(default))}"'
    if spec.kind in ("int", "float") and control != "text":
        mode = "numeric" if spec.kind == "int" else "decimal"
        step = spec.step if spec.step is not None else 1
        limits = "".join(f' {name}="{_number_text(x)}"' for name, x in (("min", spec.min),
                                                                         ("max", spec.max))
                         if x is not None)
        return (f'<input {common} type="number" inputmode="{mode}" step="{_number_text(step)}"'
                f'{limits}{value} disabled aria-describedby="{described}">')
    mode = ""
    if spec.kind in ("numbers", "int", "float"):
        from decodelab.fields import FIELD_BY_NAME

        item = FIELD_BY_NAME.get(spec.item) if spec.item else spec
        mode = ' inputmode="numeric"' if item.kind == "int" else ' inputmode="decimal"'
    caps = ' autocapitalize="off"' if spec.kind == "text" else ""
    return (f'<input {common} type="text"{mode} autocomplete="off"{caps} spellcheck="false"'
            f'{value} disabled aria-describedby="{described}">')


def _select(spec, cid: str, named: str, described: str, options: str, own: list) -> str:
    e = html.escape
    if own:
        items = own
    elif options == "none":
        items = []
    else:
        labels = spec.choice_labels or spec.choices
        items = [f'<option value="{e(c)}">{e(w)}</option>' for c, w in zip(spec.choices, labels)]
    inner = "".join(f"\n  {item}" for item in items)
    return (f'<select id="{cid}" {named} disabled aria-describedby="{described}">{inner}'
            f'{chr(10) if items else ""}</select>')


def field(spec, attrs: dict, body: str) -> str:
    """One field's block: its box, label, control, hint, "not used" note and error line."""
    e = html.escape
    workbench = "id" not in attrs  # the workbench's own controls are named by the setting
    cid = attrs.get("id", spec.name)
    named = f'name="{spec.name}"' if workbench else f'data-field="{spec.name}"'
    hint_mode = attrs.get("hint", "")
    hint = re.search(r"<hint>(.*?)</hint>", body, re.S)
    own = [m.group(0) for m in re.finditer(r"<option\b[^>]*>.*?</option>", body, re.S)]
    extra = textwrap.dedent(re.sub(r"<hint>.*?</hint>|<option\b[^>]*>.*?</option>", "", body,
                                   flags=re.S).strip("\n")).strip()
    na = workbench and spec.name in _sampling_only()
    ids = []
    if hint_mode != "none":
        ids.append(f"{cid}-hint")
    if na:
        ids.append(f"{cid}-na")
    ids.append(f"{cid}-error")
    described = " ".join(ids)
    if spec.kind == "choice":
        control = _select(spec, cid, named, described, attrs.get("options", ""), own)
    else:
        control = _input(spec, cid, named, attrs.get("control", ""), described)
    if spec.slider and workbench:
        lo, hi, step = spec.slider
        control = (f'<div class="dial">\n  {control}\n  <input id="{cid}-slider" type="range" '
                   f'min="{_number_text(lo)}" max="{_number_text(hi)}" step="{_number_text(step)}"'
                   f' disabled aria-label="{e(spec.label)} (slider)" aria-describedby="{cid}-hint">'
                   f'\n</div>')
    label = attrs.get("label", e(spec.label))
    if attrs.get("aside"):
        label += f' <span class="visually-hidden">{attrs["aside"]}</span>'
    lines = []
    if spec.kind == "bool":
        lines += [control, f'<label for="{cid}">{label}</label>']
    else:
        lines += [f'<label for="{cid}">{label}</label>', control]
    if hint_mode not in ("none", "elsewhere"):
        words = hint.group(1).strip() if hint else e(spec.help)
        words = words.replace("{allowed}", f'<span class="allowed">{e(_allowed(spec))}</span>')
        lines.append(f'<p class="hint" id="{cid}-hint">{words}</p>')
    if na:
        lines.append(f'<p class="na" id="{cid}-na" hidden></p>')
    lines.append(f'<p class="error" id="{cid}-error" hidden></p>')
    if extra:
        lines.append(extra)
    classes = " ".join(filter(None, ["field", "check" if spec.kind == "bool" else "",
                                     attrs.get("class", "")]))
    box = f'<div class="{classes}"'
    if workbench:
        box += f' data-field="{spec.name}"'
    if attrs.get("box-id"):
        box += f' id="{attrs["box-id"]}"'
    if na:
        box += ' data-sampling-only="true"'
    if attrs.get("hidden"):
        box += " hidden"
    body_lines = "\n".join(lines).splitlines()
    return box + ">\n" + "".join(f"  {line}\n" for line in body_lines) + "</div>\n"


def fields(text: str) -> str:
    """Every <field> and <fields group> of the page written out from the field table."""
    from decodelab.fields import FIELD_BY_NAME, FIELDS

    def indent(block: str, pad: str) -> str:
        return "".join(pad + line if line.strip() else line
                       for line in block.splitlines(keepends=True))

    placed = set()

    def one(m):
        pad, attrs, body = m.group(1), _attrs(m.group(2)), m.group(3)
        name = attrs.get("name")
        if name not in FIELD_BY_NAME:
            raise PageError(f"<field name={name!r}>: no such field in decodelab.fields")
        if "id" not in attrs:
            placed.add(name)
        return indent(field(FIELD_BY_NAME[name], attrs, body), pad)

    text = FIELD.sub(one, text)

    def group(m):
        pad, name = m.group(1), m.group(2)
        rest = [f for f in FIELDS if f.group == name and f.name not in placed]
        return "".join(indent(field(f, {}, ""), pad) for f in rest)

    return GROUP.sub(group, text)


def page(web: Path, name: str = "index.html") -> str:
    """web/<name> with its parts included and its fields written."""
    text = fields(include((web / name).read_text(), web))
    left = re.search(r"<!-- include:|<field\b|<fields\b", text)
    if left:
        raise PageError(f"{name}: {text[left.start():left.start() + 60]!r} was not expanded")
    return text


def stylesheet(web: Path, name: str = "style.css") -> str:
    """style.css with every @import written in, in order (the cascade of the concatenation)."""
    def one(m):
        source = web / m.group(1)
        if not source.is_file():
            raise PageError(f"web/{m.group(1)} is missing (imported by {name})")
        return stylesheet(web, m.group(1)) if IMPORT.search(source.read_text()) else \
            source.read_text().rstrip("\n") + "\n"
    return IMPORT.sub(one, (web / name).read_text())


def parts(web: Path) -> set:
    """The files of web/ that the build writes into others (fragments and imported sheets):
    the site needs them no more."""
    out = set()
    for path in web.rglob("*"):
        rel = path.relative_to(web)
        if path.suffix == ".html" and len(rel.parts) > 1:
            out.add(rel.as_posix())
        if path.suffix == ".css" and len(rel.parts) > 1:
            out.add(rel.as_posix())
    return out
