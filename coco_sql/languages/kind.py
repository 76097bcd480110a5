"""A program kind as a plug-in: `KindPlugin`, what an entry point of group `coco_sql.languages` resolves to
(`coco_sql.plugins`), and the parts of it that meet the loop's own types: the offline mutator, what a primitive
is for PACE, honest train scores. It sits above the loop's types (it names them, type-only) and below nothing of
the loop: the loop reaches a kind through `coco_sql.plugins` by name, never by importing this module. The parts
that need only the seam's own types are in `languages.base`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from coco_sql.languages.base import (
    Bind,
    DraftView,
    Exporter,
    FolderExport,
    Highlighter,
    InEngineDrafts,
    Language,
    PackLoader,
    ProgramParts,
    TaskKeys,
    TaskRegistrar,
    TaskSpec,
)
from coco_sql.options import OptionTable, setting

if TYPE_CHECKING:
    import numpy as np

    from coco_sql.core.outcome import Outcome
    from coco_sql.core.proposal import Proposal
    from coco_sql.mutate.base import MutationRequest, Mutator
    from coco_sql.primitives.library import Primitive, PrimitiveLibrary
    from coco_sql.reflect.environment import DraftEnvironment
    from coco_sql.tasks import TaskPack


@dataclass(frozen=True)
class OfflineSettings:
    """The offline mutator's settings every kind takes (`mutator_settings` of `--mutator offline`), each field an
    `options.setting`: its type, default, range and doc are declared once, here. A kind with settings of its own
    subclasses it and names the subclass as its plug-in's `offline_settings`; `options.offline_settings()`
    composes every kind's table for the CLI, `CALL coco_help('offline mutator')` and the docs, and the registry
    checks a run's settings against it once (`engine.registry`), before the kind's factory gets them typed."""

    max_drafts: int = setting(32, "drafts tested on training rows per iteration", low=1, high=1024)
    probe: bool = setting(True, "test drafts on training rows (false: one untested edit)")


class OfflineMutatorFactory(Protocol):
    """The kind's offline (no model) operators, built from its offline settings (an instance of the plug-in's
    `offline_settings`, checked; none given: their defaults). A setting of another kind's, set to anything but
    its default, is refused before the factory is called (`engine.registry`)."""

    def __call__(self, settings: Any = None) -> Mutator: ...


class PrimitiveAdapter(Protocol):
    """What a primitive is in one kind, for PACE (`primitives`, `mutate.pace`): how calls and definitions are
    read on a program, how a primitive is found (E2), made (E3), admitted, moved between programs (P1, P2, P4)
    and kept through the inner mutator's edit (P3). Every method takes the task's `dialect`; a kind with one
    dialect ignores it. A program that does not parse raises CandidateRejected where the method says so."""

    #: where a child carries the definitions it calls (PACE's operator prompt)
    where_definitions: str

    def call_set(self, code: str, names: frozenset[str], *, dialect: str) -> frozenset[str]:
        """C(A) restricted to `names`. Raises CandidateRejected."""
        ...

    def definitions(self, code: str, *, dialect: str) -> dict[str, str]:
        """name -> normalised definition text of every primitive definition `code` carries."""
        ...

    def library_definition(self, primitive: Primitive, *, dialect: str) -> str:
        """A library primitive's definition, normalised as `definitions` normalises a program's copy."""
        ...

    def extract(
        self,
        code: str,
        library: PrimitiveLibrary,
        *,
        origin_program: str | None,
        iteration: int,
        dialect: str,
        entry: str | None,
        rng: np.random.Generator | None,
        prefer: str | None,
        top: int,
    ) -> Primitive | None:
        """E2: one primitive refactored out of `code`, which is left as it is; None when nothing qualifies."""
        ...

    def combine(
        self,
        a: Primitive,
        b: Primitive,
        library: PrimitiveLibrary,
        rng: np.random.Generator,
        *,
        iteration: int,
        dialect: str,
    ) -> Primitive | None:
        """E3 without a model: a new primitive made of two; None when they do not combine."""
        ...

    def adopt(
        self,
        code: str,
        library: PrimitiveLibrary,
        *,
        how: str,
        iteration: int,
        origin_program: str | None,
        inputs: Sequence[str] | None,
        dialect: str,
    ) -> Primitive:
        """The library's primitive for one definition written elsewhere. Raises CandidateRejected."""
        ...

    def with_definitions(self, code: str, primitives: Sequence[Primitive], *, dialect: str) -> str:
        """`code` carrying the definitions of `primitives` it does not define yet (by name)."""
        ...

    def remove_definitions(self, code: str, names: set[str], *, dialect: str) -> str:
        """`code` without the definitions of `names`."""
        ...

    def replace_calls(
        self, code: str, target: Primitive, replacement: Primitive, *, dialect: str
    ) -> str | None:
        """Every call of `target` renamed to `replacement` (same arguments); None when there is none."""
        ...

    def swap_calls(self, code: str, target: Primitive, replacement: Primitive, *, dialect: str) -> str | None:
        """Every call of `target` made a call of `replacement` on its own parameters; None when `code` does not
        parse or does not call `target`."""
        ...

    def insertions(
        self, code: str, focus: Primitive, library: PrimitiveLibrary, *, dialect: str
    ) -> list[tuple[str, str]]:
        """(description, program) drafts that call `focus` (P1, P4), best guesses first."""
        ...

    def refine(
        self,
        inner: Mutator,
        request: MutationRequest,
        library: PrimitiveLibrary,
        rng: np.random.Generator,
        *,
        dialect: str,
    ) -> Proposal:
        """P3: the inner mutator's child of `request.parent`, its primitives kept as calls."""
        ...


class CrossFit(Protocol):
    """Honest train scores: `outcome` (a program's own, on every training row) with the rows the program holds
    as examples predicted out of fold; `outcome` itself when there is nothing to cross-fit."""

    def __call__(self, env: DraftEnvironment, code: str, outcome: Outcome) -> Outcome: ...


@dataclass(frozen=True)
class KindPlugin:
    """One program kind, as an entry point of group `coco_sql.languages` resolves to (`coco_sql.plugins`).

    `name` is task.toml's `language`; `program_prompt` says what a program is, for the coding agent's prompt.
    Every optional part is None when the kind lacks it, and its callers then do without it."""

    name: str
    bind: Bind
    program_prompt: Callable[[TaskPack], str]
    offline_mutator: OfflineMutatorFactory | None = None
    # the offline mutator's settings this kind takes: `OfflineSettings` or a subclass with the kind's own fields
    offline_settings: type[OfflineSettings] = OfflineSettings
    # coco_task's options of a task of this kind beyond the shared ones (`options.TASK_OPTIONS`), printed by
    # `CALL coco_help('coco_task')` and `coco_help('coco_task <kind>')`; its registrar checks them
    task_options: OptionTable | None = None
    primitives: PrimitiveAdapter | None = None
    cross_fit: CrossFit | None = None
    exports: Exporter | None = None
    highlight: Highlighter | None = None
    task_keys: TaskKeys | None = None
    references: Callable[[TaskPack], bool] | None = None  # whether a task gets reference tables (`examples`)
    # whether a task calls AI (its runs get the AI runtime and its sandboxes the AI UDFs: `TaskPack.uses_ai`);
    # None: never
    uses_ai: Callable[[TaskPack], bool] | None = None
    in_engine_drafts: InEngineDrafts | None = None
    pack_loader: PackLoader | None = None
    registrar: TaskRegistrar | None = None  # coco_task of this kind over the user's tables
    task_spec: TaskSpec | None = None  # coco_task's option `spec`: another tool's task specification
    # named mutators of the kind's own beyond `offline_mutator` (SQL: the `prompt_only` baseline), each built from
    # the bound language and the mutator's checked settings (`engine.registry`)
    mutators: Mapping[str, Callable[[Language, Mapping[str, Any]], Mutator]] = field(default_factory=dict)
    # the settings of each of those mutators (`CALL coco_help('<name> mutator')`), checked by the registry
    mutator_settings: Mapping[str, OptionTable] = field(default_factory=dict)
    folder_export: FolderExport | None = None
    parts: Callable[[str], ProgramParts | None] | None = None  # a program of several files, for the report
    # a champion larger than this gets a warning after a run (SQL, issue 15: inline few-shot examples make a
    # program hard to review and costly per row; they belong in a small subset or a table); None: no warning
    warn_bytes: int | None = None
    dialects: bool = False  # programs are written in the task's dialect (task.toml `dialect`)
    # each run leaves a trace per row (`RunResult.observations`): the coding agent is offered `get_row_trace`
    row_traces: bool = False
    # a program of several files in one text, each under a line `{file_marker}PATH`: the coding agent's
    # edit_candidate may scope a search to one file by starting it with that line (`agent.workspace`)
    file_marker: str | None = None
    draft_view: DraftView | None = (
        None  # the kind's own answer to a draft test; None: output against expected
    )
