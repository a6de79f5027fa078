"""The analysts' notebook runs top to bottom on a real Jupyter kernel against the sample index."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "query_the_index.ipynb"


def test_notebook_executes_without_errors(indexed_sample, monkeypatch):
    monkeypatch.setenv("RAG_LAKE_DIR", str(indexed_sample["lake"]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "15" in text and "employee_handbook_en.md" in text  # the leave answer and its citation
    assert "finance/budget_memo_2026.md" in text  # only the finance principal sees the memo
