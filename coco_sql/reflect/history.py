"""The history query tools of CoCoEvolve (Table 6): what the mutator may ask about the search so far.

Every tool is one or two named SQL queries of `coco_sql.store.history_sql`, run through `Warehouse.history`.
What a tool may return is the point of this module (the no-leak contract):

- per-instance tools see the TRAIN split only: instance ids, outputs, expected values and errors of training rows;
- program-level scores are aggregates: `val_score` (validation mean) and `train_score`; a validation row, its id,
  input or expected value is never returned;
- nothing from the test split is ever returned, not even an aggregate;
- a program's `error` is shown only when its training rows carry the same message (otherwise a fixed text says
  it failed on validation rows), so a runtime error cannot quote a validation row;
- an unknown program id, or an id that is not a TRAINING instance of the run, raises a one-line ConfigError that
  says the same thing whether or not the id exists in another split.

Every return value is plain JSON-able Python (dicts, lists, str, numbers, bool, None).
"""

from __future__ import annotations

import inspect
import json
from typing import TYPE_CHECKING, Any, ClassVar

from coco_sql.errors import ConfigError
from coco_sql.options import TOOL_ARGUMENTS

if TYPE_CHECKING:  # the CLI's parser reads TOOLS and CLI_FLAGS without loading a store
    from coco_sql.store.base import Warehouse

#: The command-line flag of each tool parameter (`coco-sql history TOOL ...`), for error messages.
CLI_FLAGS: dict[str, str] = {
    "program_id": "--program",
    "instance_id": "--instance",
    "iteration": "--iteration",
    "cell": "--cell",
    "n": "-n",
    "depth": "--depth",
}


class HistoryTools:
    """Table 6 of the CoCoEvolve paper over one run's tables. Per-instance tools see the TRAIN split only;
    program-level scores are validation aggregates; nothing from the test split is ever returned."""

    TOOLS: ClassVar[tuple[str, ...]] = (
        "get_program",
        "get_parent",
        "get_lineage",
        "get_best_programs",
        "get_diverse_programs",
        "get_architecture_history",
        "get_recent_scores",
        "get_thinking_trace",
        "get_question_solvers",
        "get_question_memory",
        "get_suggested_questions",
        "get_hard_questions",
        "get_primitives",
    )
    # Read by `call` and the CLI; offered to the coding agent only for kinds whose runs leave traces
    # (`KindPlugin.row_traces`): a new tool in its list changes every request it sends, so the cached agent runs
    # of the other kinds would be asked again.
    ROW_TOOLS: ClassVar[tuple[str, ...]] = ("get_row_trace",)

    def __init__(self, store: Warehouse, run_id: int) -> None:
        """Bind the tools to run `run_id` of `store`; raises StoreError when the run does not exist."""
        store.get_run(run_id)
        self.store = store
        self.run_id = run_id

    # -- lineage -------------------------------------------------------------------------------------------
    def get_program(self, program_id: str) -> dict[str, Any]:
        """One program: code, parent_id, donor_id, iteration, island, cell, approach, strategy, valid, error,
        val_score, train_score (scores are None when it was not scored on that split)."""
        return self._one("program", program_id=self._program(program_id))

    def get_parent(self, program_id: str) -> dict[str, Any]:
        """The program's parent and donor with their val scores and the program's delta over its parent
        (`delta`), plus `children`: every child of this program, by iteration, with its val score and
        `delta` = child val score - this program's val score (None for an invalid child)."""
        program_id = self._program(program_id)
        result = self._one("parent", program_id=program_id)
        result["children"] = self._rows("children", program_id=program_id)
        return result

    def get_lineage(self, program_id: str, depth: int = 10) -> list[dict[str, Any]]:
        """The ancestors of a program, nearest first: depth 1 is the parent, depth k the parent at depth k-1;
        at most `depth` of them, ending at the seed when `depth` reaches it. Each has program_id, iteration,
        parent_id, val_score, train_score, approach, strategy."""
        return self._rows("lineage", program_id=self._program(program_id), depth=_positive("depth", depth))

    def get_best_programs(self, n: int = 5) -> list[dict[str, Any]]:
        """The top `n` valid programs by val score, best first (ties: the earliest iteration first)."""
        return self._rows("best_programs", n=_positive("n", n))

    def get_diverse_programs(self) -> list[dict[str, Any]]:
        """One program per occupied MAP-Elites cell: the best current occupant of the cell over all islands
        (`islands` lists the islands where the cell is occupied), ordered by val score, best first."""
        return self._rows("diverse_programs")

    def get_architecture_history(self, cell: str | None = None) -> list[dict[str, Any]]:
        """Every archive landing (of `cell`, or of all cells), in landing order (iteration, seq): island,
        cell, program_id, reason (seed | admitted | migrated), val_score, and the occupant it replaced in
        that (island, cell) with its val score (None for the first landing). An unoccupied cell gives []."""
        return self._rows("architecture_history", cell=cell)

    # -- trajectory ----------------------------------------------------------------------------------------
    def get_recent_scores(self, n: int = 20) -> list[dict[str, Any]]:
        """The last `n` iterations, oldest first: iteration, program_id, parent_id, valid, val_score (None when
        invalid), best_so_far (best val score of iterations <= this one), and the ledger's status and
        score_delta (None for the seed)."""
        return self._rows("recent_scores", n=_positive("n", n))

    def get_thinking_trace(self, iteration: int) -> dict[str, Any]:
        """What one iteration thought: `events`, its events in the order they were written (iteration, kind,
        program_id and payload parsed from JSON), and `transcript`, the mutator's conversation with its chat
        models, ordered by agent and turn: agent, turn, role, content, tool_calls (a list of {id, name,
        arguments}), tool_call_id, tool_name (a tool turn: the tool's result is its content), input_tokens,
        output_tokens, template ('name@version') and model. An offline mutator leaves the transcript empty.

        A transcript holds only what a mutator saw: its prompts, the model's answers and the results of its
        tools, which serve training rows and validation aggregates only, so it never carries a validation or test
        row. Raises ConfigError for an iteration the run does not have."""
        (span,) = self._rows("iterations")
        if (
            span["last"] is None
            or not isinstance(iteration, int)
            or not span["first"] <= iteration <= span["last"]
        ):
            known = "none" if span["last"] is None else f"{span['first']}..{span['last']}"
            raise ConfigError(f"no iteration {iteration!r} in run {self.run_id} (iterations: {known})")
        events = self._rows("thinking_trace", iteration=iteration)
        for event in events:
            event["payload"] = _parsed(event["payload"])
        turns = self._rows("thinking_turns", iteration=iteration)
        for turn in turns:
            turn["tool_calls"] = _parsed(turn["tool_calls"]) or []
        return {"iteration": iteration, "events": events, "transcript": turns}

    # -- per task: training rows only ----------------------------------------------------------------------
    def get_question_solvers(self, instance_id: str, n: int = 5) -> list[dict[str, Any]]:
        """The top `n` programs on one training instance, best row score first (ties: earliest): program_id,
        iteration, score (on that row), output, error, val_score, parent_id and parent_score (the parent's
        score on the same row)."""
        return self._rows("question_solvers", instance_id=self._instance(instance_id), n=_positive("n", n))

    def get_question_memory(self, instance_id: str, n: int = 20) -> list[dict[str, Any]]:
        """Regressions on one training instance: the latest `n` children whose score on the row is below their
        parent's, oldest first (child_id, parent_id, iteration, child_score, parent_score, delta < 0, both
        outputs, and the child's approach and strategy)."""
        return self._rows("question_memory", instance_id=self._instance(instance_id), n=_positive("n", n))

    def get_suggested_questions(self, program_id: str, n: int = 10) -> list[dict[str, Any]]:
        """The program's training rows ranked worst first (score ascending; among equal scores, rows that the
        population solves best first, then by id): instance_id, score, output, expected, error,
        population_best (best score of any program on the row) and solvers (programs scoring >= 0.9)."""
        return self._rows("suggested_questions", program_id=self._program(program_id), n=_positive("n", n))

    def get_hard_questions(self, n: int = 10) -> list[dict[str, Any]]:
        """Training instances by population-best score ascending (ties: mean score, then id): instance_id,
        population_best, mean_score, solvers (programs scoring >= 0.9) and programs (rows scored)."""
        return self._rows("hard_questions", n=_positive("n", n))

    def get_row_trace(self, program_id: str, instance_id: str) -> dict[str, Any]:
        """One program's evaluation row on one training instance: instance_id, score, output, error and
        observation, parsed (for a data agent, the trace of its run: messages, tool calls, their SQL and results,
        the answer and why it stopped; never the expected answer, which the run is never given)."""
        row = self._one(
            "row_trace", program_id=self._program(program_id), instance_id=self._instance(instance_id)
        )
        return {**row, "observation": _parsed(row["observation"])}

    def get_primitives(self, n: int = 20) -> list[dict[str, Any]]:
        """PACE's library, best posterior first: name, language, signature, how (extracted | generated),
        origin_program, created_iteration, posterior_mean (Beta(1 + improved, 1 + not improved) over verified
        trials), trials, improved, violations (unverified trials), code, and helped_in: the children whose
        verified trial with it as focus beat their parent ({iteration, program_id, operator, parent_score,
        child_score}, validation aggregates). Empty for a run without primitives."""
        helped: dict[str, list[dict[str, Any]]] = {}
        for row in self._rows("primitive_helped"):
            helped.setdefault(row.pop("name"), []).append(row)
        rows = self._rows("primitives", n=_positive("n", n))
        return [{**row, "helped_in": helped.get(row["name"], [])} for row in rows]

    # -- dispatch ------------------------------------------------------------------------------------------
    def call(self, tool: str, **kwargs: Any) -> Any:
        """Run tool `tool` (one of TOOLS) with keyword arguments. ConfigError for an unknown tool (naming the
        known ones), an argument the tool does not take, or a required argument that is missing."""
        if tool not in (*self.TOOLS, *self.ROW_TOOLS):
            known = ", ".join((*self.TOOLS, *self.ROW_TOOLS))
            raise ConfigError(f"unknown history tool {tool!r} (known: {known})")
        method = getattr(self, tool)
        parameters = inspect.signature(method).parameters
        unknown = sorted(set(kwargs) - set(parameters))
        if unknown:
            takes = ", ".join(_describe(p) for p in parameters) or "no arguments"
            raise ConfigError(f"{tool} does not take {', '.join(map(_describe, unknown))} (takes: {takes})")
        missing = [
            name
            for name, p in parameters.items()
            if p.default is inspect.Parameter.empty and name not in kwargs
        ]
        if missing:
            raise ConfigError(f"{tool} needs {', '.join(map(_describe, missing))}")
        return method(**kwargs)

    # -- helpers -------------------------------------------------------------------------------------------
    def _rows(self, query: str, **params: Any) -> list[dict[str, Any]]:
        return self.store.history(query, {"run_id": self.run_id, **params})

    def _one(self, query: str, **params: Any) -> dict[str, Any]:
        rows = self._rows(query, **params)
        if len(rows) != 1:  # the id was checked first: this is an inconsistent store, not a user error
            raise ConfigError(
                f"history query {query!r} found {len(rows)} rows for {params} in run {self.run_id}"
            )
        return rows[0]

    def _program(self, program_id: str) -> str:
        if not isinstance(program_id, str) or not self._rows("has_program", program_id=program_id):
            raise ConfigError(f"no program {program_id!r} in run {self.run_id}")
        return program_id

    def _instance(self, instance_id: str) -> str:
        """`instance_id` if it is a training instance of the run. The message is the same for an id of another
        split and for an id that does not exist, so it reveals nothing about validation or test rows."""
        if not isinstance(instance_id, str) or not self._rows("has_train_instance", instance_id=instance_id):
            raise ConfigError(f"no training instance {instance_id!r} in run {self.run_id}")
        return instance_id


def _parsed(value: Any) -> Any:
    """A JSON column as Python: stores return it as JSON text (None stays None)."""
    return json.loads(value) if isinstance(value, str) else value


def _positive(name: str, value: int) -> int:
    """`value` of the integer argument `name` within its range (`options.TOOL_ARGUMENTS`): it becomes a SQL
    parameter (a LIMIT or a depth), so a value past what the query takes is refused here, in one line, instead
    of failing inside DuckDB (a `-n 2**70` overflowed BIGINT)."""
    option = TOOL_ARGUMENTS[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a positive integer (got {value!r})")
    if not option.low <= value <= option.high:  # type: ignore[operator]
        raise ConfigError(f"{name} must be a positive integer up to {option.high:,.0f} (got {value!r})")
    return value


def _describe(parameter: str) -> str:
    flag = CLI_FLAGS.get(parameter)
    return parameter if flag is None else f"{parameter} ({flag})"


__all__ = ["CLI_FLAGS", "HistoryTools"]
