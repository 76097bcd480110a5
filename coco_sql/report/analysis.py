"""The report's derived views, pure functions over the read models' plain data: the champion's lineage, the solve
matrix (clustered, with lineages), the strategy ledger over time and the confusion matrix. No I/O here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

SOLVED = 0.9  # a row is solved at score >= 0.9, the papers' threshold (the row_solvers view)
MAX_CLASSES = 30  # more distinct labels than this is not a classification task (for the confusion matrix)
NONE_LABEL = "(none)"  # a row with no label, or a missing, null or empty output
OTHER_LABEL = "(other)"  # predicted labels past the largest MAX_CLASSES


# -- lineage -----------------------------------------------------------------------------------------------
def ancestry(programs: Sequence[Mapping[str, Any]], program_id: str) -> list[Mapping[str, Any]]:
    """`program_id` and its ancestors, the seed first (stops at a parent the run does not hold)."""
    by_id = {p["program_id"]: p for p in programs}
    path = []
    current = by_id.get(program_id)
    while current is not None and len(path) <= len(by_id):
        path.append(current)
        current = by_id.get(current["parent_id"]) if current["parent_id"] else None
    return path[::-1]


def lineage_roots(programs: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """program_id -> its lineage: the child of the seed it descends from (the seed is its own lineage).

    A lineage is one subtree below the seed: the programs that share a first step away from it."""
    by_id = {p["program_id"]: p for p in programs}
    roots: dict[str, str] = {}

    def starts_lineage(program_id: str) -> bool:  # the seed, or a child of it
        parent = by_id[program_id]["parent_id"]
        return parent not in by_id or by_id[parent]["parent_id"] not in by_id

    for program in programs:
        chain = []
        current = program["program_id"]
        while current not in roots and not starts_lineage(current):
            chain.append(current)
            current = by_id[current]["parent_id"]
        roots.setdefault(current, current)
        for program_id in chain:
            roots[program_id] = roots[current]
    return roots


# -- the solve matrix ----------------------------------------------------------------------------------------
def solve_matrix(
    programs: Sequence[Mapping[str, Any]], row_scores: Mapping[str, Mapping[str, float]]
) -> dict[str, Any] | None:
    """Valid programs x training rows, both axes clustered (average linkage on the row scores), as compact
    data for the page: one string per program, a digit per row (`int(10 * score)`, capped at 9: 9 = solved),
    and per row its solvers and the lineages that solve it. None when no valid program was evaluated."""
    valid = [p for p in programs if p["valid"] and p["program_id"] in row_scores]
    if not valid:
        return None
    instances = sorted({i for p in valid for i in row_scores[p["program_id"]]})
    column = {instance: j for j, instance in enumerate(instances)}
    scores = np.zeros((len(valid), len(instances)))
    for i, program in enumerate(valid):
        for instance, score in row_scores[program["program_id"]].items():
            scores[i, column[instance]] = score
    roots = lineage_roots(programs)
    lineage = [roots.get(p["program_id"], p["program_id"]) for p in valid]
    seed_ids = {p["program_id"] for p in programs if not p["parent_id"]}
    names = sorted({x for x in lineage if x not in seed_ids}, key=_iteration_key)
    solved = scores >= SOLVED
    per_row_lineages = [
        sorted({lineage[i] for i in np.flatnonzero(solved[:, j])} - seed_ids, key=_iteration_key)
        for j in range(len(instances))
    ]
    seed_solves = [bool(solved[[i for i, p in enumerate(valid) if p["program_id"] in seed_ids], j].any())
                   for j in range(len(instances))]  # fmt: skip
    program_order = _cluster_order(scores)
    row_order = _cluster_order(scores.T)
    digits = np.minimum((scores * 10).astype(int), 9).clip(0, 9)
    unsolved = [instances[j] for j in row_order if not solved[:, j].any()]
    partial = [  # the rarest first: rows one lineage alone solves
        {"row": instances[j], "lineages": per_row_lineages[j]}
        for j in sorted(row_order, key=lambda j: len(per_row_lineages[j]))
        if len(names) >= 2 and not seed_solves[j] and 0 < len(per_row_lineages[j]) < len(names)
    ]
    return {
        "programs": [p["program_id"] for p in valid],
        "iterations": [p["iteration"] for p in valid],
        "rows": instances,
        "cells": ["".join(map(str, row)) for row in digits],
        "program_order": program_order,
        "row_order": row_order,
        "lineage": [names.index(x) if x in names else -1 for x in lineage],  # -1: the seed
        "lineages": names,
        "solvers": solved.sum(axis=0).astype(int).tolist(),
        "row_lineages": [len(x) for x in per_row_lineages],
        "unsolved": unsolved,
        "partial": partial,
    }


def _cluster_order(matrix: np.ndarray) -> list[int]:
    """The leaf order of an average-linkage clustering of the matrix's rows (city-block distance), so that rows
    with alike scores sit together; the identity for fewer than three rows."""
    if len(matrix) < 3:
        return list(range(len(matrix)))
    from scipy.cluster.hierarchy import leaves_list, linkage

    unique, inverse = np.unique(matrix, axis=0, return_inverse=True)  # equal rows are one leaf
    inverse = np.asarray(inverse).reshape(-1)
    if len(unique) < 3:
        leaves = list(range(len(unique)))
    else:
        leaves = leaves_list(linkage(unique, method="average", metric="cityblock")).tolist()
    rank = {leaf: k for k, leaf in enumerate(leaves)}
    return sorted(range(len(matrix)), key=lambda i: (rank[int(inverse[i])], i))


def _iteration_key(program_id: str) -> tuple[int, str]:
    tail = program_id.rsplit("-", 1)[-1]
    return (int(tail), program_id) if tail.isdigit() else (1 << 62, program_id)


# -- the strategy ledger over time -------------------------------------------------------------------------
def strategies(ledger: Sequence[Mapping[str, Any]], *, finished: bool) -> dict[str, Any] | None:
    """Lanes of the ledger: one per strategy in the order it was opened (hillclimbing first), each iteration a
    point in its lane by status; and per strategy when it was opened, how often it was kept (used again), its
    improvements and best delta, and when it was closed: a named direction is closed by the next direction the
    ledger opens after its last use; the latest stays open (until the run finishes)."""
    if not ledger:
        return None
    lanes: list[str] = []
    for entry in sorted(ledger, key=lambda e: (e["strategy"] != "hillclimb", e["iteration"])):
        if entry["strategy"] not in lanes:
            lanes.append(entry["strategy"])
    statuses = ("improved", "neutral", "regressed", "failed")
    series = {s: [lanes.index(e["strategy"]) if e["status"] == s else None for e in ledger] for s in statuses}
    opened: dict[str, int] = {}
    for entry in ledger:
        if entry["kind"] != "hillclimb":
            opened.setdefault(entry["strategy"], entry["iteration"])
    table = []
    for name in lanes:
        uses = [e for e in ledger if e["strategy"] == name]
        deltas = [e["score_delta"] for e in uses if e["score_delta"] is not None]
        last = max(e["iteration"] for e in uses)
        later = [it for other, it in opened.items() if other != name and it > last]
        direction = name in opened
        closed = min(later) if direction and later else None
        table.append(
            {
                "strategy": name,
                "kind": "direction" if direction else "hillclimb",
                "opened": opened.get(name, uses[0]["iteration"]),
                "last": last,
                "attempts": len(uses),
                "kept": len(uses) - 1,
                "improved": sum(e["status"] == "improved" for e in uses),
                "best_delta": max(deltas) if deltas else None,
                "closed": closed,
                "state": "-" if not direction else "closed" if closed is not None else
                         "open" if not finished else "open at the end",
                "paradigm": next((e["paradigm"] for e in reversed(uses) if e["paradigm"]), None),
            }
        )  # fmt: skip
    return {
        "x": [e["iteration"] for e in ledger],
        "lanes": lanes,
        "series": series,
        "spans": [[t["opened"], t["closed"] if t["closed"] is not None else t["last"]] for t in table],
        "table": table,
    }


# -- the confusion matrix --------------------------------------------------------------------------------------
def confusion(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Expected x predicted label counts over a program's rows (JSON `output` / `expected` text), or None when
    the task is not a classification: more than MAX_CLASSES distinct labels, or non-integer numbers.

    Multi-label rows (JSON lists) count every (expected label, predicted label) pair of the row, so the diagonal
    holds the labels it got right, `(none)` stands for an empty side, and per label the precision and recall
    follow from its row and column."""
    pairs = [(_labels(r["expected"]), _labels(r["output"])) for r in rows]
    if not pairs or any(e is None for e, _ in pairs):
        return None
    multi = any(len(e) > 1 or len(p) > 1 for e, p in pairs) or any(
        isinstance(_json(r["expected"]), list) for r in rows
    )
    expected_counts = Counter(label for e, _ in pairs for label in e)  # type: ignore[union-attr]
    if not expected_counts or len(expected_counts) > MAX_CLASSES:
        return None
    classes = sorted(expected_counts, key=_label_key)
    predicted_counts = Counter(label for _, p in pairs for label in (p or ()) if label not in expected_counts)
    extra = [label for label, _ in predicted_counts.most_common(MAX_CLASSES - len(classes))]
    columns = [*classes, *sorted(extra, key=_label_key)]
    other = len(predicted_counts) > len(extra)
    columns += [OTHER_LABEL] * other + [NONE_LABEL]
    index_row = {label: i for i, label in enumerate([*classes, NONE_LABEL])}
    index_col = {label: j for j, label in enumerate(columns)}
    counts = np.zeros((len(index_row), len(columns)), dtype=int)
    for expected, predicted in pairs:
        for e in expected or [NONE_LABEL]:  # type: ignore[union-attr]
            for p in predicted or [NONE_LABEL]:
                counts[index_row[e], index_col.get(p, index_col.get(OTHER_LABEL, -1))] += 1
    row_labels = [*classes, NONE_LABEL]
    if not counts[-1].any():  # no row without an expected label
        counts, row_labels = counts[:-1], classes
    if not counts[:, -1].any():  # no row answered nothing
        counts, columns = counts[:, :-1], columns[:-1]
    per_label = []
    for label in classes:
        tp = sum(label in (e or ()) and label in (p or ()) for e, p in pairs)
        support = sum(label in (e or ()) for e, _ in pairs)
        predicted = sum(label in (p or ()) for _, p in pairs)
        per_label.append({"label": label, "support": support, "predicted": predicted, "correct": tp,
                          "precision": tp / predicted if predicted else None,
                          "recall": tp / support if support else None})  # fmt: skip
    return {
        "multi_label": multi,
        "rows": row_labels,
        "columns": columns,
        "counts": counts.tolist(),
        "max": int(counts.max()) if counts.size else 0,
        "per_label": per_label,
        "n": len(pairs),
    }


def _json(text: Any) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _labels(text: Any) -> list[str] | None:
    """A cell's labels as text; [] for null or empty; None for a value that is not a label (a fraction, an
    object)."""
    value = _json(text)
    if isinstance(value, str) and value[:1] in "{[" and isinstance(_json(value), dict | list):
        return None  # a JSON text inside the JSON (a dbt row): a record, not a label
    if value is None or value == "" or value == []:
        return []
    items = value if isinstance(value, list) else [value]
    labels = []
    for item in items:
        if isinstance(item, dict | list):
            return None
        if isinstance(item, bool):
            item = str(item).lower()
        if isinstance(item, float) and not item.is_integer():
            return None
        labels.append(str(int(item)) if isinstance(item, float) else str(item))
    return sorted(set(labels))


def _label_key(label: str) -> tuple[int, float, str]:
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)
