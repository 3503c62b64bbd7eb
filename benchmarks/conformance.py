"""The conformance matrix, printed: every verb on every zoo model, captured every way.

Each cell is one check of tests/conformance/cells.py; it prints ``✓`` (passed),
``refused`` (the documented refusal, with its one message), ``xfail`` (a known bug another
branch fixes: tests/conformance/expected.py says which) or ``✗`` (anything else: a bug).
The test suite runs the same cells (tests/conformance/test_matrix.py); this prints all of
them, the slow rows included.

Run from the repository root:

    .venv/bin/python benchmarks/conformance.py [--quick] [--models a,b] [--kinds k,..] [--json F]
    .venv/bin/python benchmarks/conformance.py --from-json a.json,b.json  # print saved runs

``--from-json`` prints the matrix of runs saved with ``--json`` (one file a model, say;
a later file's cells replace an earlier one's), so a long run can be made in parts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tests.conformance.cells import CHECKS, KINDS, Subject  # noqa: E402
from tests.conformance.expected import outcome  # noqa: E402
from tests.conformance.zoo import ZOO  # noqa: E402

MARK = {"pass": "✓", "refused": "refused", "xfail": "xfail", "n/a": "·", "fail": "✗"}


def run_cell(subject: Subject, verb: str) -> tuple[str, str]:
    """``(verdict, detail)`` of one cell."""
    try:
        CHECKS[verb](subject)
        error = None
    except Exception as e:  # every failure is a verdict here, never a crash
        error = e
    return outcome(subject.name, subject.kind, verb, error)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke test: value_if, every kind, no file round trip",
    )
    parser.add_argument("--models", default="", help="comma-separated zoo names")
    parser.add_argument("--kinds", default="", help="comma-separated capture kinds")
    parser.add_argument("--verbs", default="", help="comma-separated verbs")
    parser.add_argument("--json", default="", help="also write every cell's verdict here")
    parser.add_argument("--from-json", default="", help="print these saved runs (comma-separated)")
    options = parser.parse_args()
    if options.from_json:
        cells = {}
        for path in options.from_json.split(","):
            cells.update(json.loads(Path(path).read_text()))
        return show(cells)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    models = options.models.split(",") if options.models else list(ZOO)
    if options.quick:
        models = ["value_if"]
    kinds = options.kinds.split(",") if options.kinds else list(KINDS)
    verbs = options.verbs.split(",") if options.verbs else list(CHECKS)
    if options.quick:
        verbs = [v for v in verbs if v != "save_load"]
    print("targets: every cell ✓, refused (its documented message) or xfail (a known bug)")
    cells: dict[str, dict[str, str]] = {}
    bad = 0
    start = time.perf_counter()
    for name in models:
        for kind in kinds:
            subject = Subject(name, kind)
            row = []
            for verb in verbs:
                verdict, detail = run_cell(subject, verb)
                cells[f"{name}/{kind}/{verb}"] = {"verdict": verdict, "detail": detail}
                bad += verdict == "fail"
                row.append(f"{MARK[verdict]:>7}")
                if verdict == "fail":
                    print(f"      ✗ {name}/{kind}/{verb}: {detail}", flush=True)
            print(f"{name:>16} {kind:>8} " + " ".join(row), flush=True)
            if options.json:  # row by row: a run stopped part way keeps what it did
                Path(options.json).write_text(json.dumps(cells, indent=1, ensure_ascii=False))
    print(f"{'':>25} " + " ".join(f"{v[:7]:>7}" for v in verbs))
    counts = {v: sum(c["verdict"] == v for c in cells.values()) for v in MARK}
    print(
        f"{len(cells)} cells in {time.perf_counter() - start:.0f} s: "
        + ", ".join(f"{MARK[k]} {n}" for k, n in counts.items() if n)
    )
    if options.json:
        Path(options.json).write_text(json.dumps(cells, indent=1, ensure_ascii=False))
    return 1 if bad else 0


def show(cells: dict[str, dict[str, str]]) -> int:
    """Print saved cells: the matrix, each failure, and the counts by verb and by kind."""
    names = list(dict.fromkeys(k.split("/")[0] for k in cells))
    verbs, kinds = list(CHECKS), list(KINDS)
    for key, cell in cells.items():
        if cell["verdict"] == "fail":
            print(f"      ✗ {key}: {cell['detail'][:300]}")
    for name in names:
        for kind in kinds:
            row = [cells.get(f"{name}/{kind}/{verb}", {"verdict": ""})["verdict"] for verb in verbs]
            if any(row):
                marks = [f"{MARK.get(v, '?'):>7}" for v in row]
                print(f"{name:>16} {kind:>8} " + " ".join(marks))
    print(f"{'':>25} " + " ".join(f"{v[:7]:>7}" for v in verbs))
    order = ("pass", "refused", "xfail", "fail")
    print(f"\n{'':>18} " + " ".join(f"{MARK[v]:>7}" for v in order))
    for label, axis, values in (("verb", 2, verbs), ("kind", 1, kinds)):
        for value in values:
            got = [c["verdict"] for k, c in cells.items() if k.split("/")[axis] == value]
            print(f"{label} {value:>13} " + " ".join(f"{got.count(v):>7}" for v in order))
    total = [c["verdict"] for c in cells.values()]
    print(f"{len(names)} models, {len(total)} cells: " + ", ".join(
        f"{MARK[v]} {total.count(v)}" for v in (*order, "n/a") if total.count(v)
    ))  # fmt: skip
    return 1 if "fail" in total else 0


if __name__ == "__main__":
    sys.exit(main())
