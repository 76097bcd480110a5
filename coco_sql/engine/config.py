"""What fixes a run (`RunConfig`), what a run reports (`IterationReport`, `RunSummary`), and its RNG streams."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from coco_sql.engine.deploy_cost import CostLimit, parse_max_cost
from coco_sql.engine.registry import mutator_spec
from coco_sql.engine.spend import SpendLimit, normalise_prices
from coco_sql.errors import ConfigError
from coco_sql.llm.routing import DEFAULT_ALIASES, merge_aliases, normalise_aliases
from coco_sql.options import RUN_OPTIONS, RunOptions, as_object
from coco_sql.progress import fit
from coco_sql.search import POLICIES
from coco_sql.store import RunRecord

POLICY_STREAM, MUTATOR_STREAM, CURATOR_STREAM, MINIBATCH_STREAM, PRIMITIVE_STREAM = 0, 1, 2, 3, 4
_RETIRED_KEYS = (
    "max_drafts",
    "probe",
)  # offline-mutator settings stored at the top level before the registry


@dataclass(frozen=True)
class RunConfig(RunOptions):
    """Everything that fixes a run besides the task: the fields of `options.RunOptions` (their types, defaults
    and ranges are declared there, once), checked. Stored as JSON in `runs.config`, except the budget, whose one
    source of truth is `runs.budget` (a resume with `--budget` changes only that column).

    `mutator_settings` are the chosen mutator's own (`engine.registry`); `target` ends the run early once the
    best validation score reaches it. `max_spend` stops the run, resumable, once its model spending reaches a
    limit in tokens or US dollars at `prices` (`engine.spend`). `max_cost` limits each child's deploy cost per
    1,000 rows, in calls, tokens or dollars: a child over it is recorded but never admitted or champion
    (`engine.deploy_cost`). `champion` is the rule that names the champion (`engine.champion`): the cheapest
    program to deploy within one standard error of the best validation score (default), or the best.
    `model_aliases` map model names the SQL writes (Cortex's) to the models that answer them here
    (`llm.routing`): a run records the aliases in effect, built-in ones included, so that a resume, and anyone
    reading `runs.config` with SQL, sees which model produced its scores.

    A value a key does not take (an unknown policy, a negative budget, a `max_spend` that is neither tokens nor
    dollars, ...) is a one-line ConfigError naming the key and what it takes, raised when the config is built:
    before anything is written.
    """

    def __post_init__(self) -> None:
        for option in RUN_OPTIONS:  # type and range of every field (`coco_sql.options`), normalised in place
            object.__setattr__(self, option.name, option.check(getattr(self, option.name)))
        if self.policy not in POLICIES:
            raise ConfigError(f"unknown policy {self.policy!r} (known: {', '.join(sorted(POLICIES))})")
        object.__setattr__(
            self, "mutator_settings", mutator_spec(self.mutator).settings(self.mutator_settings)
        )
        object.__setattr__(self, "prices", normalise_prices(self.prices))
        object.__setattr__(self, "model_aliases", normalise_aliases(self.model_aliases))
        if self.max_spend is not None:
            SpendLimit.parse(self.max_spend)
        if self.max_cost is not None:
            parse_max_cost(self.max_cost)

    @property
    def spend_limit(self) -> SpendLimit | None:
        """`max_spend` parsed, or None for a run without a spend limit."""
        return None if self.max_spend is None else SpendLimit.parse(self.max_spend)

    @property
    def cost_limit(self) -> CostLimit | None:
        """`max_cost` parsed, or None for a run without a deploy-cost limit."""
        return None if self.max_cost is None else parse_max_cost(self.max_cost)

    def model_names(self) -> tuple[str, ...]:
        """The chat models the mutator's settings name (a setting `model` or `*_model` holding a name)."""
        return tuple(
            value
            for key, value in self.mutator_settings.items()
            if (key == "model" or key.endswith("_model")) and isinstance(value, str) and value
        )

    def with_model_aliases(self, given: Mapping[str, str], *, recorded: bool) -> RunConfig:
        """This config with `given` aliases (an AiConfig's) added to its own. A new run (`recorded=False`) also
        takes the built-in aliases, so that what it records is the whole mapping in effect; a resumed one keeps
        its recorded mapping, and a given alias may add to it but not change it (ConfigError): one run's scores
        come from one model per name."""
        if recorded:
            return replace(
                self, model_aliases=merge_aliases(self.model_aliases, given, "recorded with the run")
            )
        merged = merge_aliases(self.model_aliases, given, "in the run's options")
        return replace(self, model_aliases={**DEFAULT_ALIASES, **merged})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """A config from stored or user-given keys; unknown keys are a ConfigError naming the key."""
        data = dict(as_object(data, "the run options"))
        retired = {key: data.pop(key) for key in _RETIRED_KEYS if key in data}
        if retired:  # a run stored before the mutator registry: its settings move under the mutator
            settings = as_object(data.get("mutator_settings"), "option 'mutator_settings'")
            data["mutator_settings"] = {**retired, **settings}
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown run option {unknown[0]!r} (known: {', '.join(sorted(known))})")
        return cls(**data)

    @classmethod
    def stored(cls, run: RunRecord) -> RunConfig:
        """A run's configuration as its tables hold it: `runs.config` with the budget from `runs.budget`."""
        return cls.from_dict({**run.config, "budget": run.budget})

    def to_stored(self) -> dict[str, Any]:
        """The JSON for `runs.config`: everything but the budget, which lives in `runs.budget` alone."""
        stored = {k: v for k, v in asdict(self).items() if k != "budget"}
        stored["mutator_settings"] = dict(self.mutator_settings)
        stored["prices"] = {model: list(pair) for model, pair in self.prices.items()}
        stored["model_aliases"] = dict(self.model_aliases)
        return stored


@dataclass(frozen=True)
class IterationReport:
    """What one iteration did, for progress display and benchmarks (timings are not stored)."""

    iteration: int
    budget: int
    program_id: str
    parent_id: str | None
    val_score: float | None
    parent_score: float | None
    admitted: bool
    approach: str
    best_score: float
    timings_ms: dict[str, float] = field(default_factory=dict)
    exhausted: tuple[str, ...] = ()  # parents the mutator had nothing left for, before it got this one

    def line(self, width: int | None = None) -> str:
        """The progress line `coco-sql evolve` prints and `coco_progress.message` holds; within `width`
        characters when given (the approach is cut at a word, the rest kept). `+` marks a child that entered
        the archive; a parent the mutator had nothing left for, before it got this one, is named at the end."""
        score = "invalid" if self.val_score is None else f"{self.val_score:.3f}"
        mark = "+" if self.admitted else " "
        parent = f"{self.parent_id} -> " if self.parent_id else ""
        head = f"[{self.iteration:>3}/{self.budget}] {parent}{self.program_id} val {score} {mark} best {self.best_score:.3f}  "
        tail = ""
        if self.exhausted:
            had = f"{', '.join(self.exhausted)} {'has' if len(self.exhausted) == 1 else 'have'} nothing left to try"
            tail = f"  ({had}: the parent is {self.parent_id})"
        if width is None:
            return head + fit(self.approach, None) + tail
        if self.exhausted and width - len(head) - len(tail) < 12:  # a narrow terminal: the short form
            tail = f"  ({', '.join(self.exhausted)} exhausted)"
        room = max(width - len(head) - len(tail), 0)
        return fit(head + fit(self.approach, room) + tail, width)


@dataclass(frozen=True)
class RunSummary:
    run_id: int
    task: str
    iterations: int
    champion_id: str
    seed_val_score: float
    champion_val_score: float
    seed_test_score: float | None
    champion_test_score: float | None
    # the best validation score and its program: the champion unless a cheaper program is within one standard
    # error of it (`engine.champion`; option `champion`)
    best_id: str = ""
    best_val_score: float = 0.0
    # why the run stopped before its budget, in one line: its spend limit (still 'running': resume it with a
    # larger one) or no parent left to mutate (finished)
    stopped: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def iteration_rng(seed: int, iteration: int, stream: int) -> np.random.Generator:
    """The RNG of one stream of one iteration: independent of how many draws earlier iterations made."""
    return np.random.default_rng(np.random.SeedSequence([seed, iteration, stream]))
