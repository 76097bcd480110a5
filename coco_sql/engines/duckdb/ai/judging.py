"""The AI functions that judge a text: AI_CLASSIFY (and SNOWFLAKE.CORTEX.CLASSIFY_TEXT), AI_FILTER and AI_SENTIMENT
(and SNOWFLAKE.CORTEX.SENTIMENT). Their return shapes and failure rules are in :mod:`coco_sql.engines.duckdb.ai.functions`;
they live here so that module stays one job: the plumbing and the generating functions."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from coco_sql.engines.duckdb.ai import semantic
from coco_sql.engines.duckdb.ai.billing import bill_classify
from coco_sql.engines.duckdb.ai.requests import iter_requests
from coco_sql.errors import ProviderError
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Message
from coco_sql.llm.routing import EMBEDDED_MODELS
from coco_sql.llm.usage import Usage
from coco_sql.sqlkit.ai_arguments import (
    Cell,
    _decode,
    _example_labels,
    category_prototypes,
    check_array,
    check_object,
    refuse,
    render_prompt,
)
from coco_sql.sqlkit.ai_catalogue import (
    CLASSIFY_CATEGORIES,
    CLASSIFY_CONFIG,
    CLASSIFY_TEXT_CATEGORIES,
    CLASSIFY_TEXT_OPTIONS,
    SENTIMENT_CATEGORIES,
    SENTIMENTS,
    Limits,
)


class JudgingFunctions:
    """Classification, yes/no and sentiment functions of :class:`coco_sql.engines.duckdb.ai.functions.AiFunctions`, which
    mixes them in and supplies the plumbing they call (`_answers`, `_embed`, `_embedded`, `_judging_model`,
    `runtime`, `tokens`)."""

    # -- AI_CLASSIFY -----------------------------------------------------------------------------------------
    def classify(self, inputs: list[Cell], categories: list[Cell], configs: list[Cell]) -> list[Cell]:
        """AI_CLASSIFY(input, list_of_categories, config_object): {"labels": [...]} per row."""
        return self._classify("AI_CLASSIFY", inputs, categories, configs, CLASSIFY_CATEGORIES)

    def _classify(
        self, function: str, inputs: list[Cell], categories: list[Cell], configs: list[Cell], limits: Limits
    ) -> list[Cell]:
        results: list[Cell] = [None] * len(inputs)
        groups: dict[tuple[Cell, Cell], list[int]] = {}
        for i, (c, g) in enumerate(zip(categories, configs, strict=True)):
            if c is not None:  # NULL categories: NULL out
                groups.setdefault((c, g), []).append(i)
        model = self.runtime.config.classify_model
        embedded = model.lower() in EMBEDDED_MODELS
        for (category_cell, config_cell), rows in groups.items():
            labels, prototypes = category_prototypes(_decode(category_cell), function, limits)
            config = check_object(function, "config_object", _decode(config_cell), CLASSIFY_CONFIG)
            if embedded and config.get("task_description"):
                refuse(
                    function,
                    f"the embedded model {model!r} cannot follow a task_description (it only embeds text); "
                    "remove it, or configure a completion model as COCO_CLASSIFY_MODEL (smollm2 or "
                    "<endpoint>/<model>)",
                )
            multi = str(config.get("output_mode", "single")).lower() == "multi"
            examples = [_example_labels(function, e, labels) for e in config.get("examples") or []]
            texts = [render_prompt(_decode(inputs[i]), function) for i in rows]
            live = [t for t in texts if t is not None]
            decided = (
                self._classify_by_embedding(model, live, labels, prototypes, examples, multi)
                if embedded
                else self._classify_by_llm(model, live, labels, prototypes, config, examples, multi)
            )
            answers = iter(decided)
            encoded: dict[tuple[str, ...], str] = {}  # few distinct answers: encode each once
            for i, text in zip(rows, texts, strict=True):
                chosen = None if text is None else next(answers)
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
        work = Usage()  # accounted below as Cortex bills the rows (`engines.duckdb.ai.billing`)
        vectors = self._embed("AI_CLASSIFY", [*texts, *prototypes, *example_texts], model, work)
        if vectors is None:
            self.runtime.usage.merge(work)  # the failed provider call, as it happened
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
        answers = semantic.decide(probabilities, labels, multi)
        counter = self.tokens.counter(model)
        bill_classify(
            self.runtime.usage, counter, "AI_CLASSIFY", model, texts, prototypes, examples, answers, work
        )
        return answers  # type: ignore[return-value]

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

    # -- AI_FILTER, AI_SENTIMENT ------------------------------------------------------------------------------
    def filter(self, inputs: list[Cell]) -> list[bool | None]:
        """AI_FILTER(input | PROMPT(...)): a completion model answers the yes/no question (`_judging_model`)."""
        model = self._judging_model("AI_FILTER", "answer a yes/no question about a text")
        prompts = [render_prompt(_decode(cell), "AI_FILTER") for cell in inputs]
        return self._filter_by_llm(model, prompts)

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
        """AI_SENTIMENT(text[, categories]): {"categories": [{"name": "overall", "sentiment": ...}, ...]}. The
        overall sentiment comes from the embedded model; named categories (aspects) need a completion model."""
        aspects = [self._sentiment_aspects(cell) for cell in categories]
        if any(aspects):
            model = self._judging_model("AI_SENTIMENT", "tell the sentiment of each named category")
            return self._sentiment_by_llm(model, inputs, aspects)
        scores = self._sentiment_scores("AI_SENTIMENT", inputs)
        results: list[Cell] = [None] * len(inputs)
        for i, p in scores.items():
            overall = semantic.SENTIMENTS[int(p.argmax())]
            results[i] = json.dumps({"categories": [{"name": "overall", "sentiment": overall}]})
        return results

    @staticmethod
    def _sentiment_aspects(cell: Cell) -> list[str]:
        """AI_SENTIMENT's categories: at most 10 strings of at most 30 characters (Cortex refuses more)."""
        value = _decode(cell)
        if value is None:
            return []
        aspects = check_array("AI_SENTIMENT", "categories", value, SENTIMENT_CATEGORIES)
        if not all(isinstance(a, str) for a in aspects):
            refuse("AI_SENTIMENT", "each category must be a string")
        return aspects

    def _sentiment_by_llm(self, model: str, inputs: list[Cell], aspects: list[list[str]]) -> list[Cell]:
        """Per-category sentiment from a completion model, as JSON that follows a schema over the names."""
        requests: list[CompletionRequest | None] = []
        for cell, names in zip(inputs, aspects, strict=True):
            text = _decode(cell)
            if not isinstance(text, str):
                requests.append(None)
                continue
            keys = ["overall", *names]
            schema = {
                "type": "object",
                "properties": {k: {"type": "string", "enum": list(SENTIMENTS)} for k in keys},
                "required": keys,
            }
            system = (
                "For the text, give the sentiment overall and towards each named category, as JSON: one of "
                f"{', '.join(SENTIMENTS)} per key ('unknown' when the text does not mention it). Keys: "
                + ", ".join(keys)
            )
            messages = (Message("system", system), Message("user", text))
            requests.append(
                CompletionRequest(model, messages, temperature=0.0, max_tokens=128, response_schema=schema)
            )

        def body(answer: CompletionResult, request: CompletionRequest) -> str:
            given = json.loads(answer.text)
            names = list(request.response_schema["required"])  # type: ignore[index]
            entries = [{"name": n, "sentiment": str(given[n])} for n in names]
            return json.dumps({"categories": entries})

        return self._answers("AI_SENTIMENT", requests, body)

    def cortex_sentiment(self, inputs: list[Cell]) -> list[float | None]:
        """SNOWFLAKE.CORTEX.SENTIMENT: p(positive) - p(negative), in [-1, 1]."""
        scores = self._sentiment_scores("SENTIMENT", inputs)
        return [float(scores[i][0] - scores[i][1]) if i in scores else None for i in range(len(inputs))]

    def cortex_classify_text(
        self, inputs: list[Cell], categories: list[Cell], options: list[Cell]
    ) -> list[Cell]:
        """SNOWFLAKE.CORTEX.CLASSIFY_TEXT: {"label": ...}; 2 to 100 categories, options {task_description}."""
        configs: list[Cell] = []
        for cell in options:
            option = check_object("CLASSIFY_TEXT", "options", _decode(cell), CLASSIFY_TEXT_OPTIONS)
            configs.append(json.dumps(option) if option else None)
        labels = self._classify("CLASSIFY_TEXT", inputs, categories, configs, CLASSIFY_TEXT_CATEGORIES)
        out: list[Cell] = []
        for cell in labels:
            chosen = None if cell is None else json.loads(cell)["labels"]
            out.append(None if cell is None else json.dumps({"label": chosen[0] if chosen else None}))
        return out
