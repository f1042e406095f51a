"""notebooks/quickstart.ipynb runs from top to bottom (with tiny settings)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "quickstart.ipynb"


def test_quickstart_notebook_executes(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = nb.cells[1]
    assert "ITERATIONS" in params.source and "RUNS_ROOT" in params.source
    params.source = f"ITERATIONS = 2\nTRAVERSALS = 8\nEVAL_GAMES = 20\nRUNS_ROOT = {str(tmp_path)!r}\n"
    client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    outputs = "".join(
        o.get("text", "") for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    )
    assert "stopped after iteration 2" in outputs
    assert "win rate" in outputs and "safe_heuristic" in outputs
    assert "final score (agent, safe_heuristic)" in outputs
    runs = list(tmp_path.iterdir())
    assert len(runs) == 1 and (runs[0] / "metrics.jsonl").exists()
