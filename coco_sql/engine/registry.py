"""The mutator registry: names a run may choose (`RunConfig.mutator`), each with the settings it accepts, next to
the parent policies' registry (`search.POLICIES`).

Settings belong to a mutator, not to the run: `RunConfig.mutator_settings` is checked against the chosen
mutator's declared settings (names and types), and the mutator is built for the task's language. A new mutator
(the coding agent, the one-shot baselines) is one more entry here; a kind brings its offline operators as its
plug-in's `offline_mutator`, with their typed settings (`offline_settings`), and its own mutators' settings
(`mutator_settings`), all composed by `coco_sql.options` (`languages.kind.KindPlugin`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from coco_sql.errors import ConfigError
from coco_sql.languages.base import Language
from coco_sql.mutate.base import Mutator
from coco_sql.options import OptionTable, as_object, kind_mutator_settings, offline_settings
from coco_sql.plugins import kind


@dataclass(frozen=True)
class MutatorSpec:
    """A registered mutator: its settings with their defaults (the type of each default is the setting's type)
    and how to build it for a language."""

    name: str
    description: str
    defaults: Mapping[str, Any]
    build: Callable[[Language, Mapping[str, Any]], Mutator] = field(repr=False)
    check: Callable[[Mapping[str, Any]], None] | None = field(default=None, repr=False)  # ConfigError if bad
    options: OptionTable | None = field(default=None, repr=False)  # each setting's range (`coco_sql.options`)
    # settings composed when asked (the offline mutator's, from the installed kinds): defaults and options
    table: Callable[[], OptionTable] | None = field(default=None, repr=False)

    def settings(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """`given` on top of the defaults; ConfigError for an unknown name, or a value of the wrong type or out of
        its range."""
        if self.table is not None:
            options = self.table()
            defaults = {option.name: option.default for option in options}
            return replace(self, defaults=defaults, options=options, table=None).settings(given)
        given = as_object(given, "option 'mutator_settings'")
        unknown = sorted(set(given) - set(self.defaults))
        if unknown:
            raise ConfigError(
                f"mutator {self.name!r} has no setting {unknown[0]!r} (settings: {', '.join(self.defaults)})"
            )
        merged = dict(self.defaults)
        for name, value in given.items():
            expected = type(self.defaults[name])
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise ConfigError(
                    f"mutator {self.name!r}: setting {name!r} must be {expected.__name__} (got {value!r})"
                )
            if self.options is not None:
                value = self.options[name].check(
                    value, prefix=f"mutator {self.name!r}: ", label=f"setting {name!r}"
                )
            merged[name] = value
        if self.check is not None:
            self.check(merged)
        return merged


def _offline(language: Language, settings: Mapping[str, Any]) -> Mutator:
    """The kind's offline operators, built from its typed offline settings (`KindPlugin.offline_settings`).
    `settings` are checked against every kind's (`options.offline_settings`); a setting of another kind's, set
    to anything but its default, is refused here (`max_examples` belongs to SQL AI pipelines)."""
    plugin = kind(language.name)
    if plugin.offline_mutator is None:
        raise ConfigError(f"the offline mutator has no operators for {language.name} programs")
    return plugin.offline_mutator(kind_settings(plugin.name, plugin.offline_settings, settings))


def kind_settings(name: str, cls: type[Any], settings: Mapping[str, Any]) -> Any:
    """The kind `name`'s offline settings (`cls`, a dataclass) from checked, composed `settings`: a setting
    that is not among its fields and differs from its default is a one-line ConfigError naming both."""
    own = {f.name for f in fields(cls)}
    defaults = {option.name: option.default for option in offline_settings()}
    for key, value in settings.items():
        if key not in own and value != defaults.get(key):
            raise ConfigError(
                f"mutator 'offline': setting {key!r} is not one of a {name} task's (its settings: "
                f"{', '.join(sorted(own))})"
            )
    return cls(**{key: value for key, value in settings.items() if key in own})


def _kind_mutator(name: str) -> Callable[[Language, Mapping[str, Any]], Mutator]:
    """A builder of the kind's own mutator `name` (`KindPlugin.mutators`); one line for a kind without it."""

    def build(language: Language, settings: Mapping[str, Any]) -> Mutator:
        factory = kind(language.name).mutators.get(name)
        if factory is None:
            raise ConfigError(f"the {name} mutator has no operators for {language.name} programs")
        return factory(language, settings)

    return build


def _agent(**presets: Any) -> Callable[[Language, Mapping[str, Any]], Mutator]:
    """A builder of the agent mutator with `presets` on top of the user's settings (the baselines fix theirs)."""

    def build(language: Language, settings: Mapping[str, Any]) -> Mutator:
        from coco_sql.agent.mutator import AgentMutator, AgentSettings

        values = {**settings, **presets}
        plugin = kind(language.name)
        offline = plugin.offline_mutator
        return AgentMutator(AgentSettings(**values), offline(plugin.offline_settings()) if offline else None)

    return build


def _agent_check(**presets: Any) -> Callable[[Mapping[str, Any]], None]:
    """The agent's settings checked when the run is configured, before anything is written."""

    def check(settings: Mapping[str, Any]) -> None:
        from coco_sql.agent.mutator import AgentSettings

        AgentSettings(**{**settings, **presets})

    return check


def _agent_defaults(fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The agent's settings with their defaults, minus those a baseline `fixed` (which a user may not set)."""
    from dataclasses import fields

    from coco_sql.agent.mutator import AgentSettings

    return {f.name: f.default for f in fields(AgentSettings) if f.name not in (fixed or {})}


# The baselines fix the agent's shape: one-shot, no history tools and no ledger; only the prompt differs.
GEPA_LIKE = {
    "mode": "static",
    "prompt": "gepa_task",
    "history": False,
    "ledger": False,
    "offline_tools": False,
}
OPENEVOLVE_LIKE = {**GEPA_LIKE, "prompt": "openevolve_task"}

MUTATORS: Mapping[str, MutatorSpec] = MappingProxyType(
    {
        "offline": MutatorSpec(
            "offline",
            "data-driven AST edits tested on training rows before commit (no model)",
            {},
            _offline,
            table=offline_settings,
        ),
        "agent": MutatorSpec(
            "agent",
            "a coding agent over a chat model: history and data tools, workspace edits, self-test, commit",
            _agent_defaults(),
            _agent(),
            _agent_check(),
        ),
        "gepa_like": MutatorSpec(
            "gepa_like",
            "GEPA-style baseline: one-shot reflective rewrite of the parent from its training feedback "
            "(run it with --policy pareto)",
            _agent_defaults(GEPA_LIKE),
            _agent(**GEPA_LIKE),
            _agent_check(**GEPA_LIKE),
        ),
        "prompt_only": MutatorSpec(
            "prompt_only",
            "baseline: the search Snowflake's AI-function optimizer makes, the one AI call's prompt and model "
            "(few-shot examples, label descriptions, answers, output_mode, models), tested on training rows",
            {},
            _kind_mutator("prompt_only"),
            table=lambda: kind_mutator_settings().get("prompt_only", OptionTable("", ())),
        ),
        "openevolve_like": MutatorSpec(
            "openevolve_like",
            "OpenEvolve-style baseline: one-shot full rewrite with other elites as inspiration "
            "(run it with --policy map_elites)",
            _agent_defaults(OPENEVOLVE_LIKE),
            _agent(**OPENEVOLVE_LIKE),
            _agent_check(**OPENEVOLVE_LIKE),
        ),
    }
)


def mutator_spec(name: str) -> MutatorSpec:
    """The registered mutator `name`; ConfigError naming the known ones otherwise."""
    if name not in MUTATORS:
        raise ConfigError(f"unknown mutator {name!r} (known: {', '.join(MUTATORS)})")
    return MUTATORS[name]


def build_mutator(name: str, language: Language, settings: Mapping[str, Any]) -> Mutator:
    spec = mutator_spec(name)
    return spec.build(language, spec.settings(settings))
