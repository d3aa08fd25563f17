"""The package as Python users get it: the built wheel installed into a fresh virtual
environment and run from a folder outside the checkout, and where `Library()` looks for its
corpora and models."""

import json
import os
import shlex
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from decodelab.core import library as assets
from decodelab.core.tokens.corpus import Corpus
from decodelab.core.library import Library
from decodelab.errors import FieldError

from tests.conftest import ROOT

README = ROOT / "README.md"


# --------------------------------------------------------------------------------------
# where Library() looks


def make_assets(folder: Path, names=("ann", "bob", "cyd")) -> Path:
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "names.txt").write_text("".join(n + "\n" for n in names))
    return folder


@pytest.fixture
def places(tmp_path, monkeypatch):
    """An installed-looking package folder (no checkout around it) and no $DECODELAB_ASSETS."""
    package_data = tmp_path / "site-packages" / "decodelab" / "bundled"
    monkeypatch.setattr(assets, "PACKAGE_DATA", package_data)
    monkeypatch.delenv("DECODELAB_ASSETS", raising=False)
    return package_data


def test_search_order_is_environment_then_package_then_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("DECODELAB_ASSETS", str(tmp_path / "mine"))
    labels = [label for label, _ in assets.search_path()]
    assert labels == ["$DECODELAB_ASSETS", "the package's data", "the checkout's build output"]
    assert [folder for _, folder in assets.search_path()] == \
        [tmp_path / "mine", ROOT / "py" / "decodelab" / "bundled", ROOT / "artifacts"]


def test_the_first_place_with_a_corpus_wins(tmp_path, places, monkeypatch):
    make_assets(places, ["packaged"])
    assert Library().corpus("names").sequences == ["packaged"]
    mine = make_assets(tmp_path / "mine", ["mine"])
    monkeypatch.setenv("DECODELAB_ASSETS", str(mine))
    assert Library().corpus("names").sequences == ["mine"]
    monkeypatch.setenv("DECODELAB_ASSETS", str(tmp_path / "empty"))  # set, but holds nothing
    assert Library().corpus("names").sequences == ["packaged"]


def test_no_corpus_anywhere_names_each_place_and_how_to_build(places):
    assert [label for label, _ in assets.search_path()] == ["$DECODELAB_ASSETS",
                                                           "the package's data"]
    library = Library()
    for ask in (library.datasets, lambda: library.corpus("names"),
                lambda: library.model("transformer", "names")):
        with pytest.raises(FieldError) as caught:
            ask()
        error = caught.value
        assert error.field == "dataset"
        assert error.message.startswith("No datasets were found; looked in: ")
        assert "$DECODELAB_ASSETS (not set)" in error.message
        assert f"the package's data ({places})" in error.message
        assert "python3 build.py artifacts" in error.message


def test_a_folder_given_without_corpora_is_named(tmp_path):
    with pytest.raises(FieldError) as caught:
        Library(tmp_path).corpus("names")
    assert caught.value.message.startswith(f"No datasets in {tmp_path / 'data'}/")
    assert "python3 build.py artifacts" in caught.value.message
    library = Library(tmp_path)
    library.add_custom(Corpus("mine", ["ann", "bob"]))  # text pasted into the page
    assert library.datasets() == ["mine"]


# --------------------------------------------------------------------------------------
# the README's command line, run by the installed wheel


def readme_examples():
    """(arguments, the output the README shows or None) for each command of the README's
    "The command line" section."""
    section = README.read_text(encoding="utf-8").split("\n## The command line\n", 1)[1]
    block = section.split("\n## ", 1)[0].split("```sh\n", 1)[1].split("```", 1)[0]
    examples = []
    for line in block.splitlines():
        if line.startswith("# {") and examples:
            examples[-1] = (examples[-1][0], line[2:])
        elif line.startswith("python3 -m decodelab "):
            examples.append((shlex.split(line)[3:], None))
    return examples


EXAMPLES = readme_examples()


def test_the_readme_has_examples_with_and_without_output():
    assert len(EXAMPLES) >= 6
    assert any(out for _, out in EXAMPLES) and any(out is None for _, out in EXAMPLES)
    assert {args[0] for args, _ in EXAMPLES} >= {"probs", "generate", "kv-memory", "eval",
                                                 "cache-check"}


def shown(text: str):
    """The README's output as JSON: a trailing `...` means more keys follow, and each number
    keeps the digits it is written with."""
    partial = text.rstrip().endswith(", ...}")
    if partial:
        text = text.rstrip()[:-len(", ...}")] + "}"
    return json.loads(text, parse_float=Decimal), partial


def agrees(expected, actual) -> bool:
    """A number written with fewer digits agrees when the output rounds to it."""
    if isinstance(expected, Decimal):
        quantum = Decimal(1).scaleb(expected.as_tuple().exponent)
        return isinstance(actual, (int, float)) and \
            Decimal(actual).quantize(quantum) == expected
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and \
            all(agrees(e, a) for e, a in zip(expected, actual))
    return type(expected) is type(actual) and expected == actual


def test_readme_output_comparison_rules():
    expected, partial = shown('{"d": 4.5e-06, "n": 20, "ok": true, ...}')
    assert partial and agrees(expected["d"], 4.5123e-06) and not agrees(expected["d"], 4.6e-06)
    assert agrees(expected["n"], 20) and not agrees(expected["n"], 20.0)
    assert agrees(expected["ok"], True) and not agrees(expected["ok"], 1)
    full, partial = shown('{"p": [0.8807970779778823, 0.11920292202211755]}')
    assert not partial and agrees(full["p"], [0.8807970779778823, 0.11920292202211755])
    assert not agrees(full["p"], [0.8807970779778822, 0.11920292202211755])


def sensible(args: list, out: dict) -> None:
    """What a command's JSON must hold when the README shows no output for it."""
    options = dict(zip(args[1::2], args[2::2]))
    if args[0] == "generate":
        assert out["settings"]["model"] == options["--model"]
        assert out["settings"]["dataset"] == options["--dataset"]
        assert out["prompt"] == options["--prompt"] and out["steps"]
        assert out["finish_reason"] in ("stop", "length")
        if "--json-mode" in args:  # JSON mode never writes what no JSON can continue
            assert out["json"]["status"] in ("valid", "incomplete")
            assert all("grammar" in step for step in out["steps"])
    elif args[0] == "eval":
        assert (out["model"], out["dataset"]) == (options["--model"], options["--dataset"])
        assert out["val_sequences"] > 0 and 0 < out["val_nll"] < 3.3
        library = Library(ROOT / "artifacts")
        model = library.model(out["model"], out["dataset"])
        assert out["params"] == model.n_params
        if out["model"] == "transformer":  # the build scored it when it trained it
            assert out["val_nll"] == pytest.approx(model.info["val_nll"], abs=1e-4)
        else:
            corpus = library.corpus(out["dataset"])
            assert out["val_nll"] == pytest.approx(model.nll(corpus.val), rel=1e-12)
    else:
        assert out


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DECODELAB_ASSETS", "PYTHONHOME")}
    return dict(env, PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)


def run(cmd, cwd, **env):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd,
                          env=clean_env(**env), timeout=600)


@pytest.fixture(scope="module")
def wheels():
    """The two wheels as the build makes them now (quick when they are up to date)."""
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "wheel"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pip_wheel, = (ROOT / "dist").glob("decodelab-*.whl")
    page_wheel, = (ROOT / "artifacts" / "pyodide").glob("decodelab-*.whl")
    return pip_wheel, page_wheel


def make_venv(folder: Path, wheel: Path) -> Path:
    """A fresh virtual environment that sees the system's numpy and pip (no download), with
    `wheel` installed; returns its folder."""
    proc = run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", folder],
               folder.parent)
    assert proc.returncode == 0, proc.stderr
    python = folder / "bin" / "python"
    proc = run([python, "-m", "pip", "install", "--no-index", "--no-deps", "--force-reinstall",
                "--quiet", wheel], folder.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder


@pytest.fixture(scope="module")
def installed(wheels, tmp_path_factory):
    """(venv folder, an empty working folder outside the checkout) with the pip wheel."""
    base = tmp_path_factory.mktemp("install")
    venv = make_venv(base / "venv", wheels[0])
    (base / "work").mkdir()
    return venv, base / "work"


@pytest.mark.install
def test_installed_package_is_the_wheel_with_its_own_data(installed):
    venv, work = installed
    proc = run([venv / "bin" / "python", "-c",
                "import json, decodelab, decodelab.core.library as a; "
                "print(json.dumps([decodelab.__file__, str(a.default_dir())]))"], work)
    assert proc.returncode == 0, proc.stderr
    module, data = json.loads(proc.stdout)
    site = Path(module).parents[1]
    assert Path(module).is_relative_to(venv) and site.name == "site-packages"
    assert Path(data) == site / "decodelab" / "bundled"
    assert sorted(p.name for p in Path(data).rglob("*") if p.is_file()) == sorted(
        p.name for pattern in ("data/*.txt", "data/*.json", "models/*.npz")
        for p in (ROOT / "artifacts").glob(pattern))


@pytest.mark.install
@pytest.mark.parametrize("args, output", EXAMPLES, ids=[" ".join(a[:3]) for a, _ in EXAMPLES])
def test_readme_example_runs_in_the_installed_package(args, output, installed):
    venv, work = installed
    proc = run([venv / "bin" / "python", "-m", "decodelab", *args], work)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    if output is not None:
        expected, partial = shown(output)
        if not partial:
            assert set(out) == set(expected)
        for key, value in expected.items():
            assert key in out and agrees(value, out[key]), (key, value, out.get(key))
    else:
        sensible(args, out)
    if args[0] != "eval":  # (eval is checked above without scoring the data a second time)
        # The same command from the source checkout gives the same answer.
        source = run([sys.executable, "-m", "decodelab", *args], work,
                     PYTHONPATH=str(ROOT / "py"), DECODELAB_ASSETS=str(ROOT / "artifacts"))
        assert source.returncode == 0, source.stderr
        timeless = lambda o: {k: v for k, v in o.items() if k != "measured"}  # noqa: E731
        assert timeless(json.loads(source.stdout)) == timeless(out)  # (paged's wall time aside)


@pytest.mark.install
def test_console_script_generates_from_anywhere(installed):
    venv, work = installed
    args = ["generate", "--model", "bigram", "--dataset", "names", "--prompt", "ma", "--seed", "3"]
    proc = run([venv / "bin" / "decodelab", *args], work)
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(run([venv / "bin" / "decodelab", *args, "--json"], work).stdout)
    assert proc.stdout == trace["prompt"] + trace["text"] + "\n"
    assert f"finish_reason={trace['finish_reason']}" in proc.stderr


@pytest.mark.install
def test_a_package_without_data_says_where_it_looked(wheels, tmp_path):
    """The page's wheel carries no data: installed alone, it names every place it looked
    and how to get the data, and takes them from $DECODELAB_ASSETS when pointed there."""
    venv = make_venv(tmp_path / "venv", wheels[1])
    args = ["generate", "--model", "bigram", "--dataset", "names", "--prompt", "ma", "--seed", "3"]
    proc = run([venv / "bin" / "decodelab", *args], tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert lines[0].startswith("decodelab generate: --dataset: No datasets were found; looked in")
    assert "$DECODELAB_ASSETS (not set)" in lines[0]
    assert str(site / "decodelab" / "bundled") in lines[0]
    assert "python3 build.py artifacts" in lines[0]
    proc = run([venv / "bin" / "decodelab", *args], tmp_path,
               DECODELAB_ASSETS=str(ROOT / "artifacts"))
    assert proc.returncode == 0 and proc.stdout.startswith("ma"), proc.stderr
