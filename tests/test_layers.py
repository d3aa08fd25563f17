"""The package's layers, as docs/architecture.md draws them: core (tokens, models, rules, the
generation loop) imports neither the real model's reader (pretrained), nor the lesson's
analyses, nor the entry points; pretrained builds on core alone; lesson imports no entry point; and no module imports itself back through others, not even inside a function
(such an import hides a cycle that a refactor later trips over). Read from the source with
`ast`, so every import counts, wherever it stands."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "py"
LAYERS = ("core", "pretrained", "lesson", "entry")  # each may import only those before it (and
# the top level)


def modules() -> dict:
    """module name -> its file, for every module of the package."""
    out = {}
    for path in (ROOT / "decodelab").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path, known: dict) -> set:
    """The package's modules that `name` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                found.add(full if full in known else base)
    return {m for m in found if m in known and m != name}


def graph() -> dict:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def layer(name: str):
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def cycles(edges: dict) -> list:
    """Every cycle a depth-first walk meets (a package importing its own children is no cycle)."""
    state, found = {}, []

    def walk(node, path):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(edges[node]):
            if nxt.startswith(node + ".") or node.startswith(nxt + "."):
                continue
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, path)
        path.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            walk(node, [])
    return found


def test_the_walk_finds_a_cycle_and_a_clean_graph_has_none():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b", "a.x"}, "a.x": {"a"}, "b": set()}) == []


def test_the_graph_sees_imports_inside_functions():
    edges = graph()
    assert len(edges) > 40
    assert "decodelab.core.rules.sampling" in edges["decodelab.core.loops.generate"]
    assert "decodelab.errors" in edges["decodelab.fields"]


def test_no_module_imports_itself_back():
    assert cycles(graph()) == []


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for name, targets in graph().items():
        here = layer(name)
        if here is None:
            continue
        for target in targets:
            there = layer(target)
            if there is not None and LAYERS.index(there) > LAYERS.index(here):
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_the_layering_rule_catches_an_upward_import():
    assert layer("decodelab.core.library") == "core" and layer("decodelab.pretrained.files") == \
        "pretrained"
    assert LAYERS.index("pretrained") > LAYERS.index("core")


# A model declares what it is and allows (core/models/base.py); the rest of the package asks it
# (model.own_data, model.limits, model.has_template, logits_at), never its kind nor by probing.
# A tokenizer likewise (core/tokens/base.py: its special tokens, the characters it writes).
ASKED_NOT_PROBED = re.compile(r'kind\s*[!=]=\s*"pretrained"|getattr\((\w+\.)*model\b'
                              r'|getattr\([^)]*"(logits_at\w*|prefill_steps|has_cache|template|'
                              r'check_tolerance|cache_reserve|generation_dtype|special_ids|chars|'
                              r'start_ids|eos_id|bos_id|pad_id)"'
                              r'|hasattr\([^)]*"(bos_id|pad_id|special_ids|chars)"')


def test_a_model_is_asked_what_it_allows_never_probed_or_named_by_kind():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "decodelab").rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ASKED_NOT_PROBED.search(line)]
    assert found == []
    assert ASKED_NOT_PROBED.search('if model.kind == "pretrained":')
    assert ASKED_NOT_PROBED.search('at = getattr(self.model, "logits_at_steps", None)')
    assert ASKED_NOT_PROBED.search('getattr(session, "prefill_steps", None)')
    assert ASKED_NOT_PROBED.search('known = getattr(tokenizer, "chars", None)')


# Before a model is loaded, a setting's Model value is told to be one read from a file in one
# declared place (fields.from_file); nothing else tests it against the table of such models.
NAMED_BY_VALUE = re.compile(r"\bin\s*\(?[^#\n]*\bPRETRAINED\b")


def test_a_model_read_from_a_file_is_told_by_its_value_in_one_place():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "decodelab").rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if NAMED_BY_VALUE.search(re.sub(r"\bfor\s+\w+\s+in\b", "", line))
             and not line.lstrip().startswith("#")
             and path.relative_to(ROOT).as_posix() != "decodelab/fields.py"]
    assert found == []
    assert NAMED_BY_VALUE.search('if raw.get("model") in PRETRAINED:')
    assert NAMED_BY_VALUE.search('if args.model not in (None, *PRETRAINED):')
