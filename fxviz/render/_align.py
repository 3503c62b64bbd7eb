"""How ``diff``, ``compare`` and ``shapes_diff`` pair the nodes of two graphs, following
what passes do: the one alignment of the comparison engine."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from fxviz._record._records import Recording
from fxviz.render._model import DrawGraph, DrawNode

__all__ = ["Pair", "align", "transformer_provenance"]


@dataclasses.dataclass(frozen=True)
class Pair:
    """One row of a diff: a node before, its counterpart after, and what happened."""

    before: DrawNode | None
    after: DrawNode | None
    status: str  # same, changed, replaced, added, removed, inlined
    detail: str = ""
    reference: DrawNode | None = None  # an inserted node's values are compared with this
    # filled by the comparison engine when values were measured (fxviz.diff with inputs)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    allclose: bool | None = None
    diverged: bool | None = None
    reason: str = ""


def transformer_provenance(after: Any) -> tuple[Any, dict[str, str]]:
    """``(graph, {new node: old node})`` for a Recording of a ``torch.fx.Transformer`` (its
    run says which new node came from which old one: ``record.produced``); other objects
    come back as they are, with no provenance."""
    if isinstance(after, Recording) and isinstance(after.output, torch.fx.GraphModule):
        return after.output, {new: r.name for r in after.values() for new in r.produced}
    return after, {}


def align(before: DrawGraph, after: DrawGraph, provenance: dict[str, str]) -> list[Pair]:
    """Greedy matching, most telling key first: provenance, name, target and rank."""
    match: dict[str, DrawNode] = {}  # after id -> before node
    taken: set[str] = set()
    for new_name, old_name in provenance.items():
        a = next((n for n in after.nodes if n.name == new_name), None)
        b = next((n for n in before.nodes if n.name == old_name), None)
        if a is not None and b is not None and b.id not in taken and a.id not in match:
            match[a.id] = b
            taken.add(b.id)
    levels = max((len(n.align) for n in [*before.nodes, *after.nodes]), default=0)
    for level in range(levels):
        index: dict[str, DrawNode] = {}
        for b in before.nodes:
            if b.id not in taken and level < len(b.align):
                index.setdefault(b.align[level], b)
        for a in after.nodes:
            if a.id in match:
                continue
            for key in a.align:
                b = index.get(key)
                if b is not None and b.id not in taken and key in b.align[level : level + 1]:
                    match[a.id] = b
                    taken.add(b.id)
                    break
    inputs_before = _inputs(before)
    inputs_after = _inputs(after)
    renamed = {b.id: a_id for a_id, b in match.items()}
    replaced = _pair_replacements(before, after, match, taken, renamed)
    fused = _fused_into(before, after, match, replaced)
    references = _inserted_references(before, after, match, inputs_before, inputs_after)
    names_before = {n.name for n in before.nodes}
    names_after = {n.name for n in after.nodes}
    pairs: list[Pair] = []
    removed = [b for b in before.nodes if b.id not in taken]
    position = {b.id: i for i, b in enumerate(before.nodes)}
    for a in after.nodes:
        b = match.get(a.id)
        while removed and b is not None and position[removed[0].id] < position[b.id]:
            gone = removed.pop(0)
            pairs.append(Pair(gone, None, "removed", fused.get(gone.id, "")))
        if b is None:
            reference = references.get(a.id)
            detail = f"inserted in place of the value of {reference.name}" if reference else ""
            pairs.append(Pair(None, a, "added", detail, reference=reference))
            continue
        pair = _compare_structure(b, a, inputs_before, inputs_after, renamed, before)
        if a.id in replaced or _erased_and_recreated(b, a, names_before, names_after):
            pair = Pair(b, a, "replaced", _replacement_detail(b, a, pair.detail))
        pairs.append(pair)
    pairs.extend(Pair(b, None, "removed", fused.get(b.id, "")) for b in removed)
    return pairs


def _pair_replacements(
    before: DrawGraph,
    after: DrawGraph,
    match: dict[str, DrawNode],
    taken: set[str],
    renamed: dict[str, str],
) -> set[str]:
    """Pair erased nodes with the nodes put in their place (``replace_all_uses_with``):
    the same users score 2, the same inputs 1; best scores first, nearest position on
    ties, repeated until nothing more pairs (a chain of replacements). Updates ``match``,
    ``taken`` and ``renamed``; returns the ids (in ``after``) of the replacements."""
    users_before, users_after = _users(before), _users(after)
    inputs_before, inputs_after = _inputs(before), _inputs(after)
    order_before = {n.id: i for i, n in enumerate(before.nodes)}
    order_after = {n.id: i for i, n in enumerate(after.nodes)}
    replaced: set[str] = set()
    while True:
        gone = [b for b in before.nodes if b.id not in taken and b.kind != "output"]
        new = [a for a in after.nodes if a.id not in match and a.kind != "output"]
        candidates = []
        for b in gone:
            users = {renamed.get(u) for u in users_before.get(b.id, [])}
            inputs = [renamed.get(i) for i in inputs_before.get(b.id, [])]
            for a in new:
                score = 0
                if users and None not in users and users == set(users_after.get(a.id, [])):
                    score += 2
                if inputs and None not in inputs and inputs == inputs_after.get(a.id, []):
                    score += 1
                if score:
                    distance = abs(
                        order_before[b.id] / len(order_before)
                        - order_after[a.id] / len(order_after)
                    )
                    candidates.append((-score, distance, order_after[a.id], b, a))
        paired = False
        for _, _, _, b, a in sorted(candidates, key=lambda c: c[:3]):
            if b.id in taken or a.id in match:
                continue
            match[a.id] = b
            taken.add(b.id)
            renamed[b.id] = a.id
            replaced.add(a.id)
            paired = True
        if not paired:
            return replaced


def _fused_into(
    before: DrawGraph, after: DrawGraph, match: dict[str, DrawNode], replaced: set[str]
) -> dict[str, str]:
    """``{before id: "fused into X"}`` for erased nodes whose every user was erased and
    replaced by one node ``X`` (``linear`` + ``relu`` -> ``fused_linear_relu``)."""
    names = {n.id: n.name for n in after.nodes}
    replacement = {match[a_id].id: names[a_id] for a_id in replaced}
    taken = {b.id for b in match.values()}
    found = {}
    for b, users in _users(before).items():
        into = {replacement.get(u) for u in users}
        if b not in taken and len(into) == 1 and None not in into:
            found[b] = f"fused into {into.pop()}"
    return found


def _inserted_references(
    before: DrawGraph,
    after: DrawGraph,
    match: dict[str, DrawNode],
    inputs_before: dict[str, list[str]],
    inputs_after: dict[str, list[str]],
) -> dict[str, DrawNode]:
    """For a node inserted on an edge ``p -> U``: ``p`` (the value that flowed into ``U``
    there before), so its own values can be compared and a wrong insertion is named."""
    by_before = {n.id: n for n in before.nodes}
    found: dict[str, DrawNode] = {}
    users_after = _users(after)
    for a in after.nodes:
        if a.id in match:
            continue
        for user in users_after.get(a.id, []):
            counterpart = match.get(user)
            now = inputs_after.get(user, [])
            was = inputs_before.get(counterpart.id, []) if counterpart else []
            if counterpart is not None and len(now) == len(was) and a.id in now:
                reference = by_before.get(was[now.index(a.id)])
                if reference is not None:
                    found[a.id] = reference
                    break
    return found


def _erased_and_recreated(
    b: DrawNode, a: DrawNode, names_before: set[str], names_after: set[str]
) -> bool:
    """FX nodes matched by target alone whose names are each gone from the other graph:
    the pass erased one and made the other (an exact replacement)."""
    fx = any(k.startswith("name:") for k in b.align) and any(k.startswith("name:") for k in a.align)
    return fx and b.name not in names_after and a.name not in names_before


def _replacement_detail(b: DrawNode, a: DrawNode, structure: str) -> str:
    text = f"{b.name} → {a.name} ({b.title} → {a.title})"
    return f"{text}; {structure}" if structure and "target" not in structure else text


def _compare_structure(
    b: DrawNode,
    a: DrawNode,
    inputs_before: dict,
    inputs_after: dict,
    renamed: dict,
    before: DrawGraph | None = None,
) -> Pair:
    if b.kind == "get_attr" and a.kind == "constant":
        return Pair(b, a, "inlined", f"{b.title} is now a constant")
    details = []
    if b.kind != a.kind:
        details.append(f"op {b.kind} → {a.kind}")
    if b.title != a.title:
        details.append(f"target {b.title} → {a.title}")
    was = [renamed.get(i, f"?{i}") for i in inputs_before.get(b.id, [])]
    now = inputs_after.get(a.id, [])
    if was != now:
        names = {n.id: n.name for n in before.nodes} if before is not None else {}
        gone = [names.get(i[1:]) or i[1:] for i in was if i.startswith("?")]
        details.append(f"inputs changed ({', '.join(gone)} removed)" if gone else "inputs changed")
    return Pair(b, a, "changed" if details else "same", "; ".join(details))


def _users(graph: DrawGraph) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for e in graph.edges:
        if not e.style:
            found.setdefault(e.src, []).append(e.dst)
    return found


def _inputs(graph: DrawGraph) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for e in graph.edges:
        if not e.style:  # data edges only
            found.setdefault(e.dst, []).append(e.src)
    return found
