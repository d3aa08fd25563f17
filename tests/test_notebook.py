"""The PyTorch notebook (notebooks/smollm2-in-pytorch.ipynb) run as a learner runs it, top to
bottom in a fresh kernel: every comparison it prints passes, and it is kept without outputs."""

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.reference  # runs transformers and PyTorch

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "smollm2-in-pytorch.ipynb"
CHECKS = 14  # the CHECK lines it prints (a check that silently vanished is a failure too)


def test_the_notebook_is_stored_without_outputs():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


def test_every_check_of_the_notebook_passes():
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.outputs if o.get("output_type") == "stream")
    checks = [line for line in printed.splitlines() if line.startswith("CHECK ")]
    assert len(checks) == CHECKS, checks
    failed = [line for line in checks if not line.endswith(" ok")]
    assert not failed, failed
    assert "temperature-first: transformers keeps 423 tokens, decodelab 423" in printed
    assert "'{\\n  \"city\": \"Tokyo' | valid JSON: False" in printed
