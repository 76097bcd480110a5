"""An agent specification: the program of the data-agent kind, as frozen dataclasses and a stable YAML text form.

The text form is Snowflake's agent specification (the YAML of ``CREATE AGENT ... FROM SPECIFICATION $$ ... $$``)
with two sections of ours, so that exporting it is a translation and not a rewrite. The Snowflake fields, as the
CREATE AGENT page documents them (docs.snowflake.com/en/sql-reference/sql/create-agent; the same fields in the
Cortex Agents REST API, docs.snowflake.com/en/user-guide/snowflake-cortex/cortex-agents-rest-api):

- ``models: {orchestration: <model>}``: the orchestration model (optional; Snowflake picks one when absent);
- ``orchestration: {budget: {seconds, tokens}}``: the run's budget;
- ``instructions: {response, orchestration, system, sample_questions: [{question, answer}]}``;
- ``tools: [{tool_spec: {type, name, description, input_schema}}]``, where ``input_schema`` is a JSON Schema object
  (``type: object``, ``properties``, ``required``);
- ``tool_resources: {<tool name>: {...}}``, one entry per tool, keyed by the tool's name.

Every tool here is a custom tool (``type: generic``; "custom tools built from stored procedures and user-defined
functions", docs "Cortex Agents"). Its ``tool_resources`` entry holds Snowflake's ``type`` (procedure or function)
and one key of ours that says what the procedure runs: ``sql`` (a read-only query whose ``:name`` placeholders are
the tool's parameters) or ``tables`` (a free SQL tool: the model writes the query, which may read only these
tables). The export (`export.py`) turns that key into the procedure and writes Snowflake's ``identifier`` and
``execution_environment`` in its place.

Our sections:

- ``semantic_model``: tables with descriptions and columns, ``relationships`` (joins) and ``verified_queries``
  (question + SQL), the fields of a Cortex Analyst semantic model (docs "Cortex Analyst Verified Query
  Repository"); exported as ``CREATE SEMANTIC VIEW`` plus a Cortex Analyst tool over it;
- ``documents``: named texts the agent always has in its context (e.g. a section of a business-rule manual);
  exported into the agent's system instructions.

`parse` reads YAML or JSON (JSON is YAML) and refuses, with one line naming the place in the document
(``tools[2].tool_spec.name: ...``), anything malformed, unknown or over a size limit; `dump` writes the canonical
text (fixed key order, block scalars for multi-line text), so ``parse(dump(spec)) == spec``. Structure only: names,
tables and SQL are checked against a task by `validate.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml

from coco_sql import bounded
from coco_sql.errors import CandidateRejected

MAX_SPEC_BYTES = 100_000  # Snowflake's limit for the specification object (CREATE AGENT)
MAX_TEXT_CHARS = 20_000  # one instruction, document or SQL text
MAX_DESCRIPTION_CHARS = 4_000
MAX_NAME_CHARS = 64
MAX_ITEMS = 64  # tools, parameters, tables, columns per table, relationships, verified queries, documents
PARAMETER_TYPES = ("string", "number", "integer", "boolean")
RESOURCE_TYPES = ("procedure", "function")
FREE_SQL_PARAMETER = "sql"  # the one parameter of a free SQL tool: the query the model writes

T = TypeVar("T")


@dataclass(frozen=True)
class SampleQuestion:
    question: str
    answer: str = ""


@dataclass(frozen=True)
class Instructions:
    system: str = ""
    orchestration: str = ""
    response: str = ""
    sample_questions: tuple[SampleQuestion, ...] = ()


@dataclass(frozen=True)
class Parameter:
    """One property of a tool's input_schema."""

    name: str
    type: str
    description: str = ""
    required: bool = True


@dataclass(frozen=True)
class Tool:
    """A custom tool: a parameterised read-only query (`sql`) or a free SQL tool over `tables`."""

    name: str
    description: str
    parameters: tuple[Parameter, ...]
    sql: str | None = None
    tables: tuple[str, ...] = ()
    resource_type: str = "procedure"

    @property
    def free(self) -> bool:
        return self.sql is None


@dataclass(frozen=True)
class Column:
    name: str
    description: str = ""


@dataclass(frozen=True)
class Table:
    name: str
    description: str = ""
    columns: tuple[Column, ...] = ()


@dataclass(frozen=True)
class Relationship:
    """A join: `left_table(left_columns)` references `right_table(right_columns)` (a semantic view's RELATIONSHIPS)."""

    name: str
    left_table: str
    left_columns: tuple[str, ...]
    right_table: str
    right_columns: tuple[str, ...]


@dataclass(frozen=True)
class VerifiedQuery:
    name: str
    question: str
    sql: str


@dataclass(frozen=True)
class SemanticModel:
    name: str = ""
    description: str = ""
    tables: tuple[Table, ...] = ()
    relationships: tuple[Relationship, ...] = ()
    verified_queries: tuple[VerifiedQuery, ...] = ()


@dataclass(frozen=True)
class Document:
    name: str
    text: str
    description: str = ""


@dataclass(frozen=True)
class AgentSpec:
    instructions: Instructions = field(default_factory=Instructions)
    tools: tuple[Tool, ...] = ()
    semantic_model: SemanticModel = field(default_factory=SemanticModel)
    documents: tuple[Document, ...] = ()
    model: str | None = None  # models.orchestration
    budget_seconds: int | None = None  # orchestration.budget.seconds
    budget_tokens: int | None = None  # orchestration.budget.tokens


def reject(path: str, problem: str) -> CandidateRejected:
    """The one-line error every check raises: where in the document, then what is wrong."""
    return CandidateRejected(" ".join(f"agent spec {path}: {problem}".split())[:400])


# ------------------------------------------------------------------------------------------------- parsing


class _Loader(bounded.yaml_loader()):  # type: ignore[misc]
    """YAML without aliases, duplicate keys or more than 64 levels (`coco_sql.bounded`; a SafeLoader)."""

    where, allow_aliases = "text", False

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[object] = set()
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            if key.value in seen:
                raise reject(f"line {key.start_mark.line + 1}", f"key {key.value!r} appears twice")
            seen.add(key.value)
        return super().construct_mapping(node, deep)


def parse(text: str) -> AgentSpec:
    """The spec written in `text` (YAML or JSON), or CandidateRejected naming the first problem."""
    if len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise reject("text", f"{len(text.encode('utf-8')):,} bytes, over the limit of {MAX_SPEC_BYTES:,}")
    try:
        document = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "text"
        raise reject(where, f"not valid YAML or JSON ({error.problem or error})") from None
    except yaml.YAMLError as error:
        raise reject("text", f"not valid YAML or JSON ({error})") from None
    except CandidateRejected as error:  # a bound (depth, size) or an alias: "text: ..." / "text line N: ..."
        message = str(error)
        if message.startswith("agent spec "):  # a duplicate key (`_Loader`)
            raise
        message = message.removeprefix("text ") if message.startswith("text line") else message
        raise CandidateRejected(f"agent spec {message}"[:400]) from None
    return from_document(document)


def from_document(document: object) -> AgentSpec:
    """The spec in an already-parsed document (a dict from YAML or JSON)."""
    top = _mapping(
        document,
        "document",
        ("models", "orchestration", "instructions", "tools", "tool_resources", "semantic_model", "documents"),
    )
    models = _mapping(top.get("models", {}), "models", ("orchestration",))
    orchestration = _mapping(top.get("orchestration", {}), "orchestration", ("budget",))
    budget = _mapping(orchestration.get("budget", {}), "orchestration.budget", ("seconds", "tokens"))
    tools = _tools(top.get("tools", []), top.get("tool_resources", {}))
    return AgentSpec(
        instructions=_instructions(top.get("instructions", {})),
        tools=tools,
        semantic_model=_semantic_model(top.get("semantic_model", {})),
        documents=_items(top.get("documents", []), "documents", _document),
        model=_optional_name(models.get("orchestration"), "models.orchestration"),
        budget_seconds=_optional_int(budget.get("seconds"), "orchestration.budget.seconds", 1, 3600),
        budget_tokens=_optional_int(budget.get("tokens"), "orchestration.budget.tokens", 1, 10_000_000),
    )


def _mapping(value: object, path: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise reject(path, f"expected a mapping with keys {', '.join(allowed)}, got {_kind(value)}")
    for key in value:
        if key not in allowed:
            raise reject(f"{path}.{key}", f"unknown key; allowed here: {', '.join(allowed)}")
    for key in required:
        if value.get(key) is None:
            raise reject(f"{path}.{key}", "is required")
    return value


def _items(value: object, path: str, one: Callable[[object, str], T]) -> tuple[T, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise reject(path, f"expected a list, got {_kind(value)}")
    if len(value) > MAX_ITEMS:
        raise reject(path, f"{len(value)} items, over the limit of {MAX_ITEMS}")
    return tuple(one(item, f"{path}[{i}]") for i, item in enumerate(value))


def _text(value: object, path: str, limit: int = MAX_TEXT_CHARS, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise reject(path, f"expected text, got {_kind(value)}")
    text = str(value)
    if required and not text.strip():
        raise reject(path, "must not be empty")
    if len(text) > limit:
        raise reject(path, f"{len(text):,} characters, over the limit of {limit:,}")
    return text


def _name(value: object, path: str) -> str:
    name = _text(value, path, MAX_NAME_CHARS, required=True)
    if not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c == "_" for c in name):
        raise reject(path, f"{name!r} is not a name (letters, digits and _, starting with a letter or _)")
    return name


def _optional_name(value: object, path: str) -> str | None:
    return None if value is None else _text(value, path, 200, required=True)


def _optional_int(value: object, path: str, low: int, high: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise reject(path, f"expected a whole number from {low} to {high:,}, got {value!r}")
    return value


def _names(value: object, path: str) -> tuple[str, ...]:
    names = _items(value, path, _name)
    if not names:
        raise reject(path, "must name at least one")
    return names


def _kind(value: object) -> str:
    return {dict: "a mapping", list: "a list", str: "text", bool: "a boolean", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _instructions(value: object) -> Instructions:
    found = _mapping(value, "instructions", ("response", "orchestration", "system", "sample_questions"))

    def sample(item: object, path: str) -> SampleQuestion:
        entry = _mapping(item, path, ("question", "answer"), ("question",))
        return SampleQuestion(_text(entry["question"], f"{path}.question", required=True),
                              _text(entry.get("answer"), f"{path}.answer"))  # fmt: skip

    return Instructions(
        system=_text(found.get("system"), "instructions.system"),
        orchestration=_text(found.get("orchestration"), "instructions.orchestration"),
        response=_text(found.get("response"), "instructions.response"),
        sample_questions=_items(found.get("sample_questions", []), "instructions.sample_questions", sample),
    )


def _tools(value: object, resources: object) -> tuple[Tool, ...]:
    specs = _items(value, "tools", lambda item, path: _mapping(item, path, ("tool_spec",), ("tool_spec",)))
    found = _mapping(resources, "tool_resources", tuple(str(k) for k in (resources or {})))
    tools = []
    for i, entry in enumerate(specs):
        path = f"tools[{i}].tool_spec"
        spec = _mapping(entry["tool_spec"], path, ("type", "name", "description", "input_schema"),
                        ("type", "name", "input_schema"))  # fmt: skip
        name = _name(spec["name"], f"{path}.name")
        if spec["type"] != "generic":
            raise reject(f"{path}.type", f"{spec['type']!r}: only custom tools (type: generic) are supported")
        if name not in found:
            raise reject(
                f"tool_resources.{name}", "is missing: every tool needs its resources (type, sql or tables)"
            )
        resource = _mapping(found[name], f"tool_resources.{name}", ("type", "sql", "tables"), ("type",))
        if resource["type"] not in RESOURCE_TYPES:
            raise reject(f"tool_resources.{name}.type", f"must be one of {', '.join(RESOURCE_TYPES)}")
        if ("sql" in resource) == ("tables" in resource):
            raise reject(f"tool_resources.{name}", "needs exactly one of sql (a query) or tables (free SQL)")
        tools.append(Tool(
            name=name,
            description=_text(spec.get("description"), f"{path}.description", MAX_DESCRIPTION_CHARS),
            parameters=_parameters(spec["input_schema"], f"{path}.input_schema"),
            sql=_text(resource["sql"], f"tool_resources.{name}.sql", required=True) if "sql" in resource else None,
            tables=_names(resource["tables"], f"tool_resources.{name}.tables") if "tables" in resource else (),
            resource_type=resource["type"],
        ))  # fmt: skip
    extra = sorted(set(found) - {tool.name for tool in tools})
    if extra:
        raise reject(f"tool_resources.{extra[0]}", "names no tool in tools (keys must match the tool names)")
    return tuple(tools)


def _parameters(value: object, path: str) -> tuple[Parameter, ...]:
    schema = _mapping(value, path, ("type", "properties", "required"), ("type",))
    if schema["type"] != "object":
        raise reject(f"{path}.type", "must be object")
    properties = _mapping(schema.get("properties", {}), f"{path}.properties",
                          tuple(str(k) for k in (schema.get("properties") or {})))  # fmt: skip
    if len(properties) > MAX_ITEMS:
        raise reject(f"{path}.properties", f"{len(properties)} parameters, over the limit of {MAX_ITEMS}")
    required = _items(schema.get("required", []), f"{path}.required", _name)
    unknown = [name for name in required if name not in properties]
    if unknown:
        raise reject(f"{path}.required", f"{unknown[0]!r} is not one of the properties")
    parameters = []
    for key, item in properties.items():
        where = f"{path}.properties.{key}"
        entry = _mapping(item, where, ("type", "description"), ("type",))
        if entry["type"] not in PARAMETER_TYPES:
            raise reject(f"{where}.type", f"must be one of {', '.join(PARAMETER_TYPES)}")
        parameters.append(Parameter(_name(key, where), entry["type"],
                                    _text(entry.get("description"), f"{where}.description", MAX_DESCRIPTION_CHARS),
                                    key in required))  # fmt: skip
    return tuple(parameters)


def _semantic_model(value: object) -> SemanticModel:
    path = "semantic_model"
    found = _mapping(value, path, ("name", "description", "tables", "relationships", "verified_queries"))

    def column(item: object, where: str) -> Column:
        entry = _mapping(item, where, ("name", "description"), ("name",))
        return Column(_name(entry["name"], f"{where}.name"),
                      _text(entry.get("description"), f"{where}.description", MAX_DESCRIPTION_CHARS))  # fmt: skip

    def table(item: object, where: str) -> Table:
        entry = _mapping(item, where, ("name", "description", "columns"), ("name",))
        return Table(_name(entry["name"], f"{where}.name"),
                     _text(entry.get("description"), f"{where}.description", MAX_DESCRIPTION_CHARS),
                     _items(entry.get("columns", []), f"{where}.columns", column))  # fmt: skip

    def relationship(item: object, where: str) -> Relationship:
        keys = ("name", "left_table", "left_columns", "right_table", "right_columns")
        entry = _mapping(item, where, keys, keys)
        return Relationship(_name(entry["name"], f"{where}.name"),
                            _name(entry["left_table"], f"{where}.left_table"),
                            _names(entry["left_columns"], f"{where}.left_columns"),
                            _name(entry["right_table"], f"{where}.right_table"),
                            _names(entry["right_columns"], f"{where}.right_columns"))  # fmt: skip

    def verified(item: object, where: str) -> VerifiedQuery:
        entry = _mapping(item, where, ("name", "question", "sql"), ("name", "question", "sql"))
        return VerifiedQuery(_name(entry["name"], f"{where}.name"),
                             _text(entry["question"], f"{where}.question", MAX_DESCRIPTION_CHARS, required=True),
                             _text(entry["sql"], f"{where}.sql", required=True))  # fmt: skip

    return SemanticModel(
        name=_text(found.get("name"), f"{path}.name", MAX_NAME_CHARS),
        description=_text(found.get("description"), f"{path}.description", MAX_DESCRIPTION_CHARS),
        tables=_items(found.get("tables", []), f"{path}.tables", table),
        relationships=_items(found.get("relationships", []), f"{path}.relationships", relationship),
        verified_queries=_items(found.get("verified_queries", []), f"{path}.verified_queries", verified),
    )


def _document(item: object, path: str) -> Document:
    entry = _mapping(item, path, ("name", "description", "text"), ("name", "text"))
    return Document(_name(entry["name"], f"{path}.name"), _text(entry["text"], f"{path}.text", required=True),
                    _text(entry.get("description"), f"{path}.description", MAX_DESCRIPTION_CHARS))  # fmt: skip


# ---------------------------------------------------------------------------------------------- writing


def to_document(spec: AgentSpec) -> dict[str, Any]:
    """The spec as the document `parse` reads, in the canonical key order; empty optional fields left out."""
    document: dict[str, Any] = {}
    if spec.model:
        document["models"] = {"orchestration": spec.model}
    budget = _pruned({"seconds": spec.budget_seconds, "tokens": spec.budget_tokens})
    if budget:
        document["orchestration"] = {"budget": budget}
    i = spec.instructions
    instructions = _pruned({
        "system": i.system, "orchestration": i.orchestration, "response": i.response,
        "sample_questions": [_pruned({"question": s.question, "answer": s.answer}) for s in i.sample_questions],
    })  # fmt: skip
    if instructions:
        document["instructions"] = instructions
    if spec.tools:
        document["tools"] = [{"tool_spec": tool_spec(tool)} for tool in spec.tools]
        document["tool_resources"] = {tool.name: _resource(tool) for tool in spec.tools}
    m = spec.semantic_model
    model = _pruned({
        "name": m.name, "description": m.description,
        "tables": [_pruned({"name": t.name, "description": t.description,
                            "columns": [_pruned({"name": c.name, "description": c.description}) for c in t.columns]})
                   for t in m.tables],
        "relationships": [{"name": r.name, "left_table": r.left_table, "left_columns": list(r.left_columns),
                           "right_table": r.right_table, "right_columns": list(r.right_columns)}
                          for r in m.relationships],
        "verified_queries": [{"name": q.name, "question": q.question, "sql": q.sql} for q in m.verified_queries],
    })  # fmt: skip
    if model:
        document["semantic_model"] = model
    if spec.documents:
        document["documents"] = [_pruned({"name": d.name, "description": d.description, "text": d.text})
                                 for d in spec.documents]  # fmt: skip
    return document


def tool_spec(tool: Tool) -> dict[str, Any]:
    """The tool's ``tool_spec`` as Snowflake documents it (type, name, description, input_schema)."""
    properties = {p.name: _pruned({"type": p.type, "description": p.description}) for p in tool.parameters}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [p.name for p in tool.parameters if p.required]
    if required:
        schema["required"] = required
    return _pruned(
        {"type": "generic", "name": tool.name, "description": tool.description, "input_schema": schema}
    )


def _resource(tool: Tool) -> dict[str, Any]:
    if tool.free:
        return {"type": tool.resource_type, "tables": list(tool.tables)}
    return {"type": tool.resource_type, "sql": tool.sql}


def _pruned(entries: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entries.items() if value not in (None, "", [], {})}


class _Dumper(yaml.SafeDumper):
    """Block scalars (``|``) for multi-line text, so a spec diffs line by line."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_text)


def dump(spec: AgentSpec) -> str:
    """The canonical YAML text of `spec` (``parse(dump(spec)) == spec``)."""
    return dump_yaml(to_document(spec))


def dump_yaml(document: object) -> str:
    """YAML in our canonical style: keys in the given order, block scalars for multi-line text."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def dump_json(spec: AgentSpec) -> str:
    """The same document as JSON (Snowflake's CREATE AGENT accepts either)."""
    return json.dumps(to_document(spec), indent=2, ensure_ascii=False)
