"""The page's pure JavaScript modules, tested by Node's own test runner (tests/js/*.test.js): the
store, the address, the settings as the form holds them, and the words and numbers the page
draws. Each file is one test here, so the README's test command runs them with the rest; a
failure shows Node's report of it."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "tests" / "js").glob("*.test.js"))


def test_there_are_javascript_tests():
    assert FILES, "tests/js/ has no *.test.js"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_javascript_module(path):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: the page's JavaScript tests need Node 20 or newer")
    out = subprocess.run([node, "--test", "--test-reporter=spec", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    ran = re.search(r"^ℹ tests (\d+)$", out.stdout, re.M)  # the runner's summary
    assert ran and int(ran.group(1)) > 0, out.stdout  # a file whose tests never ran fails
