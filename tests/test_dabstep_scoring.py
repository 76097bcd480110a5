"""The DABStep-style scorer (coco_sql/languages/agent_spec/scoring.py), as a table of answer, expected, guidelines.

Rows marked "official: ..." are where DABStep's own ``question_scorer`` (adyen/DABstep Space,
dabstep_benchmark/evaluation/scorer.py) decides differently, on purpose; the module docstring says why.
"""

from __future__ import annotations

import pytest

from coco_sql.languages.agent_spec.scoring import numbers_match, parse_number, requested_decimals, score

NA = "If a question does not have a relevant or applicable answer for the task, please respond with 'Not Applicable'"
SIX = f"Answer must be just a number expressed in EUR rounded to 6 decimals. {NA}"
TWO = f"Answer must be just a number rounded to 2 decimals. {NA}"
FOURTEEN = f"Answer must be just a number rounded to 14 decimals. {NA}"
NUMBER = f"Answer must be just a number. {NA}"
LIST = f"Answer must be a list of values in comma separated list, eg: A, B, C. If the answer is an empty list, reply with an empty string. {NA}"
CHOICE = f"Answer must be in the form 'X. Y' where X is the option's letter chosen and Y is the option's country code. {NA}"
YES_NO = f"Answer must be just either yes or no. {NA}"
NAME = f"Answer must be just the name of the card scheme. {NA}"
ACI_FEE = f"Answer must be just the selected ACI to incentive and the associated cost rounded to 2 decimals in this format: {{card_scheme}}:{{fee}}. {NA}"

NUMBERS = [
    # the requested rounding: within half a unit at the asked decimals, or within DABStep's relative tolerance 1e-4
    ("0.120132", "0.120132", SIX, 1.0),
    ("0.1201316", "0.120132", SIX, 1.0),  # rounds to the expected value
    ("0.120131", "0.120132", SIX, 1.0),  # one unit off at 6 decimals is inside rel_tol 1e-4
    (
        "0.1201",
        "0.120132",
        SIX,
        0.0,
    ),  # official: 1.0 (abs_tol 1e-4 below 1); fewer decimals than asked fail here
    ("8.907926", "8.907926", SIX, 1.0),
    ("8.91", "8.907926", SIX, 0.0),  # official: 1.0 (it rounds both sides to the 2 decimals "8.91" shows)
    ("8.910000", "8.907926", SIX, 0.0),  # official: 1.0 (float("8.910000") prints as 8.91)
    ("13.57", "13.57", TWO, 1.0),
    ("13.574", "13.57", TWO, 1.0),
    ("13.58", "13.57", TWO, 0.0),
    (
        "1234.57",
        "1234.56",
        TWO,
        1.0,
    ),  # beyond half a unit (0.005) but inside rel_tol 1e-4 (0.12): DABStep's, kept
    ("1234.81", "1234.56", TWO, 0.0),
    ("-0.94000000000005", "-0.94000000000005", FOURTEEN, 1.0),
    ("-0.94", "-0.94000000000005", FOURTEEN, 1.0),  # inside rel_tol
    ("0.94", "-0.94000000000005", FOURTEEN, 0.0),  # official: 1.0 (its number pattern drops the sign)
    # no rounding asked: the decimals the expected answer is written with
    ("138236", "138236", NUMBER, 1.0),
    ("138,236", "138236", NUMBER, 1.0),  # a thousands separator where a number is expected
    ("138236.0", "138236", NUMBER, 1.0),
    ("138237", "138236", NUMBER, 1.0),  # inside rel_tol 1e-4 (13.8), as in DABStep
    ("138300", "138236", NUMBER, 0.0),
    ("$42.00", "42", None, 1.0),
    ("42 EUR", "42", None, 1.0),
    ("73.15%", "73.1495", None, 1.0),
    ("30%", "30.1", None, 0.0),
    ("about 1,234.5 EUR", "1234.5", None, 1.0),  # official: 0.0 (it splits at the comma into a list)
    ("0,5996", "0.5996", None, 1.0),  # a decimal comma; official: 0.0 (it drops the comma, reads 5996)
    (
        "The average transaction amount is 91.85 EUR.",
        "91.852",
        None,
        1.0,
    ),  # the answer's first number, rel_tol
    ("64, 53, 454", "64", NUMBER, 0.0),  # a list is not its first number
    ("3.14", "3.1483", None, 0.0),
    ("25.0", "0.250", None, 0.0),
    ("Not Applicable", "0.120132", SIX, 0.0),
    ("", "0.120132", SIX, 0.0),
    ("about twelve cents", "0.120132", SIX, 0.0),
]
LISTS = [
    ("1, 2, 3", "3, 2, 1", LIST, 1.0),  # order does not count
    ("[1, 2, 3]", "1, 2, 3", LIST, 1.0),
    ("1;2;3", "1, 2, 3", LIST, 1.0),
    ("1, 2", "1, 2, 3", LIST, 0.0),
    ("1, 2, 3, 4", "1, 2, 3", LIST, 0.0),
    ("1, 1, 2", "1, 2", LIST, 0.0),  # as many items as expected
    ("1, 2, 2", "1, 1, 2", LIST, 0.0),
    ("5813", "5813", LIST, 1.0),  # a one-element list
    ("[5813]", "5813", LIST, 1.0),
    ("5813, 5814", "5813", LIST, 0.0),
    ("", "", LIST, 1.0),  # "If the answer is an empty list, reply with an empty string"
    ("[]", "", LIST, 1.0),
    ("1", "", LIST, 0.0),
    ("['a', 'b']", "a, b", LIST, 1.0),
    ("rafa_ai, Crossfit_Hanna", "Crossfit_Hanna, Rafa_AI", LIST, 1.0),
    ("C: 69.360, F: 77.9", "F: 77.90, C: 69.36", None, 1.0),  # "key: number" items compare their numbers
    ("C: 69.37, F: 77.9", "F: 77.90, C: 69.36", None, 0.0),
    ("[BE: 85.3, IT: 93.82, ]", "BE: 85.3, IT: 93.82", None, 1.0),  # a trailing empty item is dropped
    ("1.0, 2", "1, 2.00", LIST, 1.0),  # numbers in a list compare as numbers
    ("capture_delay, monthly_volume", "monthly_volume, capture_delay", LIST, 1.0),
    ("capture_delay", "monthly_volume, capture_delay", LIST, 0.0),
]
NOT_APPLICABLE = [
    ("Not Applicable", "Not Applicable", YES_NO, 1.0),
    ("not applicable.", "Not Applicable", YES_NO, 1.0),
    ("  NOT  APPLICABLE ", "Not Applicable", None, 1.0),
    ("'Not Applicable'", "Not Applicable", None, 1.0),
    ("applicable", "Not Applicable", None, 0.0),  # official: 1.0 (a one-word answer that is a subset)
    ("N/A", "Not Applicable", None, 0.0),
    ("no", "Not Applicable", YES_NO, 0.0),
    ("", "Not Applicable", None, 0.0),
    ("Not Applicable", "yes", YES_NO, 0.0),
    ("Not Applicable", "", LIST, 0.0),  # an empty list is an answer, not 'Not Applicable'
]
TEXT = [
    ("GlobalCard", "GlobalCard", NAME, 1.0),
    ("  globalcard. ", "GlobalCard", NAME, 1.0),  # case, whitespace and punctuation do not count
    ("Global Card", "GlobalCard", NAME, 1.0),
    ("NexPay", "GlobalCard", NAME, 0.0),
    ("'has_fraudulent_dispute'", "has_fraudulent_dispute", None, 1.0),
    (
        "has_fraudulent_disputes",
        "has_fraudulent_dispute",
        None,
        0.0,
    ),  # one word: no fuzzy match, as in DABStep
    (
        "both ip_address and email_adress",
        "both ip_address and email_address",
        None,
        1.0,
    ),  # difflib ratio > 0.95
    ("both email_address and ip_address", "both ip_address and email_address", None, 0.0),
    ("is_fraudulent", "has_fraudulent_dispute", None, 0.0),
    (">5m", ">5m", None, 1.0),
    ("<5m", ">5m", None, 0.0),  # official: 1.0 (it strips the comparison sign)
    ("5m", ">5m", None, 0.0),  # official: 1.0
    ("Netherlands", "NL", None, 0.0),
    ("", "Inditex", None, 0.0),
    # yes / no
    ("yes", "yes", YES_NO, 1.0),
    ("Yes.", "yes", YES_NO, 1.0),
    ("YES", "yes", YES_NO, 1.0),
    ("no", "yes", YES_NO, 0.0),
    ("yes, it is", "yes", YES_NO, 0.0),
    ("y", "yes", YES_NO, 0.0),
    # the "{ACI}:{fee}" shape: words must match, numbers at the asked rounding
    ("E:13.57", "E:13.57", ACI_FEE, 1.0),
    ("e: 13.570", "E:13.57", ACI_FEE, 1.0),
    ("E:13.58", "E:13.57", ACI_FEE, 0.0),
    ("F:13.57", "E:13.57", ACI_FEE, 0.0),  # official: 1.0 (it compares the first numbers only)
]
MULTIPLE_CHOICE = [
    ("B. BE", "B. BE", CHOICE, 1.0),
    ("b) be", "B. BE", CHOICE, 1.0),
    ("B", "B. BE", CHOICE, 1.0),  # the letter alone
    ("BE", "B. BE", CHOICE, 1.0),  # the option alone
    ("B. NL", "B. BE", CHOICE, 0.0),
    ("C. BE", "B. BE", CHOICE, 0.0),
    ("A", "B. BE", CHOICE, 0.0),
    ("C", "C. both ip_address and email_address", CHOICE, 1.0),
    ("both ip_address and email_address", "C. both ip_address and email_address", CHOICE, 1.0),
    ("ip_address", "C. both ip_address and email_address", CHOICE, 0.0),  # official: 1.0 (one-word subset)
    ("D", "A) Oranges", None, 0.0),
]


@pytest.mark.parametrize(
    ("answer", "expected", "guidelines", "want"), NUMBERS + LISTS + NOT_APPLICABLE + TEXT + MULTIPLE_CHOICE
)
def test_score(answer: str, expected: str, guidelines: str | None, want: float) -> None:
    assert score(answer, expected, guidelines) == want


def test_a_missing_answer_scores_zero() -> None:
    assert score(None, "yes", YES_NO) == 0.0


@pytest.mark.parametrize(
    "junk", ["[", "]]", "%", "$", "-", ".", ",", ";;", "[,]", "--1", "1..2", "\u2212 0.94", "\x00"]
)
@pytest.mark.parametrize("expected", ["0.120132", "1, 2", "B. BE", "Not Applicable", ""])
def test_odd_answers_score_without_raising(junk: str, expected: str) -> None:
    assert score(junk, expected, None) in (0.0, 1.0)


@pytest.mark.parametrize(
    ("guidelines", "decimals"),
    [
        (SIX, 6),
        (TWO, 2),
        (FOURTEEN, 14),
        ("rounded to 6 decimal places", 6),
        (NUMBER, None),
        (None, None),
        (LIST, None),
    ],
)
def test_requested_decimals_come_from_the_guidelines(guidelines: str | None, decimals: int | None) -> None:
    assert requested_decimals(guidelines) == decimals


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42.0),
        ("-0.94", -0.94),
        ("1,000", 1000.0),
        ("12,345.67", 12345.67),
        ("0,99", 0.99),
        ("$42.00", 42.0),
        ("73.15%", 73.15),
        (".5", 0.5),
        ("1, 2", None),
        ("5813, 5814", None),
        ("B. BE", None),
        ("", None),
    ],
)
def test_parse_number_reads_one_number_or_none(text: str, value: float | None) -> None:
    assert parse_number(text) == value


def test_the_tolerance_is_half_a_unit_at_the_rounding_or_the_relative_one() -> None:
    assert numbers_match(0.1234, 0.123, 3)  # rounds to 0.123
    assert not numbers_match(0.1236, 0.123, 3)  # 0.0006 > half a unit (0.0005) and > rel_tol (0.0000123)
    assert numbers_match(100009.0, 100000.0, 2)  # 9 > half a unit (0.005) but < rel_tol 1e-4 (10)
    assert not numbers_match(100011.0, 100000.0, 2)
    assert not numbers_match(-0.5, 0.5, 0)  # half a unit each way, but the sign counts
