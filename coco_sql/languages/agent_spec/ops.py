"""The offline operators of agent specs: edits that need no model, made from the spec, the training history and the
task's documents they are given. Each returns drafts (a new spec and a one-line description), in a fixed order; the
caller picks among them with its own seeded RNG and validates the pick like any candidate.

- `add_verified_queries`: the SQL that answered a solved training question becomes a verified query (question +
  SQL) of the spec.
- `remove_verified_queries`: drop one verified query; the description counts the failed and solved training
  questions whose runs ran a query of the same shape (literals aside), the evidence for or against it.
- `move_tool_text`: move a tool's parameter docs into its description, or the sentences of its description that
  name a parameter into that parameter's doc.
- `reorder_instructions`: put an instruction's last paragraph first, split a paragraph into one sentence per line,
  or move the system instruction's last paragraph to the orchestration instruction.
- `add_document_sections`: a section of the task's documents that a solved training question's run read (a
  ``documents`` row in its trace) joins the spec's documents, so every run has it in its context.

What they can do: spread what the history and the documents already hold. A question shape solved once can be
solved again through its verified query; a rule written in a document section that some solved run happened to read
reaches every run; text can move to where a model may weigh it more. What they cannot do: write a rule that no
document states and no solved run used (in the DABStep pack, that an empty list means "all values" is written
nowhere), fix a query that never worked, or judge whether moved text helps: that needs a model (the coding agent)
and the evaluation. Moving text changes nothing for a model that reads the spec as a whole (tests/agent_model.py);
it is there for real models, which weigh where a sentence stands.

They read training rows only: the caller passes the history of training questions, whose traces never hold an
expected answer (`trace.py`); the leakage test plants markers in the held-out answers and checks every draft.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from coco_sql.languages.agent_spec.pack import Section
from coco_sql.languages.agent_spec.spec import (
    MAX_ITEMS,
    MAX_TEXT_CHARS,
    AgentSpec,
    Document,
    Instructions,
    VerifiedQuery,
)
from coco_sql.languages.agent_spec.trace import checked_queries, read_sections
from coco_sql.plugin_loader import DEPLOY_DIALECT


@dataclass(frozen=True)
class Observed:
    """One training question's last run: its text, whether it was solved, and its trace."""

    question_id: str
    question: str
    solved: bool
    trace: Mapping[str, Any]


@dataclass(frozen=True)
class Draft:
    spec: AgentSpec
    operator: str
    description: str


def add_verified_queries(spec: AgentSpec, history: Sequence[Observed]) -> list[Draft]:
    model = spec.semantic_model
    if len(model.verified_queries) >= MAX_ITEMS:
        return []
    known_questions = {q.question for q in model.verified_queries}
    known_shapes = {shape(q.sql) for q in model.verified_queries}
    drafts = []
    for row in sorted(history, key=lambda r: r.question_id):
        steps = list(checked_queries(row.trace))
        if not row.solved or not steps or row.question in known_questions:
            continue
        sql = steps[-1]["sql"]  # the query whose result the answer came from
        if shape(sql) in known_shapes or len(sql) > MAX_TEXT_CHARS:
            continue
        name = _free_name(f"vq_{row.question_id}", {q.name for q in model.verified_queries})
        query = VerifiedQuery(name, row.question, sql)
        new = replace(model, verified_queries=(*model.verified_queries, query))
        drafts.append(Draft(replace(spec, semantic_model=new), "add_verified_query",
                            f"add verified query {name}: the SQL that solved training question {row.question_id}"))  # fmt: skip
    return drafts


def remove_verified_queries(spec: AgentSpec, history: Sequence[Observed]) -> list[Draft]:
    model = spec.semantic_model
    drafts = []
    for query in model.verified_queries:
        target = shape(query.sql)
        ran = [row for row in history if any(shape(s["sql"]) == target for s in checked_queries(row.trace))]
        failed = sum(not row.solved for row in ran)
        kept = tuple(q for q in model.verified_queries if q is not query)
        drafts.append((failed - (len(ran) - failed), query.name, Draft(
            replace(spec, semantic_model=replace(model, verified_queries=kept)), "remove_verified_query",
            f"remove verified query {query.name}: its shape ran in {failed} failed and {len(ran) - failed} solved "
            "training questions")))  # fmt: skip
    return [draft for _, _, draft in sorted(drafts, key=lambda d: (-d[0], d[1]))]


def move_tool_text(spec: AgentSpec) -> list[Draft]:
    drafts = []
    for i, tool in enumerate(spec.tools):
        documented = [p for p in tool.parameters if p.description.strip()]
        if documented:
            docs = "; ".join(f"{p.name}: {p.description.strip()}" for p in documented)
            moved = replace(tool, description=_join(tool.description, f"Parameters: {docs}"),
                            parameters=tuple(replace(p, description="") for p in tool.parameters))  # fmt: skip
            drafts.append(
                _with_tool(
                    spec, i, moved, f"tools[{i}] {tool.name}: move the parameter docs into the description"
                )
            )
        sentences = _sentences(tool.description)
        for parameter in tool.parameters:
            mentioning = [
                s for s in sentences if re.search(rf"(?<![\w']):?{re.escape(parameter.name)}(?![\w'])", s)
            ]
            if not mentioning or len(mentioning) == len(sentences):
                continue
            rest = " ".join(s for s in sentences if s not in mentioning)
            new_parameter = replace(parameter, description=_join(parameter.description, " ".join(mentioning)))
            moved = replace(tool, description=rest,
                            parameters=tuple(new_parameter if p is parameter else p for p in tool.parameters))  # fmt: skip
            drafts.append(_with_tool(spec, i, moved, f"tools[{i}] {tool.name}: move the description's sentences "
                                                     f"about {parameter.name} into its parameter doc"))  # fmt: skip
    return drafts


def reorder_instructions(spec: AgentSpec) -> list[Draft]:
    drafts = []
    instructions = spec.instructions
    for field in ("system", "orchestration", "response"):
        text = getattr(instructions, field)
        paragraphs = _paragraphs(text)
        if len(paragraphs) > 1:
            reordered = "\n\n".join([paragraphs[-1], *paragraphs[:-1]])
            drafts.append(_with_instructions(spec, replace(instructions, **{field: reordered}), "reorder_instructions",
                                             f"instructions.{field}: put the last paragraph first"))  # fmt: skip
        for k, paragraph in enumerate(paragraphs):
            sentences = _sentences(paragraph)
            if len(sentences) > 1 and not paragraph.lstrip().startswith("- "):
                split = [*paragraphs[:k], "\n".join(f"- {s}" for s in sentences), *paragraphs[k + 1 :]]
                drafts.append(_with_instructions(spec, replace(instructions, **{field: "\n\n".join(split)}),
                                                 "split_instructions",
                                                 f"instructions.{field}: split paragraph {k + 1} into one sentence "
                                                 "per line"))  # fmt: skip
    system = _paragraphs(instructions.system)
    if len(system) > 1:
        moved = replace(instructions, system="\n\n".join(system[:-1]),
                        orchestration="\n\n".join([*_paragraphs(instructions.orchestration), system[-1]]))  # fmt: skip
        drafts.append(_with_instructions(spec, moved, "reorder_instructions",
                                         "move the last paragraph of instructions.system to instructions.orchestration"))  # fmt: skip
    return drafts


def add_document_sections(
    spec: AgentSpec, history: Sequence[Observed], sections: Iterable[Section]
) -> list[Draft]:
    by_id = {section.section: section for section in sections}
    present = {d.name for d in spec.documents}
    readers: dict[str, list[str]] = {}
    for row in sorted(history, key=lambda r: r.question_id):
        if row.solved:
            for section in read_sections(row.trace):
                readers.setdefault(section, []).append(row.question_id)
    drafts = []
    for section_id, questions in sorted(readers.items(), key=lambda item: (-len(item[1]), item[0])):
        section = by_id.get(section_id)
        name = _free_name(re.sub(r"\W", "_", section_id), set())
        if (
            section is None
            or name in present
            or len(section.text) > MAX_TEXT_CHARS
            or len(spec.documents) >= MAX_ITEMS
        ):
            continue
        document = Document(name, section.text, f"{section.document}: {section.title}")
        read_by = ", ".join(questions[:5]) + (f" and {len(questions) - 5} more" if len(questions) > 5 else "")
        drafts.append(Draft(replace(spec, documents=(*spec.documents, document)), "add_document_section",
                            f"add document section {section_id} ({section.title}), read by solved training "
                            f"questions {read_by}"))  # fmt: skip
    return drafts


def shape(sql: str) -> str:
    """A query with its literals blanked, for comparing queries that differ only in their values."""
    try:
        tree = sqlglot.parse_one(sql, read=DEPLOY_DIALECT)
    except SqlglotError:
        return " ".join(sql.split())
    blanked = tree.transform(lambda n: exp.Placeholder() if isinstance(n, exp.Literal) else n)
    return blanked.sql(dialect=DEPLOY_DIALECT)


def _with_tool(spec: AgentSpec, index: int, tool: Any, description: str) -> Draft:
    tools = tuple(tool if i == index else t for i, t in enumerate(spec.tools))
    return Draft(replace(spec, tools=tools), "move_tool_text", description)


def _with_instructions(spec: AgentSpec, instructions: Instructions, operator: str, description: str) -> Draft:
    return Draft(replace(spec, instructions=instructions), operator, description)


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def _sentences(text: str) -> list[str]:
    flat = " ".join(line.strip().removeprefix("- ") for line in text.strip().splitlines())
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z(`'\"])", flat) if s]


def _join(first: str, second: str) -> str:
    return f"{first.strip()} {second.strip()}".strip()


def _free_name(base: str, taken: set[str]) -> str:
    name, n = base[:60], 2
    while name in taken:
        name, n = f"{base[:56]}_{n}", n + 1
    return name
