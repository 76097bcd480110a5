"""The mutator registry: names a run may choose (`RunConfig.mutator`), each with the settings it accepts, next to
the parent policies' registry (`search.POLICIES`).

Settings belong to a mutator, not to the run: `RunConfig.mutator_settings` is checked against the chosen
mutator's declared settings (names and types), and the mutator is built for the task's language. A new mutator
(the coding agent, the one-shot baselines) is one more entry here; a new language adds its offline operators
to `OFFLINE_MUTATORS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from coco_sql.errors import ConfigError
from coco_sql.languages import Language
from coco_sql.mutate import Mutator, OfflineMutator
from coco_sql.mutate.python_mutator import PythonOfflineMutator

#: The offline (no model) operators of each language, built from the offline mutator's settings.
OFFLINE_MUTATORS: Mapping[str, Callable[..., Mutator]] = MappingProxyType(
    {"sql": OfflineMutator, "python": PythonOfflineMutator}
)


@dataclass(frozen=True)
class MutatorSpec:
    """A registered mutator: its settings with their defaults (the type of each default is the setting's type)
    and how to build it for a language."""

    name: str
    description: str
    defaults: Mapping[str, Any]
    build: Callable[[Language, Mapping[str, Any]], Mutator] = field(repr=False)

    def settings(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """`given` on top of the defaults; ConfigError for an unknown name or a value of the wrong type."""
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
            merged[name] = value
        return merged


def _offline(language: Language, settings: Mapping[str, Any]) -> Mutator:
    if settings["max_drafts"] < 1:
        raise ConfigError(f"--max-drafts must be >= 1 (got {settings['max_drafts']})")
    if language.name not in OFFLINE_MUTATORS:
        raise ConfigError(f"the offline mutator has no operators for {language.name} programs")
    return OFFLINE_MUTATORS[language.name](**settings)


MUTATORS: Mapping[str, MutatorSpec] = MappingProxyType(
    {
        "offline": MutatorSpec(
            "offline",
            "data-driven AST edits tested on training rows before commit (no model)",
            {"max_drafts": 32, "probe": True},
            _offline,
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
