"""Model requests built from AI function arguments, for the local AI functions: COMPLETE's chat history and the
per-row requests spread back over the rows that had a prompt. The argument checks themselves are
`sqlkit.ai_arguments`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coco_sql.llm.providers.base import CompletionRequest, Message
from coco_sql.sqlkit.ai_arguments import refuse


def iter_requests(
    prompts: Sequence[str | None], requests: Sequence[CompletionRequest]
) -> list[CompletionRequest | None]:
    """Requests made for the non-None prompts, spread back over all rows (None where there was no prompt)."""
    made = iter(requests)
    return [None if prompt is None else next(made) for prompt in prompts]


_ROLES = ("system", "user", "assistant")


def chat_history(value: Any, with_options: bool) -> tuple[Message, ...] | None:
    """COMPLETE's prompt_or_history as chat messages; None for NULL. Cortex takes a string without options and
    an array of {role, content} (one system turn, first) with options; anything else is refused."""
    if value is None:
        return None
    if not with_options:
        if not isinstance(value, str):
            refuse("COMPLETE", "without options the prompt must be a string (a history array needs options)")
        return (Message("user", value),)
    if not isinstance(value, list) or not value:
        refuse("COMPLETE", "with options the prompt must be a non-empty array of {role, content} objects")
    turns: list[Message] = []
    for index, turn in enumerate(value):
        if (
            not isinstance(turn, dict)
            or turn.get("role") not in _ROLES
            or not isinstance(turn.get("content"), str)
        ):
            refuse("COMPLETE", f"history turn {index} must be {{role: system|user|assistant, content: text}}")
        if turn["role"] == "system" and index > 0:
            refuse("COMPLETE", "only the first turn of a history may be the system prompt")
        turns.append(Message(turn["role"], turn["content"]))
    return tuple(turns)
