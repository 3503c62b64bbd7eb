"""The import contract of pyproject.toml holds, and no import cycle remains among fxviz
modules (function-level imports included)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _graph() -> grimp.ImportGraph:
    sys.path.insert(0, str(ROOT))  # this checkout's fxviz, whatever is installed
    try:
        return grimp.build_graph("fxviz", exclude_type_checking_imports=True, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_among_fxviz_modules():
    graph = _graph()
    cycles = _cycles(graph)
    assert cycles == [], "import cycles (module-level or function-level imports):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b"]]


def test_the_layer_contract_holds():
    """``lint-imports`` (import-linter, as ``make lint`` runs it) on this checkout."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.fail(f"import-linter is not installed in {sys.prefix}: pip install -e '.[test]'")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_every_fxviz_module_has_a_layer():
    """The contract is exhaustive: a new top-level module must be given a layer."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(
        c for c in config["tool"]["importlinter"]["contracts"] if c.get("id") == "layers"
    )
    assert contract["exhaustive"] is True
    named = {
        part.strip().strip("()")
        for layer in contract["layers"]
        for part in layer.replace(":", "|").split("|")
    }
    children = {m.split(".")[1] for m in _graph().modules if m.count(".") >= 1 and m != "fxviz"}
    assert children <= named, f"modules with no layer: {sorted(children - named)}"
