"""The validator's verdicts on the last few hundred project texts, so that a program checked once (a draft, then
the child it became; a parent read again) is not rendered and checked again. Both dbt languages keep one."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from coco_sql.errors import CandidateRejected

T = TypeVar("T")
KEPT = 256


class Verdicts(Generic[T]):
    """code -> what `check` made of it, or the reason it rejected it; the oldest verdict goes past `kept`."""

    def __init__(self, check: Callable[[str], T], kept: int = KEPT) -> None:
        self._check = check
        self._kept = kept
        self._known: OrderedDict[str, T | CandidateRejected] = OrderedDict()

    def __call__(self, code: str) -> T:
        """`check(code)`, remembered; CandidateRejected (the same reason) for a text it rejected."""
        known = self._known.get(code)
        if known is None:
            try:
                known = self._check(code)
            except CandidateRejected as error:
                known = error
            self._known[code] = known
            while len(self._known) > self._kept:
                self._known.popitem(last=False)
        if isinstance(known, CandidateRejected):
            raise CandidateRejected(str(known))
        return known
