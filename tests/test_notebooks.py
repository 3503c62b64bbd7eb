"""Every tutorial notebook runs top to bottom (nbclient, a real kernel), and is saved clean.

The kernel runs in a temporary folder (and so does this process while it starts the
kernel), so files a tutorial writes, such as 01's ``quickstart-report.html``, never land in
the checkout.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_tutorials():
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{i:02d}" for i in range(1, 11)]


def _files_near_the_notebooks() -> set[Path]:
    return {p for folder in (ROOT, ROOT / "notebooks") for p in folder.iterdir() if p.is_file()}


@pytest.mark.slow  # about a minute in all; still part of the default run (and CI)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        f"{path.name} is saved with outputs: clear them before committing"
    )
    before = _files_near_the_notebooks()
    monkeypatch.chdir(tmp_path)  # a kernel that ignores the path below inherits this one
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,  # run every cell, then report each one that failed
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [
        f"cell {i}: {o['ename']}: {o['evalue']}"
        for i, cell in enumerate(notebook.cells)
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    ran = [c for c in notebook.cells if c.cell_type == "code" and c.get("execution_count")]
    assert not errors, "\n".join(errors)
    assert len(ran) == sum(c.cell_type == "code" for c in notebook.cells)
    assert _files_near_the_notebooks() == before, "the notebook wrote into the checkout"
    if path.name.startswith("01"):
        assert (tmp_path / "quickstart-report.html").stat().st_size > 0
