"""Crossover of edits: the parent combined with the edits another archived program made to the same root.

Two children of one project may each fix a different defect (one the unit of `amount`, the other a status
mapping) and improve different columns; neither alone is right. Each program's edits are its line hunks against
the root (the lineage's first program: the project as the user wrote it); a merge takes the parent and adds
the other program's hunks that touch lines the parent left as the root had them (a three-way merge per file:
a hunk that overlaps one of the parent's own changes is not taken). Only the models the targets read and the
macro files change; the merged project is scored like any other hypothesis before it is proposed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.edits import Edit
from coco_sql.languages.dbt.project import DbtProject

CROSS_WEIGHT = 3.2  # above most single edits: both halves already gained on the training rows
MAX_MERGES = 3


def merges(parent: str, others: Sequence[str], root: str | None) -> list[Edit]:
    """The parent merged with each of `others` (at most `MAX_MERGES`, the first that add something)."""
    if root is None:
        return []
    try:
        base, mine = DbtProject.from_text(root), DbtProject.from_text(parent)
    except CandidateRejected:
        return []
    found: list[Edit] = []
    for index, other in enumerate(others):
        try:
            theirs = DbtProject.from_text(other)
        except CandidateRejected:
            continue
        merged = merge(base, mine, theirs)
        if merged is not None and merged != mine and merged != theirs:
            changed = sorted(p for p in merged.files if merged.files[p] != mine.files.get(p))
            found.append(Edit(f"crossover with archived program #{index + 1}: its edits of {', '.join(changed)}",
                              merged.to_text(), CROSS_WEIGHT))  # fmt: skip
        if len(found) == MAX_MERGES:
            break
    return found


def merge(base: DbtProject, mine: DbtProject, theirs: DbtProject) -> DbtProject | None:
    """`mine` with `theirs`' changes to `base` that do not overlap `mine`'s; None when nothing merges."""
    files = dict(mine.files)
    for path in sorted(set(base.files) | set(theirs.files)):
        if not path.endswith(".sql") or theirs.files.get(path) == base.files.get(path):
            continue
        if path not in base.files or path not in theirs.files or path not in mine.files:
            continue
        merged = merge_text(base.files[path], mine.files[path], theirs.files[path])
        if merged is not None:
            files[path] = merged
    if files == dict(mine.files):
        return None
    try:
        return DbtProject.of(files)
    except CandidateRejected:
        return None


def merge_text(base: str, mine: str, theirs: str) -> str | None:
    """A three-way line merge: `theirs`' hunks against `base` applied to `mine` where `mine` kept those lines
    as in `base`; None when every hunk of theirs conflicts with mine (or there is none)."""
    base_lines, mine_lines, their_lines = (t.splitlines(keepends=True) for t in (base, mine, theirs))
    mine_changed = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(
        None, base_lines, mine_lines, autojunk=False
    ).get_opcodes():
        if tag != "equal":
            mine_changed.update(range(i1, max(i2, i1 + 1)))
    # where each base line sits in mine (lines mine kept)
    position: dict[int, int] = {}
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(
        None, base_lines, mine_lines, autojunk=False
    ).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                position[i1 + k] = j1 + k
    result = list(mine_lines)
    applied = 0
    hunks = difflib.SequenceMatcher(None, base_lines, their_lines, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(hunks):  # from the end, so earlier positions stay valid
        if tag == "equal":
            continue
        touched = set(range(i1, max(i2, i1 + 1)))
        if touched & mine_changed:
            continue
        if i2 > i1:
            if not all(k in position for k in range(i1, i2)):
                continue
            start, end = position[i1], position[i2 - 1] + 1
        else:  # an insertion before base line i1
            if i1 not in position and i1 != len(base_lines):
                continue
            start = end = position.get(i1, len(result))
        result[start:end] = their_lines[j1:j2]
        applied += 1
    return "".join(result) if applied else None


PAIR_TOP = 6  # pairs of the heaviest single edits: 15 hypotheses
PAIR_SHARE = 0.8  # a pair weighs this share of its lighter edit


def pairs(parent: str, edits: Sequence[Edit], top: int = PAIR_TOP) -> list[Edit]:
    """Two of the heaviest single edits at once (merged as `merge` merges programs): two defects that hide each
    other in one column (a wrong join key and a wrong operator) gain only together."""
    try:
        base = DbtProject.from_text(parent)
        heavy = [(e, DbtProject.from_text(e.code)) for e in sorted(edits, key=lambda e: -e.weight)[:top]]
    except CandidateRejected:
        return []
    found = []
    for i, (first, mine) in enumerate(heavy):
        for second, theirs in heavy[i + 1 :]:
            merged = merge(base, mine, theirs)
            if merged is not None and merged != mine and merged != theirs:
                found.append(Edit(f"both: {first.approach}; and {second.approach}", merged.to_text(),
                                  PAIR_SHARE * min(first.weight, second.weight)))  # fmt: skip
    return found
