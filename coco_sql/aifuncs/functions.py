"""Cortex AISQL semantics over the runtime: argument forms, return shapes, per-row errors.

Every function takes columns (one list per SQL argument, each cell the JSON text the binder passed, or None) and
returns one value per row. A row whose call fails gives None (SQL NULL) and its error is recorded in the
evaluation's usage; a run-level failure (dead endpoint, unknown model) is recorded with `runtime.fail` and
raised, which stops the query.

Return shapes follow docs.snowflake.com:
- AI_COMPLETE: the text; with response_format, the JSON object; with show_details, {choices, created, model,
  usage}.
- AI_CLASSIFY: {"labels": [...]}. Categories are strings or {label, description}; config may hold
  task_description, output_mode ('single' | 'multi') and examples [{input, labels, explanation}].
- AI_FILTER: BOOLEAN. AI_SENTIMENT: {"categories": [{"name": "overall", "sentiment": ...}, ...]}.
- AI_EXTRACT: {"response": {...}}. AI_SIMILARITY: DOUBLE. AI_EMBED: FLOAT[]. AI_COUNT_TOKENS: INTEGER.
- AI_AGG / AI_SUMMARIZE_AGG: text. SNOWFLAKE.CORTEX.CLASSIFY_TEXT: {"label": ...}; .SENTIMENT: DOUBLE in [-1, 1].

Which backend answers: embeddings and embedding-backed decisions go to the embedded model unless configured
otherwise; AI_CLASSIFY goes to `config.classify_model` (an LLM prompt when it names an endpoint model);
functions without a model argument that need text generation use `config.completion_model`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from coco_sql.aifuncs import semantic
from coco_sql.errors import CocoError, ConfigError, ProviderError, ProviderUnavailable
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Message, estimate_tokens
from coco_sql.llm.routing import EMBEDDED_MODELS
from coco_sql.llm.runtime import AiRuntime

Cell = str | None  # JSON text from to_json(), or NULL


class ArgumentError(ValueError):
    """A call's arguments are not what the function accepts: the row gets NULL and this message."""


def _decode(cell: Cell) -> Any:
    if cell is None:
        return None
    if cell[:1] == '"' and "\\" not in cell:  # a plain JSON string (the common case): skip the parser
        return cell[1:-1]
    return json.loads(cell)


def render_prompt(value: Any) -> str:
    """A prompt argument: a string, or PROMPT()'s {"template": '... {0} ...', "args": [...]} object."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "template" in value:
        args = value.get("args") or []
        text = str(value["template"])
        for index, arg in enumerate(args):
            text = text.replace("{" + str(index) + "}", arg if isinstance(arg, str) else json.dumps(arg))
        return text
    if value is None:
        raise ArgumentError("the prompt is NULL")
    return json.dumps(value)


def iter_requests(
    prompts: Sequence[str | None], requests: Sequence[CompletionRequest]
) -> list[CompletionRequest | None]:
    """Requests made for the non-None prompts, spread back over all rows (None where there was no prompt)."""
    made = iter(requests)
    return [None if prompt is None else next(made) for prompt in prompts]


def category_prototypes(value: Any) -> tuple[list[str], list[str]]:
    """(labels, prototype texts) from Cortex's categories argument: a label, or 'label: description'.

    Raises ArgumentError for anything else."""
    if not isinstance(value, list) or not value:
        raise ArgumentError("categories must be a non-empty array of strings or {label, description} objects")
    labels: list[str] = []
    texts: list[str] = []
    for item in value:
        if isinstance(item, str):
            labels.append(item)
            texts.append(item)
        elif isinstance(item, dict) and isinstance(item.get("label"), str):
            labels.append(item["label"])
            description = item.get("description")
            texts.append(f"{item['label']}: {description}" if description else item["label"])
        else:
            raise ArgumentError(
                f"category {json.dumps(item)[:60]} is neither a string nor {{label, description}}"
            )
    if len(set(labels)) != len(labels):
        raise ArgumentError("categories must be distinct")
    return labels, texts


def _example_labels(example: Any, labels: list[str]) -> tuple[str, list[str]]:
    if not isinstance(example, dict) or not isinstance(example.get("input"), str):
        raise ArgumentError("each example must be an object with a string 'input' and 'labels'")
    given = example.get("labels", example.get("label"))
    given = [given] if isinstance(given, str) else list(given or [])
    return example["input"], [label for label in given if label in labels]


class AiFunctions:
    """The AI_* functions over one runtime (see the module docstring); aifuncs.catalogue maps UDFs here."""

    def __init__(self, runtime: AiRuntime) -> None:
        self.runtime = runtime

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

    def _embed(self, function: str, texts: Sequence[str], model: str | None = None) -> np.ndarray | None:
        """Embeddings, or None when the provider failed for this batch (rows become errors)."""
        try:
            return self.runtime.embed(function, texts, model)
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

    # -- AI_CLASSIFY -----------------------------------------------------------------------------------------
    def classify(self, inputs: list[Cell], categories: list[Cell], configs: list[Cell]) -> list[Cell]:
        results: list[Cell] = [None] * len(inputs)
        groups: dict[tuple[Cell, Cell], list[int]] = {}
        for i, (c, g) in enumerate(zip(categories, configs, strict=True)):
            groups.setdefault((c, g), []).append(i)
        model = self.runtime.config.classify_model
        for (category_cell, config_cell), rows in groups.items():
            try:
                labels, prototypes = category_prototypes(_decode(category_cell))
                config = _decode(config_cell) or {}
                if not isinstance(config, dict):
                    raise ArgumentError("config must be an object")
                multi = str(config.get("output_mode", "single")).lower() == "multi"
                examples = [_example_labels(e, labels) for e in config.get("examples") or []]
            except (ArgumentError, json.JSONDecodeError) as error:
                for _ in rows:
                    self.runtime.usage.row_error("AI_CLASSIFY", model, f"AI_CLASSIFY: {error}")
                continue
            texts: list[str | None] = []
            for i in rows:
                try:
                    texts.append(render_prompt(_decode(inputs[i])))
                except ArgumentError:
                    texts.append(None)
            decided = (
                self._classify_by_embedding(
                    model, [t for t in texts if t is not None], labels, prototypes, examples, multi
                )
                if model.lower() in EMBEDDED_MODELS
                else self._classify_by_llm(
                    model, [t for t in texts if t is not None], labels, prototypes, config, examples, multi
                )
            )
            answers = iter(decided)
            encoded: dict[tuple[str, ...], str] = {}  # few distinct answers: encode each once
            for i, text in zip(rows, texts, strict=True):
                if text is None:
                    self.runtime.usage.row_error("AI_CLASSIFY", model, "AI_CLASSIFY: the input is NULL")
                    continue
                chosen = next(answers)
                if chosen is not None:
                    key = tuple(chosen)
                    if key not in encoded:
                        encoded[key] = json.dumps({"labels": chosen})
                    results[i] = encoded[key]
        return results

    def _classify_by_embedding(
        self,
        model: str,
        texts: list[str],
        labels: list[str],
        prototypes: list[str],
        examples: list[tuple[str, list[str]]],
        multi: bool,
    ) -> list[list[str] | None]:
        if not texts:
            return []
        example_texts = [text for text, _ in examples]
        vectors = self._embed("AI_CLASSIFY", [*texts, *prototypes, *example_texts], model)
        if vectors is None:
            return [None] * len(texts)
        n, c = len(texts), len(prototypes)
        index = {label: k for k, label in enumerate(labels)}
        multi_hot = np.zeros((len(examples), c), dtype=np.float32)
        for row, (_, given) in enumerate(examples):
            for label in given:
                multi_hot[row, index[label]] = 1.0
        probabilities = semantic.class_probabilities(
            vectors[:n],
            vectors[n : n + c],
            vectors[n + c :] if examples else None,
            multi_hot if examples else None,
        )
        return semantic.decide(probabilities, labels, multi)  # type: ignore[return-value]

    def _classify_by_llm(
        self,
        model: str,
        texts: list[str],
        labels: list[str],
        prototypes: list[str],
        config: dict[str, Any],
        examples: list[tuple[str, list[str]]],
        multi: bool,
    ) -> list[list[str] | None]:
        task = config.get("task_description") or "Classify the text."
        listing = "\n".join(f"- {p}" for p in prototypes)
        shots = "".join(f"\nText: {t}\nLabels: {json.dumps(g)}" for t, g in examples)
        mode = "one or more labels" if multi else "exactly one label"
        schema = {
            "type": "object",
            "properties": {"labels": {"type": "array", "items": {"type": "string", "enum": labels}}},
            "required": ["labels"],
        }
        requests = [
            CompletionRequest(
                model,
                (
                    Message(
                        "system",
                        f'{task} Answer with {mode} from this list, as JSON {{"labels": [...]}}:\n{listing}',
                    ),
                    Message("user", (f"Examples:{shots}\n\n" if shots else "") + f"Text: {text}"),
                ),
                temperature=0.0,
                max_tokens=64,
                response_schema=schema,
            )
            for text in texts
        ]
        out: list[list[str] | None] = []
        for answer in self._complete("AI_CLASSIFY", requests):
            if isinstance(answer, ProviderError):
                out.append(None)
                continue
            try:
                chosen = [label for label in json.loads(answer.text).get("labels", []) if label in labels]
            except (json.JSONDecodeError, AttributeError):
                self.runtime.usage.row_error(
                    "AI_CLASSIFY", model, "AI_CLASSIFY: the model's answer is not JSON"
                )
                out.append(None)
                continue
            out.append(chosen if multi else chosen[:1])
        return out

    # -- AI_FILTER, AI_SIMILARITY, AI_EMBED, AI_SENTIMENT, AI_COUNT_TOKENS -----------------------------------
    def filter(self, inputs: list[Cell], configs: list[Cell]) -> list[bool | None]:
        model = self.runtime.config.classify_model
        pairs: list[tuple[str, str] | None] = []
        for cell in inputs:
            value = _decode(cell)
            if isinstance(value, dict) and "template" in value:
                template = str(value["template"])
                predicate = " ".join(
                    template.replace("{" + str(i) + "}", " ") for i in range(len(value.get("args") or []))
                )
                text = " ".join(a if isinstance(a, str) else json.dumps(a) for a in value.get("args") or [])
                pairs.append((" ".join(predicate.split()), text or template))
            elif isinstance(value, str):
                pairs.append((value, value))
            else:
                pairs.append(None)
        if model.lower() not in EMBEDDED_MODELS:
            prompts = [None if p is None else f"{p[0]}\n\n{p[1]}" for p in pairs]
            return self._filter_by_llm(model, prompts)
        rows = [i for i, p in enumerate(pairs) if p is not None]
        results: list[bool | None] = [None] * len(inputs)
        if not rows:
            return results
        predicates = sorted({pairs[i][0] for i in rows})  # type: ignore[index]
        texts = [pairs[i][1] for i in rows]  # type: ignore[index]
        vectors = self._embed("AI_FILTER", [*texts, *predicates, *(f"not: {p}" for p in predicates)])
        if vectors is None:
            return results
        n, m = len(texts), len(predicates)
        at = {p: k for k, p in enumerate(predicates)}
        for j, i in enumerate(rows):
            k = at[pairs[i][0]]  # type: ignore[index]
            results[i] = bool(
                semantic.filter_decisions(vectors[j : j + 1], vectors[n + k], vectors[n + m + k])[0]
            )
        return results

    def _filter_by_llm(self, model: str, prompts: list[str | None]) -> list[bool | None]:
        schema = {"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"]}
        requests = [
            CompletionRequest(
                model,
                (
                    Message(
                        "system",
                        'Answer the question about the text with true or false, as JSON {"answer": ...}.',
                    ),
                    Message("user", p),
                ),
                temperature=0.0,
                max_tokens=16,
                response_schema=schema,
            )
            for p in prompts
            if p is not None
        ]
        return self._answers(
            "AI_FILTER",
            iter_requests(prompts, requests),
            lambda answer, _: bool(json.loads(answer.text)["answer"]),
        )

    def similarity(self, left: list[Cell], right: list[Cell], configs: list[Cell]) -> list[float | None]:
        model = self.runtime.config.embedding_model
        for cell in configs:
            config = _decode(cell)
            if isinstance(config, dict) and config.get("model"):
                model = str(config["model"])
        pairs = [(_decode(a), _decode(b)) for a, b in zip(left, right, strict=True)]
        live = [i for i, (a, b) in enumerate(pairs) if isinstance(a, str) and isinstance(b, str)]
        results: list[float | None] = [None] * len(pairs)
        if not live:
            return results
        vectors = self._embed(
            "AI_SIMILARITY", [pairs[i][0] for i in live] + [pairs[i][1] for i in live], model
        )
        if vectors is None:
            return results
        n = len(live)
        for j, i in enumerate(live):
            results[i] = float(vectors[j] @ vectors[n + j])
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

    def _sentiment_scores(self, function: str, inputs: list[Cell]) -> dict[int, np.ndarray]:
        """Row index -> p(sentiment) over semantic.SENTIMENTS, for the rows whose input is text."""
        texts = [_decode(x) for x in inputs]
        live = [i for i, t in enumerate(texts) if isinstance(t, str)]
        if not live:
            return {}
        prototypes = [semantic.SENTIMENT_PROTOTYPES[s] for s in semantic.SENTIMENTS]
        vectors = self._embed(function, [texts[i] for i in live] + prototypes)
        if vectors is None:
            return {}
        scores = semantic.sentiment_scores(vectors[: len(live)], vectors[len(live) :])
        return dict(zip(live, scores, strict=True))

    def sentiment(self, inputs: list[Cell], categories: list[Cell]) -> list[Cell]:
        """AI_SENTIMENT: the overall sentiment, repeated for each named aspect (the embedding has no aspects)."""
        scores = self._sentiment_scores("AI_SENTIMENT", inputs)
        results: list[Cell] = [None] * len(inputs)
        for i, p in scores.items():
            aspects = [a for a in (_decode(categories[i]) or []) if isinstance(a, str)]
            overall = semantic.SENTIMENTS[int(p.argmax())]
            entries = [{"name": name, "sentiment": overall} for name in ("overall", *aspects)]
            results[i] = json.dumps({"categories": entries})
        return results

    def cortex_sentiment(self, inputs: list[Cell]) -> list[float | None]:
        """SNOWFLAKE.CORTEX.SENTIMENT: p(positive) - p(negative), in [-1, 1]."""
        scores = self._sentiment_scores("SENTIMENT", inputs)
        return [float(scores[i][0] - scores[i][1]) if i in scores else None for i in range(len(inputs))]

    def count_tokens(self, functions: list[Cell], models: list[Cell], inputs: list[Cell]) -> list[int | None]:
        out: list[int | None] = []
        for _function, m, x in zip(functions, models, inputs, strict=True):
            text = _decode(x) if x is not None else _decode(m)  # AI_COUNT_TOKENS(function, input): no model
            out.append(None if not isinstance(text, str) else estimate_tokens(text))
        return out

    def cortex_classify_text(
        self, inputs: list[Cell], categories: list[Cell], options: list[Cell]
    ) -> list[Cell]:
        configs: list[Cell] = []
        for cell in options:
            option = _decode(cell) or {}
            configs.append(
                json.dumps(
                    {
                        "task_description": option.get("task_description"),
                        "examples": option.get("examples") or [],
                    }
                )
            )
        labels = self.classify(inputs, categories, configs)
        out: list[Cell] = []
        for cell in labels:
            chosen = None if cell is None else json.loads(cell)["labels"]
            out.append(None if cell is None else json.dumps({"label": chosen[0] if chosen else None}))
        return out

    # -- completions -----------------------------------------------------------------------------------------
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
            try:
                model = _decode(m)
                if not isinstance(model, str):
                    raise ArgumentError("the model must be a string")
                options = _decode(params) or {}
                response_format = _decode(fmt)
                schema = response_format.get("schema") if isinstance(response_format, dict) else None
                requests.append(
                    CompletionRequest(
                        model,
                        (Message("user", render_prompt(_decode(p))),),
                        temperature=options.get("temperature", 0.0),
                        max_tokens=options.get("max_tokens"),
                        top_p=options.get("top_p"),
                        response_schema=schema,
                    )
                )
            except (ArgumentError, AttributeError, json.JSONDecodeError) as error:
                self.runtime.usage.row_error("AI_COMPLETE", str(m), f"AI_COMPLETE: {error}")
                requests.append(None)
        if not as_json:
            return self._answers("AI_COMPLETE", requests, lambda answer, _: answer.text)
        detailed = {id(r) for r, d in zip(requests, details, strict=True) if r is not None and _decode(d)}

        def body(answer: CompletionResult, request: CompletionRequest) -> str:
            value: Any = answer.text if request.response_schema is None else json.loads(answer.text)
            if id(request) in detailed:
                value = {
                    "choices": [{"messages": value}],
                    "created": int(time.time()),
                    "model": request.model,
                    "usage": {
                        "prompt_tokens": answer.input_tokens,
                        "completion_tokens": answer.output_tokens,
                        "total_tokens": answer.input_tokens + answer.output_tokens,
                    },
                }
            return json.dumps(value)

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
        """SNOWFLAKE.CORTEX.COMPLETE(model, prompt [, options]): the text; options act as model_parameters."""
        none: list[Cell] = [None] * len(models)
        return self.complete(models, prompts, options, none, none, as_json=False)

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
