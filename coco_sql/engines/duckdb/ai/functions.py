"""Cortex AISQL semantics over the runtime: argument forms, return shapes, per-row errors.

Every function takes columns (one list per SQL argument, each cell the JSON text the binder passed, or None) and
returns one value per row. Three kinds of failure:

- arguments Cortex answers with an error (AI_CLASSIFY with one or duplicate categories, an unknown config key,
  AI_SENTIMENT with more than 10 categories, a PROMPT placeholder without an argument, ...; the limits come from
  `sqlkit.ai_catalogue`), and calls the configured local models cannot honestly answer (AI_FILTER on the embedded
  model): `AiCallRefused`, which fails the query with one line, the candidate's error, as Snowflake fails it;
- a row whose call fails at the provider gives None (SQL NULL) and its error is recorded in the evaluation's
  usage; a NULL argument gives NULL (PROMPT included: not documented, NULL in gives NULL out);
- a run-level failure (dead endpoint, unknown model) is recorded with `runtime.fail` and raised, which stops
  the query and the run.

Return shapes follow docs.snowflake.com:
- AI_COMPLETE: the text; with response_format, the JSON object; with show_details, {choices, created, model,
  usage}. SNOWFLAKE.CORTEX.COMPLETE: the text; with options (and a history array), the JSON text {choices:
  [{messages}], created, model, usage: {completion_tokens, prompt_tokens, total_tokens}}.
- AI_CLASSIFY: {"labels": [...]}. Categories are strings or {label, description}; config may hold
  task_description, output_mode ('single' | 'multi') and examples [{input, labels, explanation}].
- AI_FILTER: BOOLEAN. AI_SENTIMENT: {"categories": [{"name": "overall", "sentiment": ...}, ...]}.
- AI_EXTRACT: {"response": {...}}. AI_SIMILARITY: DOUBLE. AI_EMBED: FLOAT[]. AI_COUNT_TOKENS: INTEGER.
- AI_AGG / AI_SUMMARIZE_AGG: text. SNOWFLAKE.CORTEX.CLASSIFY_TEXT: {"label": ...}; .SENTIMENT: DOUBLE in [-1, 1].

Which backend answers: embeddings and embedding-backed decisions go to the embedded model unless configured
otherwise; AI_CLASSIFY goes to `config.classify_model` (an LLM prompt when it names an endpoint model);
functions without a model argument that need text generation use `config.completion_model`. A yes/no question
(AI_FILTER) and per-category sentiment need a completion model: `config.classify_model` when it is one, else
`config.completion_model`, else the call is refused with what to configure (`engines.duckdb.ai.semantic` says why).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from coco_sql.engines.duckdb.ai import semantic
from coco_sql.engines.duckdb.ai.judging import JudgingFunctions
from coco_sql.engines.duckdb.ai.requests import chat_history
from coco_sql.engines.duckdb.ai.tokens import TokenCounter
from coco_sql.errors import CocoError, ConfigError, ProviderError, ProviderUnavailable
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Message, estimate_tokens
from coco_sql.llm.routing import EMBEDDED_MODELS
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.sqlkit.ai_arguments import (
    Cell,
    _decode,
    check_object,
    refuse,
    render_prompt,
)
from coco_sql.sqlkit.ai_catalogue import (
    CORTEX_COMPLETE_OPTIONS,
    MODEL_PARAMETERS,
    SIMILARITY_CONFIG,
)


class AiFunctions(JudgingFunctions):
    """The AI_* functions over one runtime (see the module docstring); sqlkit.ai_catalogue maps UDFs here."""

    def __init__(self, runtime: AiRuntime) -> None:
        self.runtime = runtime
        self.tokens = TokenCounter(runtime)

    # -- plumbing --------------------------------------------------------------------------------------------
    def _answers(
        self,
        function: str,
        requests: Sequence[CompletionRequest | None],
        parse: Callable[[CompletionResult, CompletionRequest], Any],
    ) -> list[Any]:
        """Send the non-None requests; map each answer back to its row through `parse`.

        A row without a request, whose call failed, or whose answer `parse` rejects gets None; a rejected answer
        is recorded as that row's error (a failed call already is, by the runtime)."""
        live = [r for r in requests if r is not None]
        answers = iter(self._complete(function, live) if live else [])
        out: list[Any] = []
        for request in requests:
            answer = None if request is None else next(answers)
            if request is None or isinstance(answer, ProviderError):
                out.append(None)
                continue
            try:
                out.append(parse(answer, request))  # type: ignore[arg-type]
            except (ValueError, KeyError, TypeError, AttributeError):
                self.runtime.usage.row_error(
                    function, request.model, f"{function}: the answer is not what was asked"
                )
                out.append(None)
        return out

    def _fatal(self, error: CocoError) -> NoReturn:
        """A run-level failure: recorded on the runtime (the evaluator re-raises it) and raised to stop the query."""
        self.runtime.fail(error)
        raise error

    def _embed(
        self, function: str, texts: Sequence[str], model: str | None = None, usage: Usage | None = None
    ) -> np.ndarray | None:
        """Embeddings, or None when the provider failed for this batch (rows become errors). `usage`: where the
        work is accounted (default: the evaluation's)."""
        try:
            return self.runtime.embed(function, texts, model, usage=usage)
        except (ConfigError, ProviderUnavailable) as error:
            self._fatal(error)
        except ProviderError:
            return None

    def _complete(
        self, function: str, requests: list[CompletionRequest]
    ) -> list[CompletionResult | ProviderError]:
        try:
            answers = self.runtime.complete(function, requests)
        except ConfigError as error:
            self._fatal(error)
        if self.runtime.fatal is not None:
            raise self.runtime.fatal
        return answers

    def _completion_model(self, function: str) -> str:
        model = self.runtime.config.completion_model
        if model is None:
            self._fatal(
                ConfigError(
                    f"{function} needs a completion model, and none is configured (offline, set "
                    "COCO_LOCAL_LLM_URL to an OpenAI-compatible server, or choose a completion model)"
                )
            )
        return model  # type: ignore[return-value]

    def _embedded(self, model: str) -> bool:
        """Whether `model` (after any alias) is served by the embedded e5 model."""
        try:
            return self.runtime.config.route(model)[0] == "embedded"
        except ConfigError:
            return False

    def _judging_model(self, function: str, task: str) -> str:
        """The completion model that answers what an embedding cannot (`task`): the classify model when it is
        one, else the completion model; else the call is refused with what to configure."""
        config = self.runtime.config
        for model in (config.classify_model, config.completion_model):
            if model and model.lower() not in EMBEDDED_MODELS:
                return model
        refuse(
            function,
            f"the embedded model {config.classify_model!r} only embeds text and cannot {task}; configure a "
            "completion model (COCO_CLASSIFY_MODEL or --classify-model: smollm2 or <endpoint>/<model>)",
        )

    # -- AI_SIMILARITY, AI_EMBED, AI_COUNT_TOKENS (AI_CLASSIFY, AI_FILTER, AI_SENTIMENT: engines.duckdb.ai.judging) ---
    def similarity(self, left: list[Cell], right: list[Cell], configs: list[Cell]) -> list[float | None]:
        """AI_SIMILARITY(input1, input2, config_object): on the embedded e5 model the rescaled cosine of
        `semantic.similarity_score` (unrelated ~0, identical exactly 1); on another model the cosine."""
        results: list[float | None] = [None] * len(left)
        groups: dict[str, list[int]] = {}
        for i, cell in enumerate(configs):
            config = check_object("AI_SIMILARITY", "config_object", _decode(cell), SIMILARITY_CONFIG)
            groups.setdefault(str(config.get("model") or self.runtime.config.embedding_model), []).append(i)
        pairs = [(_decode(a), _decode(b)) for a, b in zip(left, right, strict=True)]
        for model, rows in groups.items():
            live = [i for i in rows if isinstance(pairs[i][0], str) and isinstance(pairs[i][1], str)]
            if not live:
                continue
            texts = [pairs[i][0] for i in live] + [pairs[i][1] for i in live]
            vectors = self._embed("AI_SIMILARITY", texts, model)
            if vectors is None:
                continue
            n = len(live)
            cosines = np.einsum("nd,nd->n", vectors[:n], vectors[n:])
            identical = np.array([pairs[i][0] == pairs[i][1] for i in live])
            if self._embedded(model):
                scores = semantic.similarity_score(cosines, identical)
            else:
                scores = np.where(identical, 1.0, np.clip(cosines, -1.0, 1.0))
            for i, score in zip(live, scores.tolist(), strict=True):
                results[i] = float(score)
        return results

    def embed(self, models: list[Cell], inputs: list[Cell]) -> list[list[float] | None]:
        results: list[list[float] | None] = [None] * len(inputs)
        groups: dict[str, list[int]] = {}
        for i, (m, x) in enumerate(zip(models, inputs, strict=True)):
            model, text = _decode(m), _decode(x)
            if isinstance(model, str) and isinstance(text, str):
                groups.setdefault(model, []).append(i)
        for model, rows in groups.items():
            vectors = self._embed("AI_EMBED", [_decode(inputs[i]) for i in rows], model)
            if vectors is not None:
                for j, i in enumerate(rows):
                    results[i] = vectors[j].tolist()
        return results

    def count_tokens(
        self, functions: list[Cell], second: list[Cell], third: list[Cell], fourth: list[Cell]
    ) -> list[int | None]:
        """AI_COUNT_TOKENS(function_name, ...) in each of Cortex's forms (`engines.duckdb.ai.tokens`)."""
        out: list[int | None] = []
        for row in zip(functions, second, third, fourth, strict=True):
            function, *arguments = (_decode(cell) for cell in row)
            if function is None:
                out.append(None)
                continue
            try:
                out.append(self.tokens.count(str(function), arguments))
            except ValueError as error:
                refuse("AI_COUNT_TOKENS", str(error))
        return out

    # -- completions -----------------------------------------------------------------------------------------
    def _completion_target(self, function: str, model: Any) -> str | None:
        """The model a completion call names, or None for NULL; an embedding model is refused, because it
        cannot complete text (Cortex refuses unknown models too)."""
        if model is None:
            return None
        if not isinstance(model, str):
            refuse(function, f"the model must be a string, got {json.dumps(model)[:40]}")
        try:
            endpoint, _ = self.runtime.config.route(model)
        except ConfigError:
            return model  # the runtime reports an unknown model as a run-level error
        if endpoint == "embedded":
            refuse(
                function,
                f"{model!r} is an embedding model and cannot complete text; name a completion model "
                "(smollm2, <endpoint>/<model>, or a Cortex model name with an alias or completion endpoint)",
            )
        return model

    def _request(
        self, model: str, messages: tuple[Message, ...], options: dict[str, Any], schema: Any
    ) -> CompletionRequest:
        return CompletionRequest(
            model,
            messages,
            temperature=options.get("temperature", 0.0),
            max_tokens=options.get("max_tokens"),
            top_p=options.get("top_p"),
            response_schema=schema if isinstance(schema, dict) else None,
        )

    def complete(
        self,
        models: list[Cell],
        prompts: list[Cell],
        parameters: list[Cell],
        formats: list[Cell],
        details: list[Cell],
        as_json: bool,
    ) -> list[Any]:
        requests: list[CompletionRequest | None] = []
        for m, p, params, fmt in zip(models, prompts, parameters, formats, strict=True):
            model = self._completion_target("AI_COMPLETE", _decode(m))
            options = check_object("AI_COMPLETE", "model_parameters", _decode(params), MODEL_PARAMETERS)
            prompt = render_prompt(_decode(p), "AI_COMPLETE")
            if model is None or prompt is None:
                requests.append(None)
                continue
            response_format = _decode(fmt)
            schema = response_format.get("schema") if isinstance(response_format, dict) else None
            requests.append(self._request(model, (Message("user", prompt),), options, schema))
        if not as_json:
            return self._answers("AI_COMPLETE", requests, lambda answer, _: answer.text)
        detailed = {id(r) for r, d in zip(requests, details, strict=True) if r is not None and _decode(d)}

        def body(answer: CompletionResult, request: CompletionRequest) -> str:
            value: Any = answer.text if request.response_schema is None else json.loads(answer.text)
            return json.dumps(_details(answer, request, value) if id(request) in detailed else value)

        return self._answers("AI_COMPLETE", requests, body)

    def complete_text(
        self, m: list[Cell], p: list[Cell], o: list[Cell], r: list[Cell], d: list[Cell]
    ) -> list[Any]:
        """AI_COMPLETE(model, prompt, model_parameters, response_format, show_details) answering text."""
        return self.complete(m, p, o, r, d, as_json=False)

    def complete_object(
        self, m: list[Cell], p: list[Cell], o: list[Cell], r: list[Cell], d: list[Cell]
    ) -> list[Any]:
        """AI_COMPLETE with a response_format or show_details: the object, as JSON text."""
        return self.complete(m, p, o, r, d, as_json=True)

    def cortex_complete(self, models: list[Cell], prompts: list[Cell], options: list[Cell]) -> list[Any]:
        """SNOWFLAKE.CORTEX.COMPLETE(model, prompt_or_history[, options]).

        Without options: a string prompt, the text. With options (even {}): a history array of {role, content}
        and, as Cortex returns it, the JSON text {choices: [{messages}], created, model, usage}."""
        requests: list[CompletionRequest | None] = []
        for m, p, o in zip(models, prompts, options, strict=True):
            model = self._completion_target("COMPLETE", _decode(m))
            given = _decode(o)
            settings = check_object("COMPLETE", "options", given, CORTEX_COMPLETE_OPTIONS)
            messages = chat_history(_decode(p), with_options=given is not None)
            if model is None or messages is None:
                requests.append(None)
                continue
            response_format = settings.get("response_format")
            schema = response_format.get("schema") if isinstance(response_format, dict) else None
            requests.append(self._request(model, messages, settings, schema))
        if all(o is None for o in options):
            return self._answers("COMPLETE", requests, lambda answer, _: answer.text)
        with_options = {
            id(r) for r, o in zip(requests, options, strict=True) if r is not None and o is not None
        }

        def body(answer: CompletionResult, request: CompletionRequest) -> str:
            if id(request) not in with_options:
                return answer.text
            return json.dumps(_details(answer, request, answer.text))

        return self._answers("COMPLETE", requests, body)

    def extract(self, texts: list[Cell], formats: list[Cell]) -> list[Cell]:
        model = self._completion_model("AI_EXTRACT")
        requests: list[CompletionRequest | None] = []
        for t, f in zip(texts, formats, strict=True):
            text, spec = _decode(t), _decode(f)
            if not isinstance(text, str) or spec is None:
                requests.append(None)
                continue
            questions = spec if isinstance(spec, dict | list) else [spec]
            requests.append(
                CompletionRequest(
                    model,
                    (
                        Message(
                            "system",
                            "Extract the requested fields from the text. Answer with one JSON object whose keys are the field names; use null when the text does not say.",
                        ),
                        Message("user", f"Fields: {json.dumps(questions)}\n\nText: {text}"),
                    ),
                    temperature=0.0,
                    max_tokens=256,
                    response_schema={"type": "object"},
                )
            )
        return self._answers(
            "AI_EXTRACT", requests, lambda answer, _: json.dumps({"response": json.loads(answer.text)})
        )

    def aggregate(self, values: list[Cell], instructions: list[Cell], summarize: bool) -> list[str | None]:
        """AI_AGG / AI_SUMMARIZE_AGG over each group's list of values: map-reduce under a token budget."""
        function = "AI_SUMMARIZE_AGG" if summarize else "AI_AGG"
        model = self._completion_model(function)
        out: list[str | None] = []
        for cell, instruction_cell in zip(values, instructions, strict=True):
            items = [
                v if isinstance(v, str) else json.dumps(v) for v in (_decode(cell) or []) if v is not None
            ]
            instruction = "Summarize these rows." if summarize else str(_decode(instruction_cell) or "")
            out.append(self._reduce(function, model, instruction, items))
        return out

    def agg(self, values: list[Cell], instructions: list[Cell]) -> list[str | None]:
        """AI_AGG(expr, instruction) over each group's list of values."""
        return self.aggregate(values, instructions, summarize=False)

    def summarize_agg(self, values: list[Cell]) -> list[str | None]:
        """AI_SUMMARIZE_AGG(expr) over each group's list of values."""
        return self.aggregate(values, [None] * len(values), summarize=True)

    def _reduce(
        self, function: str, model: str, instruction: str, items: list[str], budget: int = 2000
    ) -> str | None:
        while True:
            chunks: list[list[str]] = [[]]
            size = 0
            for item in items:
                tokens = estimate_tokens(item)
                if chunks[-1] and size + tokens > budget:
                    chunks.append([])
                    size = 0
                chunks[-1].append(item)
                size += tokens
            requests = [
                CompletionRequest(
                    model,
                    (Message("system", instruction), Message("user", "\n".join(f"- {x}" for x in chunk))),
                    temperature=0.0,
                    max_tokens=512,
                )
                for chunk in chunks
            ]
            answers = self._complete(function, requests)
            if any(isinstance(a, ProviderError) for a in answers):
                return None
            texts = [a.text for a in answers]  # type: ignore[union-attr]
            if len(texts) == 1:
                return texts[0]
            items = texts


def _details(answer: CompletionResult, request: CompletionRequest, messages: Any) -> dict[str, Any]:
    """Cortex's detailed answer: {choices: [{messages}], created, model, usage}."""
    return {
        "choices": [{"messages": messages}],
        "created": int(time.time()),
        "model": request.model,
        "usage": {
            "completion_tokens": answer.output_tokens,
            "prompt_tokens": answer.input_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
        },
    }
