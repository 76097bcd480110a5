"""The arguments of AI function calls as Snowflake documents them: decoding the binder's JSON cells, Cortex's
argument checks and the errors it raises (`AiCallRefused`), PROMPT rendering, and AI_CLASSIFY's categories and
examples.

Shared by the local AI functions (`engines.duckdb.ai`: the calls), the Snowflake meter (categories as Cortex
bills them) and the SQL kind's offline mutator, which reads categories the way AI_CLASSIFY does. Limits come
from `sqlkit.ai_catalogue`. Building model requests from them is the local functions' part
(`engines.duckdb.ai.requests`).
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from coco_sql.errors import EvaluationError
from coco_sql.sqlkit.ai_catalogue import CLASSIFY_CATEGORIES, CLASSIFY_EXAMPLE, Limits, unfilled_placeholder

Cell = str | None  # JSON text from to_json(), or NULL


class ArgumentError(ValueError):
    """A call's arguments are not what the function accepts (the base of `AiCallRefused`)."""


class AiCallRefused(EvaluationError, ArgumentError):
    """A call Cortex answers with an error, or one the local models cannot honestly answer: the query fails with
    this one-line message (the candidate's error), as the same program fails in Snowflake."""


def refuse(function: str, message: str) -> NoReturn:
    raise AiCallRefused(f"{function}: {message}")


def check_object(function: str, what: str, value: Any, limits: Limits) -> dict[str, Any]:
    """An OBJECT argument with only its documented keys and allowed values ({} for NULL); else refused."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        refuse(function, f"{what} must be an object, got {json.dumps(value)[:60]}")
    unknown = sorted(set(value) - set(limits.keys))
    if unknown:
        refuse(function, f"{what} has no key {unknown[0]!r}; its keys are {', '.join(limits.keys)}")
    for key, given in value.items():
        allowed = limits.allowed(key)
        if allowed and str(given).lower() not in allowed:
            refuse(function, f"{what}.{key} must be one of {', '.join(map(repr, allowed))}, got {given!r}")
    return value


def check_array(function: str, what: str, value: Any, limits: Limits) -> list[Any]:
    """An ARRAY argument within its documented size and element limits; else refused."""
    if not isinstance(value, list):
        refuse(function, f"{what} must be an array, got {json.dumps(value)[:60]}")
    if limits.min_items is not None and len(value) < limits.min_items:
        refuse(function, f"{what} needs at least {limits.min_items} unique values, got {len(value)}")
    if limits.max_items is not None and len(value) > limits.max_items:
        refuse(function, f"{what} takes at most {limits.max_items} values, got {len(value)}")
    long = [v for v in value if isinstance(v, str) and limits.max_chars and len(v) > limits.max_chars]
    if long:
        refuse(function, f"{what}: {long[0][:40]!r} is longer than {limits.max_chars} characters")
    return value


def _decode(cell: Cell) -> Any:
    if cell is None:
        return None
    if cell[:1] == '"' and "\\" not in cell:  # a plain JSON string (the common case): skip the parser
        return cell[1:-1]
    return json.loads(cell)


def render_prompt(value: Any, function: str = "PROMPT") -> str | None:
    """A prompt argument: a string, or PROMPT()'s {"template": '... {0} ...', "args": [...]} object, as text;
    None when it is NULL or a PROMPT argument is NULL (NULL in, NULL out). A placeholder without an argument
    is refused (Snowflake's PROMPT documents it as an error)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and "template" in value:
        args = value.get("args") or []
        text = str(value["template"])
        error = unfilled_placeholder(text, len(args))
        if error is not None:
            refuse(function, error)
        if any(arg is None for arg in args):
            return None
        for index, arg in enumerate(args):
            text = text.replace("{" + str(index) + "}", arg if isinstance(arg, str) else json.dumps(arg))
        return text
    return json.dumps(value)


def category_prototypes(
    value: Any, function: str = "AI_CLASSIFY", limits: Limits = CLASSIFY_CATEGORIES
) -> tuple[list[str], list[str]]:
    """(labels, prototype texts) from Cortex's categories argument: a label, or 'label: description'.

    Refused, as Cortex refuses it, unless it holds `limits.min_items` or more distinct labels, all strings or
    all {label, description} objects."""
    items = check_array(function, "list_of_categories", value, limits)
    labels: list[str] = []
    texts: list[str] = []
    for item in items:
        if isinstance(item, str):
            labels.append(item)
            texts.append(item)
        elif isinstance(item, dict) and isinstance(item.get("label"), str):
            labels.append(item["label"])
            description = item.get("description")
            texts.append(f"{item['label']}: {description}" if description else item["label"])
        else:
            refuse(
                function, f"category {json.dumps(item)[:60]} is neither a string nor {{label, description}}"
            )
    if len({type(item) for item in items}) > 1:
        refuse(function, "categories must all be strings or all {label, description} objects")
    if len(set(labels)) != len(labels):
        twice = sorted({label for label in labels if labels.count(label) > 1})
        refuse(function, f"categories must be unique; {twice[0]!r} appears twice")
    return labels, texts


def _example_labels(function: str, example: Any, labels: list[str]) -> tuple[str, list[str]]:
    """(input, its labels among `labels`) of one config example {input, labels, explanation}."""
    if not isinstance(example, dict) or not isinstance(example.get("input"), str):
        refuse(function, "each example must be an object with a string 'input' and 'labels'")
    check_object(function, "an example", example, CLASSIFY_EXAMPLE)
    given = example.get("labels")
    given = [given] if isinstance(given, str) else list(given or [])
    return example["input"], [label for label in given if label in labels]
