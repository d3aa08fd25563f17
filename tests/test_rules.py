"""Every decoding rule of the field table reaches the three places a rule must reach, or is
refused there by name: beam search (it draws nothing, so a rule that shapes a draw is refused
unless it is off), transformers' generation config (written under its name there, or left out
with why), and the handoff's script (its processors read the config's name, or run.json
compares the model's own probabilities and says why). A rule added to the table and to Rules
without a place in one of them fails here."""

import pytest
from decodelab.core.interop import hf
from decodelab.core.loops.generate import start
from decodelab.core.library import Library
from decodelab.core.rules.settings import (
    BEAM_IGNORES,
    RULE_NAMES,
    SAMPLING_ONLY,
    Settings,
    validate,
)
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import FIELD_BY_NAME
from decodelab.lesson.handoff import RAW_NOTES, REPEAT, bundle, plan


@pytest.fixture(scope="module")
def library(artifacts):
    return Library(artifacts)


def run_of(library, **settings):
    return start(library, {"model": "transformer", "cache_check": False, **settings}).run()


def on_value(name: str):
    """A value of a rule's field that switches the rule on: the other truth value, another
    choice, or the middle of its range."""
    f = FIELD_BY_NAME[name]
    if f.kind == "bool":
        return not f.default
    if f.kind == "choice":
        return next(c for c in f.choices if c != f.default)
    middle = (f.min + f.max) / 2
    return int(middle) if f.kind == "int" else middle


def script_processors() -> str:
    """The text of the script's processors(): what it builds from the generation config."""
    return REPEAT[REPEAT.index("def processors"):REPEAT.index("return lp.LogitsProcessorList")]


@pytest.mark.parametrize("name", RULE_NAMES)
def test_every_rule_reaches_beam_search_the_config_and_the_script_or_is_refused_by_name(
        library, name):
    """Each decoding rule, switched on, in the three places a rule of the field table must
    reach: beam search refuses it by name (it draws nothing) or leaves it as it is; the
    generation config writes it under transformers' name, or leaves it out with why; the
    script's processors read that name, or run.json compares the model's own probabilities
    and says why in a note."""
    value = on_value(name)
    assert value != FIELD_BY_NAME[name].default
    beam = {"model": "transformer", "strategy": "beam", name: value}
    if name in BEAM_IGNORES:
        assert getattr(validate(beam), name) == value
    else:
        assert name in SAMPLING_ONLY
        with pytest.raises(FieldErrors) as e:
            validate(beam)
        (error,) = [x for x in e.value.errors if x.field == name]
        assert error.message.startswith(f"{FIELD_BY_NAME[name].label} has no meaning for beam "
                                        f"search")
    config = hf.generation_config(Settings(model="transformer", **{name: value}))
    if name in hf.RULES:
        assert config[hf.RULES[name]] == (not value if name == "greedy" else value)
        assert f"gen.{hf.RULES[name]}" in script_processors()
    else:
        assert name in hf.NOT_IN_TRANSFORMERS and name in RAW_NOTES
        assert name not in config and value not in config.values()
        said = plan(run_of(library, dataset="names", seed=1, max_new_tokens=4,
                           **{name: value}))
        assert RAW_NOTES[name] in said["notes"]
        assert {s["compare"] for s in said["steps"]} == {"raw"}


def test_a_rule_the_config_has_no_place_for_is_refused_by_name(library, monkeypatch):
    """A rule that neither reaches the generation config nor is listed as missing from
    transformers stops the export and the zip with its name, instead of leaving silently."""
    monkeypatch.delitem(hf.RULES, "top_k")
    with pytest.raises(FieldError) as e:
        hf.generation_config(Settings(model="transformer", top_k=5))
    assert e.value.field == "top_k"
    assert e.value.message == ("Top-k has no setting in transformers' generation config yet: "
                               "set it back to 0 to take the run there.")
    assert hf.generation_config(Settings(model="transformer"))["top_k"] == 0  # off: no harm
    with pytest.raises(FieldError) as e:
        bundle(run_of(library, dataset="names", seed=1, max_new_tokens=3, top_k=5))
    assert e.value.field == "top_k"
