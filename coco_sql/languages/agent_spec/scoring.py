"""DABStep-style scoring of one agent answer against one expected answer: 1.0 or 0.0.

The semantics follow DABStep's official scorer, ``question_scorer`` in ``dabstep_benchmark/evaluation/scorer.py`` of
the adyen/DABstep leaderboard Space (https://huggingface.co/spaces/adyen/DABstep, Apache-2.0; its tests are
``dabstep_benchmark/tests/test_scorer.py``). This is a re-implementation, not a copy. What we keep:

- both sides are stripped and lower-cased; ``%``, ``$``, ``€`` and thousands separators do not count;
- numbers match within a tolerance: the official relative tolerance 1e-4, or agreement at a rounding;
- lists (``,`` or ``;`` separated, optional brackets and quotes) match order-free, item by item with the same rules;
- text matches after removing whitespace and punctuation, or, when both sides have several words, when ``difflib``
  similarity exceeds 0.95 (a single word must match exactly);
- a multiple-choice answer ``X. Y`` also matches on the letter alone or on the option alone.

Where we differ on purpose (each case is a row in tests/test_dabstep_scoring.py):

- the rounding is the one the guidelines ask for ("rounded to 6 decimals"), else the one the expected answer is
  written at, and an answer must be within half a unit of it: the official scorer rounds both sides to the fewer
  decimals either one shows, so "8.91" passed for "8.907926" when six decimals were asked;
- the sign counts (the official number pattern has no sign, so "-0.94" matched "0.94");
- a comma is read in context: a thousands separator inside a number ("about 1,234.5 EUR" is 1234.5, where the
  official scorer split it into a list), a decimal comma in a lone number ("0,5996", which it read as 5996), and a
  list separator only where the expected answer or the guidelines make a list;
- a text with words and numbers ("E:13.57") matches word for word, not on its first number alone;
- 'Not Applicable' matches only 'Not Applicable' (the official single-word subset rule let "applicable" pass);
  that subset rule is kept for multiple choice only;
- comparison signs survive normalisation, so the volume bucket ">5m" is not "<5m".
"""

from __future__ import annotations

import math
import re
from difflib import SequenceMatcher

NOT_APPLICABLE = "notapplicable"  # 'Not Applicable' after normalisation
FUZZY_RATIO = 0.95  # official: SequenceMatcher(None, a, b).ratio() > 0.95
REL_TOL = 1e-4  # official: math.isclose(a, b, rel_tol=1e-4, ...)

# "rounded to 6 decimals", "rounded to 6 decimal places", "in EUR and 6 decimals"
_DECIMALS_ASKED = re.compile(r"(\d+)\s+decimal")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")  # the comma in "10,765", never the one in "5813, 5814"
_WHOLE_NUMBER = re.compile(r"^[$€]?\s*(-?(?:\d+(?:[.,]\d+)?|[.,]\d+))\s*(?:%|eur|euros?)?$")
_FIRST_NUMBER = re.compile(r"(?<![\w.])-?\d*\.?\d+")
_TOKEN = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?|\d+(?:\.\d+)?|[a-z_]+|[<>]")
_CHOICE = re.compile(r"^([a-z])[.)]\s*(.+)$")  # "b. be", "c) both ip_address and email_address"
_NOT_KEPT = re.compile(r"[^\w<>]")  # official removes [^\w]; we keep comparison signs


def score(answer: str | None, expected: str, guidelines: str | None = None) -> float:
    """1.0 if ``answer`` matches ``expected`` under the question's ``guidelines``, else 0.0 (never raises)."""
    if answer is None or expected is None:
        return 0.0
    answer, expected = str(answer).strip().lower(), str(expected).strip().lower()
    guide = (guidelines or "").lower()
    if _normalise(expected) == NOT_APPLICABLE or _normalise(answer) == NOT_APPLICABLE:
        return float(_normalise(answer) == _normalise(expected))
    decimals = requested_decimals(guide)
    if "list" in guide or _is_list(expected):
        return float(_lists_match(answer, expected, decimals))
    wanted = parse_number(expected)
    if wanted is not None:
        got = _answer_number(answer)
        return float(got is not None and numbers_match(got, wanted, _decimals(expected, decimals)))
    return float(_text_matches(answer, expected, guide, decimals))


def requested_decimals(guidelines: str | None) -> int | None:
    """The number of decimals the guidelines ask for ("rounded to 2 decimals" -> 2), or None when they ask none."""
    found = _DECIMALS_ASKED.search((guidelines or "").lower())
    return int(found.group(1)) if found else None


def parse_number(text: str) -> float | None:
    """``text`` as one number ("1,000", "0,99", "$42.00", "73.15%", "-0.94"), or None when it is not just a number."""
    found = _WHOLE_NUMBER.match(_THOUSANDS.sub("", text.strip().lower()))
    return float(found.group(1).replace(",", ".")) if found else None


def numbers_match(got: float, wanted: float, decimals: int | None) -> bool:
    """Equal within half a unit at ``decimals`` (plus float slack), or within the official relative tolerance."""
    half_unit = 0.5 * 10.0**-decimals if decimals is not None else 0.0
    slack = 1e-9 * max(1.0, abs(wanted))
    return abs(got - wanted) <= half_unit + slack or math.isclose(got, wanted, rel_tol=REL_TOL)


def _normalise(text: str) -> str:
    return _NOT_KEPT.sub("", text.lower())


def _decimals(expected: str, asked: int | None) -> int:
    """The asked rounding, else the decimals the expected answer is written with ("0.5996" -> 4, "5" -> 0)."""
    if asked is not None:
        return asked
    digits = re.search(r"[.,](\d+)\s*%?$", _THOUSANDS.sub("", expected))
    return len(digits.group(1)) if digits else 0


def _is_list(expected: str) -> bool:
    return bool(re.search(r"[,;]", _THOUSANDS.sub("", expected)))


def _items(text: str) -> list[str]:
    """The items of a list answer: one pair of brackets and each item's quotes dropped, empty items ignored."""
    text = text.strip()
    if text[:1] + text[-1:] in ("[]", "()", "{}"):
        text = text[1:-1]
    return [item for part in re.split(r"[,;]", text) if (item := part.strip().strip("'\"").strip())]


def _answer_number(answer: str) -> float | None:
    """The answer's number: the whole answer, or the first number of a one-item answer ("about 91.85 EUR")."""
    whole = parse_number(answer)
    if whole is not None:
        return whole
    flat = _THOUSANDS.sub("", answer)
    if len(_items(flat)) > 1:  # "64, 53" is a list, not the number 64
        return None
    found = _FIRST_NUMBER.search(flat)
    return float(found.group(0)) if found else None


def _lists_match(answer: str, expected: str, decimals: int | None) -> bool:
    """Same length, and every expected item matched by a distinct answer item (order does not count)."""
    got, wanted = _items(answer), _items(expected)
    if len(got) != len(wanted):
        return False
    unused = list(got)
    for item in wanted:
        match = next(
            (i for i, candidate in enumerate(unused) if _item_matches(candidate, item, decimals)), None
        )
        if match is None:
            return False
        unused.pop(match)
    return True


def _item_matches(got: str, wanted: str, decimals: int | None) -> bool:
    number = parse_number(wanted)
    if number is not None:
        value = parse_number(got)
        return value is not None and numbers_match(value, number, _decimals(wanted, decimals))
    return (
        _tokens_match(got, wanted, decimals) or _normalise(got) == _normalise(wanted) or _similar(got, wanted)
    )


def _tokens_match(got: str, wanted: str, decimals: int | None) -> bool:
    """Word for word, numbers within tolerance: "c: 69.360" matches "c: 69.36", "e:13.57" matches "e: 13.57"."""
    left, right = _TOKEN.findall(got), _TOKEN.findall(wanted)
    if not right or len(left) != len(right):
        return False
    for a, b in zip(left, right, strict=True):
        x, y = parse_number(a), parse_number(b)
        same = (x is not None and y is not None and numbers_match(x, y, _decimals(b, decimals))) or a == b
        if not same:
            return False
    return True


def _similar(got: str, wanted: str) -> bool:
    """Official: the fuzzy ratio applies only when neither side is a single word (that case is a subset test)."""
    several = len(re.findall(r"\w+", got)) > 1 and len(re.findall(r"\w+", wanted)) > 1
    return several and SequenceMatcher(None, got, wanted).ratio() > FUZZY_RATIO


def _text_matches(answer: str, expected: str, guide: str, decimals: int | None) -> bool:
    choice = _CHOICE.match(expected)
    if choice and (not guide or "letter" in guide):
        letter, option = choice.groups()
        if _normalise(answer) in (letter, _normalise(option)):
            return True
    return _item_matches(answer, expected, decimals)
