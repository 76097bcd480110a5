"""The data-agent kind behind the `Language` seam: a program is an agent spec (YAML or JSON text), one evaluation
runs it on every question row of a split, and each row keeps the run's trace as its observation.

- `validate`: `spec.parse` and `validate.validate_spec` over the task's tables; the runnable text is the spec's
  canonical YAML (`spec.dump`), so two texts of one spec share the evaluator's memo and the cache's requests.
- `runner`: an `AgentRunner` over the split's questions. It runs inside the evaluator's AI evaluation (which
  accounts every model call and bounds the whole split by the task's timeout), each question with the task's
  `RunLimits`, the spec's tools over the task's tables only (`tools.ToolBox`): in SQL sandboxes, or, when the
  kind is bound to a store's `CandidateEngine` (Snowflake), as warehouse queries over the tables staged there,
  with the chat on Cortex COMPLETE (`warehouse`). The answer is the row's output, the bounded trace
  (`trace.py`) its observation; the expected answer never reaches the run.
- `score_rows` (`languages.base.ScoresRows`): DABStep scoring (`scoring.score`), which reads the row's guidelines
  for the rounding asked; it runs here, on the evaluator's side, on answers only.
- its export form, ``cortex_agent``, is `export_form` (the plug-in, `kind.py`).

The model: the task's ``[agent_spec] model``, or the run's completion model when one is configured
(``--completion-model``, COCO_COMPLETION_MODEL), routed by the `llm` layer (an endpoint, ``cortex:<model>``, or the
embedded ``smollm2``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from coco_sql.errors import ConfigError, EvaluationError
from coco_sql.languages.agent_spec.runtime import run_question
from coco_sql.languages.agent_spec.scoring import score
from coco_sql.languages.agent_spec.settings import AgentTask, agent_task
from coco_sql.languages.agent_spec.smoke import check_tool_calling
from coco_sql.languages.agent_spec.spec import AgentSpec, dump, parse
from coco_sql.languages.agent_spec.tools import ToolBox
from coco_sql.languages.agent_spec.validate import validate_spec
from coco_sql.languages.agent_spec.warehouse import SplitProbes, WarehouseToolQueries, cortex_model
from coco_sql.languages.base import Program, RunResult
from coco_sql.search.features import cell_of_counts

if TYPE_CHECKING:
    from coco_sql.core.ai_table import LocalFunctions
    from coco_sql.llm.runtime import AiRuntime
    from coco_sql.progress import Progress
    from coco_sql.store.base import CandidateEngine
    from coco_sql.tasks import Split, TaskPack


class AgentSpecLanguage:
    name = "agent_spec"

    def __init__(self, task: TaskPack, engine: CandidateEngine | None = None) -> None:
        """`engine`: the store's, when it runs candidates itself: the tools run there, the chat on Cortex."""
        self.task = task
        self.agent: AgentTask = agent_task(task)  # TaskError (one line) before anything runs
        self._warehouse = (
            None if engine is None else WarehouseToolQueries(engine, self.agent.tables.rows, task.dialect)
        )
        self.smoked = False  # the model answered the smoke question with a tool call (`smoke`)

    def validate(self, code: str) -> Program:
        spec = validate_spec(parse(code), self.agent.tables.schemas, dialect=self.task.dialect)
        return Program(self.name, code, dump(spec), spec)

    def cell(self, program: Program) -> str:
        """Size: every item of the spec (tools, parameters, semantic tables and columns, relationships, verified
        queries, documents, instruction paragraphs); branching: the ways it answers (tools, verified queries)."""
        spec: AgentSpec = program.tree
        model = spec.semantic_model
        paragraphs = sum(
            len([p for p in text.split("\n\n") if p.strip()])
            for text in (
                spec.instructions.system,
                spec.instructions.orchestration,
                spec.instructions.response,
            )
        )
        items = (
            len(spec.tools) + sum(len(t.parameters) for t in spec.tools) + len(model.tables)
            + sum(len(t.columns) for t in model.tables) + len(model.relationships) + len(model.verified_queries)
            + len(spec.documents) + paragraphs
        )  # fmt: skip
        return cell_of_counts(items * 4, (len(spec.tools) + len(model.verified_queries)) * 2)

    def runner(self, split: Split, ai: LocalFunctions | None) -> AgentRunner:
        if ai is None:
            raise ConfigError(
                f"task {self.task.name!r}: an agent spec needs a model runtime (none was given)"
            )
        if self._warehouse is not None:
            cortex_model(ai.runtime.config, self.model(ai.runtime), self.task.name)
        return AgentRunner(self, split, ai.runtime, self._warehouse, progress=ai.runtime.config.progress)

    def score_rows(
        self, split: Split, ids: Sequence[str], outputs: Sequence[object | None], expected: Sequence[object]
    ) -> list[float]:
        guides = self._guidelines(split)
        return [
            score(None if out is None else str(out), str(exp), guides.get(i, ""))
            for i, out, exp in zip(ids, outputs, expected, strict=True)
        ]

    def model(self, runtime: AiRuntime) -> str:
        return runtime.config.completion_model or self.agent.model

    def _guidelines(self, split: Split) -> dict[str, str]:
        column = self.agent.guidelines_column
        if column is None:
            return {}
        frame = split.inputs
        return {str(i): "" if g is None else str(g) for i, g in zip(frame["id"], frame[column], strict=True)}


class AgentRunner:
    """Runs specs over one split's questions; the answers are the outputs, the traces the observations."""

    def __init__(
        self,
        language: AgentSpecLanguage,
        split: Split,
        runtime: AiRuntime,
        warehouse: WarehouseToolQueries | None = None,
        progress: Progress | None = None,
    ) -> None:
        """`warehouse`: the binding's staged tables, shared with its other runners (None: SQL sandboxes);
        `progress`: told after each question (`coco_sql.progress`: a terminal's line)."""
        self.language = language
        self.progress = progress
        self.split_name = split.name
        self.runtime = runtime
        self._warehouse = warehouse.acquire() if warehouse is not None else None
        # the mutator's probes over the questions: in the warehouse too (None: the evaluator's own sandbox)
        self.probe_sandbox = (
            None if warehouse is None else SplitProbes(warehouse.engine, split.name, split.inputs)
        )
        agent = language.agent
        frame = split.inputs
        guidelines = frame[agent.guidelines_column] if agent.guidelines_column else [""] * len(frame)
        self.questions = [
            (str(i), str(q), "" if g is None else str(g))
            for i, q, g in zip(frame["id"], frame[agent.question_column], guidelines, strict=True)
        ]

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        started = time.monotonic()
        agent, spec = self.language.agent, program.tree
        model = self.language.model(self.runtime)
        if (
            not self.language.smoked
        ):  # before the first question: a model that calls no tool stops the run here
            check_tool_calling(self.runtime, model, inside=True)
            self.language.smoked = True
        outputs: list[tuple[object, object]] = []
        errors: dict[str, str] = {}
        observations = {}
        with ToolBox(spec, agent.tables.rows, agent.tables.schemas, dialect=self.language.task.dialect,
                     limits=agent.tool_limits, queries=self._warehouse) as toolbox:  # fmt: skip
            for done, (question_id, question, guidelines) in enumerate(self.questions):
                if self.progress is not None:
                    self.progress(f"{self.split_name} questions", done, len(self.questions))
                left = deadline_s - (time.monotonic() - started)
                if left <= 0:
                    errors[question_id] = f"the evaluation's {deadline_s:g} s passed before this question"
                    continue
                limits = replace(agent.run_limits, seconds=min(agent.run_limits.seconds, left))
                run = run_question(spec, question_id, question, guidelines, runtime=self.runtime, toolbox=toolbox,
                                   model=model, limits=limits, inside=True)  # fmt: skip
                observations[question_id] = run.trace
                if run.answer:
                    outputs.append((question_id, run.answer))
                else:
                    errors[question_id] = f"no answer ({run.trace.get('stop')})"
        if self.progress is not None:
            self.progress(f"{self.split_name} questions", len(self.questions), len(self.questions))
        if not outputs and not observations:
            raise EvaluationError("the agent answered no question")
        return RunResult(outputs, (time.monotonic() - started) * 1000, errors, observations=observations)

    def close(self) -> None:
        """Each run's sandboxes close with its toolbox; the warehouse's staged tables with the binding's last
        runner."""
        warehouse, self._warehouse = self._warehouse, None
        if warehouse is not None:
            warehouse.release()
        if self.probe_sandbox is not None:
            self.probe_sandbox.close()
