"""A program's (id, output) rows matched to a split's ids: each row's one output, its error, and foreign ids.

The program contract (README "The program contract") says every instance gets exactly one evaluation row: no
output row, or several, is that row's error. This is the rule, with shortcuts for the shapes results almost
always have (`match_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter

_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def match_rows(
    ids: Sequence[str], result_rows: list[tuple[object, ...]], row_errors: Mapping[str, str]
) -> tuple[list[object], list[str | None], int]:
    """Each row's one output (None where it has none or several), its error so far, and how many ids the result
    holds that are not rows of `ids` (`extra_ids`).

    Two shortcuts give exactly what the general rule gives, for the results programs almost always have: every
    id once, in split order (one comparison of tuples), or in another order (one dict, then a lookup per
    row); the general rule then only runs for a result with a missing, repeated, foreign or non-text id."""
    result_ids = tuple(map(_FIRST, result_rows))
    if result_ids == tuple(ids):
        return list(map(_SECOND, result_rows)), [None] * len(ids), 0
    if len(result_rows) == len(ids):
        try:
            by_id = dict(zip(result_ids, map(_SECOND, result_rows), strict=True))
            reordered = list(map(by_id.__getitem__, ids)) if len(by_id) == len(ids) else None
        except (KeyError, TypeError):  # an id not returned; an unhashable id (the general rule reads str(id))
            reordered = None
        if reordered is not None:
            return reordered, [None] * len(ids), 0
    produced: dict[str, list[object]] = {}
    for instance_id, value in result_rows:
        produced.setdefault(str(instance_id), []).append(value)
    values: list[object] = []
    errors: list[str | None] = []
    for instance_id in ids:
        found = produced.get(instance_id, [])
        if len(found) == 1:
            values.append(found[0])
            errors.append(None)
        else:
            values.append(None)
            errors.append(
                f"{len(found)} output rows for this id (expected one)"
                if found
                else row_errors.get(instance_id, "no output row for this id")
            )
    return values, errors, len(set(produced) - set(ids))
