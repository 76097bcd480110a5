"""Check a project's YAML (dbt_project.yml, models/**/*.yml) against an allow-list, and read what it declares.

dbt's YAML is not inert: ``on-run-start`` hooks, ``pre_hook`` configs and test ``where`` clauses are SQL,
dbt-duckdb reads files for sources with an ``external_location``, ``materialized: external`` writes files,
``*-paths`` move where dbt reads, and Jinja in any value runs at parse time. So every key is on an allow-list,
checked path by path, and Jinja appears only as ``{{ doc('name') }}`` in a description. What passes is what a
data pipeline needs: model configs (materialized table / view / ephemeral, tags, enabled), sources and their
tables, descriptions, and dbt's four generic data tests (unique, not_null, accepted_values, relationships).

The runner never hands the author's dbt_project.yml to dbt: it writes `ProjectYaml.run_form`, made from the
checked values, with its own profile and paths.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from coco_sql import bounded
from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.project import PROJECT_FILE, DbtProject
from coco_sql.languages.dbt.render import CONFIG_KEYS, check_config
from coco_sql.languages.dbt.run_form import DBT_EXPRESSION, JINJA_DELIMITERS

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(:[A-Za-z_][A-Za-z0-9_]*)?")
_DOC_CALL = re.compile(r"""\{\{\s*doc\(\s*(['"])([A-Za-z_][A-Za-z0-9_]*)\1\s*\)\s*\}\}""")
_RELATION = re.compile(
    r"""\s*(?:ref\(\s*(['"])(?P<model>[A-Za-z_]\w*)\1\s*\)"""
    r"""|source\(\s*(['"])(?P<source>[A-Za-z_]\w*)\3\s*,\s*(['"])(?P<table>[A-Za-z_]\w*)\5\s*\))\s*"""
)
_DOCS_BLOCK = re.compile(r"\{%-?\s*docs\s+([A-Za-z_][A-Za-z0-9_]*)\s*-?%\}(.*?)\{%-?\s*enddocs\s*-?%\}", re.S)
GENERIC_TESTS = ("unique", "not_null", "accepted_values", "relationships")
_TEST_ARGUMENTS = {
    "unique": frozenset(),
    "not_null": frozenset(),
    "accepted_values": frozenset({"values", "quote"}),
    "relationships": frozenset({"to", "field"}),
}
_PROJECT_KEYS = frozenset(
    {"name", "version", "config-version", "profile", "require-dbt-version", "vars", "models", "clean-targets"}
)
# What real projects also write and a run never reads (the run form holds none of it: `run_form`): accepted and
# left out (source schemas and identifiers: the validator's own relations). Hooks stay refused: they run SQL.
IGNORED = {
    "project": frozenset({"seeds", "tests", "data_tests", "snapshots", "sources", "dispatch", "quoting", "flags",
                          "packages-install-path", "docs-paths", "asset-paths", "log-path", "query-comment",
                          "semantic-models", "metrics", "saved-queries", "exposures",
                          "unit_tests", "restrict-access", "source-paths", "data-paths", "docs"}),
    "file": frozenset({"seeds", "snapshots", "macros", "analyses", "exposures", "metrics", "semantic_models",
                       "saved_queries", "unit_tests", "groups"}),
    "model": frozenset({"versions", "meta", "constraints", "access", "group", "latest_version", "contract",
                        "deprecation_date", "time_spine"}),
    "column": frozenset({"meta", "constraints", "policy_tags", "granularity"}),
    "source": frozenset({"schema", "database", "loader", "loaded_at_field", "freshness", "meta", "quoting",
                         "overrides", "config"}),
    "table": frozenset({"identifier", "loaded_at_field", "freshness", "meta", "quoting", "external", "config"}),
}  # fmt: skip
_DEFAULT_PATHS = {
    "model-paths": ["models"],
    "macro-paths": ["macros"],
    "seed-paths": ["seeds"],
    "test-paths": ["tests"],
    "analysis-paths": ["analyses", "analysis"],
    "snapshot-paths": ["snapshots"],
    "target-path": "target",
}


@dataclass(frozen=True)
class ProjectYaml:
    """What the YAML declares: the project's name, vars, model configs, sources, and properties per model.

    `file_configs` are the ``config:`` of models in property files; `run_sources` and `run_models` what the run
    form's properties file keeps of them (`run_form.properties_file`: sources, and per model its columns' and
    its own generic tests, checked; no description, docs or tag)."""

    name: str
    variables: Mapping[str, Any] = field(hash=False)
    model_configs: Mapping[str, Any] = field(hash=False)  # the checked `models:` block of dbt_project.yml
    sources: frozenset[tuple[str, str]] = frozenset()
    documented_models: frozenset[str] = frozenset()
    relationship_targets: tuple[tuple[str, str], ...] = ()  # (file, "ref('x')" or "source('a', 'b')")
    file_configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    run_sources: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict, hash=False)
    run_models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)


def load_yaml(path: str, text: str) -> Any:
    """Parse one YAML file (safe loader, bounded in depth and size: `coco_sql.bounded`); a syntax error or a bound
    becomes one line naming the file (and the line)."""
    return bounded.load_yaml(path, text)


class _Checker:
    """Walks one file's document; `where` is the file, keys are reported as a dotted path."""

    def __init__(self, path: str, docs: frozenset[str]) -> None:
        self.path = path
        self.docs = docs

    def fail(self, at: str, message: str) -> CandidateRejected:
        return CandidateRejected(f"{self.path}: {at}: {message}" if at else f"{self.path}: {message}")

    def mapping(
        self, value: Any, at: str, allowed: frozenset[str] | set[str], required: tuple[str, ...] = (),
        ignored: frozenset[str] = frozenset(),
    ) -> dict:  # fmt: skip
        if not isinstance(value, dict):
            raise self.fail(at, f"expected a mapping, got {type(value).__name__}")
        for key in value:
            if key not in allowed and key not in ignored:
                raise self.fail(at, f"key {key!r} is not allowed here; allowed: {', '.join(sorted(allowed))}")
        for key in required:
            if key not in value:
                raise self.fail(at, f"key {key!r} is required")
        return value

    def items(self, value: Any, at: str) -> list:
        if not isinstance(value, list):
            raise self.fail(at, f"expected a list, got {type(value).__name__}")
        return value

    def identifier(self, value: Any, at: str) -> str:
        if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
            raise self.fail(at, f"{value!r} must be a plain identifier (letters, digits, _)")
        return value

    def text(self, value: Any, at: str, *, description: bool = False) -> None:
        """A string with no Jinja, except ``{{ doc('name') }}`` of a docs block in a description."""
        if value is None or isinstance(value, (bool, int, float)):
            return
        if not isinstance(value, str):
            raise self.fail(at, f"expected text, got {type(value).__name__}")
        rest = value
        if description:
            for match in _DOC_CALL.finditer(value):
                if match.group(2) not in self.docs:
                    raise self.fail(at, f"doc('{match.group(2)}') names no docs block in models/*.md")
            rest = _DOC_CALL.sub("", value)
        if any(token in rest for token in JINJA_DELIMITERS):
            raise self.fail(at, "Jinja is not allowed here (only {{ doc('name') }} in a description)")

    def config(self, value: Any, at: str) -> None:
        for key, item in self.mapping(value, at, set(value) if isinstance(value, dict) else set()).items():
            try:
                check_config(key, item)
            except CandidateRejected as error:
                raise self.fail(f"{at}.{key}", str(error)) from None


# --------------------------------------------------------------------------------------- dbt_project.yml


def check_project_file(text: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(name, vars, models block) of dbt_project.yml, after checking every key."""
    document = load_yaml(PROJECT_FILE, text)
    check = _Checker(PROJECT_FILE, frozenset())
    check.mapping(
        document, "", _PROJECT_KEYS | set(_DEFAULT_PATHS), required=("name",), ignored=IGNORED["project"]
    )
    name = check.identifier(document["name"], "name")
    if document.get("config-version", 2) != 2:
        raise check.fail("config-version", "only config-version 2 is supported")
    for key, default in _DEFAULT_PATHS.items():
        allowed = default if isinstance(default, list) else [default]
        value = document.get(key, allowed)
        values = value if isinstance(value, list) else [value]
        if not values or not set(map(str, values)) <= set(allowed):
            raise check.fail(key, f"must stay {default!r}: a program's files live in fixed folders")
    variables = document.get("vars") or {}
    check.mapping(variables, "vars", set(variables))
    for key, value in variables.items():
        if not isinstance(key, str) or not _VAR.fullmatch(key):
            raise check.fail(
                f"vars.{key}", f"{key!r} must be a name (letters, digits, _, and ':' for a package's)"
            )
        scalars = value if isinstance(value, list) else [value]
        if not all(v is None or isinstance(v, (str, int, float, bool)) for v in scalars):
            raise check.fail(f"vars.{key}", "a var is a scalar or a list of scalars")
        for item in scalars:
            check.text(item, f"vars.{key}")
    models = document.get("models") or {}
    check.mapping(models, "models", set(models))  # other keys: every project's configs (+x) or a package's
    for key, value in models.items():
        if isinstance(key, str) and key.startswith("+"):
            try:
                check_config(key[1:], value)
            except CandidateRejected as error:
                raise check.fail(f"models.{key}", str(error)) from None
    _check_model_configs(check, models.get(name) or {}, f"models.{name}")
    return name, variables, models


def _check_model_configs(check: _Checker, block: Any, at: str) -> None:
    """A folder tree of configs: ``+key`` (or a bare config key) is a config, any other key a sub-folder."""
    if not isinstance(block, dict):
        raise check.fail(at, f"expected a mapping, got {type(block).__name__}")
    for key, value in block.items():
        if not isinstance(key, str):
            raise check.fail(at, f"key {key!r} must be text")
        bare = key.removeprefix("+")
        if key.startswith("+") or bare in CONFIG_KEYS:
            try:
                check_config(bare, value)
            except CandidateRejected as error:
                raise check.fail(f"{at}.{key}", str(error)) from None
        else:
            check.identifier(key, f"{at}.{key}")
            _check_model_configs(check, value, f"{at}.{key}")


# ---------------------------------------------------------------------------------------- property files


def docs_blocks(project: DbtProject) -> frozenset[str]:
    """Names of the docs blocks in models/**/*.md; anything but docs blocks and plain text is refused."""
    names: set[str] = set()
    for path in project.paths("models/", ".md"):
        text = project.files[path]
        for match in _DOCS_BLOCK.finditer(text):
            names.add(match.group(1))
            if any(token in match.group(2) for token in JINJA_DELIMITERS):
                raise CandidateRejected(f"{path}: docs block {match.group(1)!r} may hold plain text only")
        if any(token in _DOCS_BLOCK.sub("", text) for token in JINJA_DELIMITERS):
            raise CandidateRejected(
                f"{path}: a .md file holds {{% docs name %}} ... {{% enddocs %}} blocks only"
            )
    return frozenset(names)


def check_properties(path: str, text: str, models: frozenset[str], docs: frozenset[str]) -> _Properties:
    """One models/**/*.yml file: its sources, the models it documents, and its relationship targets."""
    document = load_yaml(path, text)
    found = _Properties()
    if document is None:
        return found
    check = _Checker(path, docs)
    check.mapping(document, "", {"version", "models", "sources"}, ignored=IGNORED["file"])
    if document.get("version", 2) != 2:
        raise check.fail("version", "only version 2 property files are supported")
    for index, model in enumerate(check.items(document.get("models") or [], "models")):
        at = f"models[{index}]"
        check.mapping(
            model,
            at,
            {"name", "description", "config", "columns", "tests", "data_tests", "docs", "tags"},
            ("name",),
            IGNORED["model"],
        )
        name = check.identifier(model["name"], f"{at}.name")
        if name not in models:  # a seed's or a disabled model's properties (dbt warns): nothing to run
            continue
        if name in found.models:
            raise check.fail(f"{at}.name", f"model {name!r} is described twice")
        found.models.add(name)
        check.text(model.get("description"), f"{at}.description", description=True)
        check.config(model.get("config") or {}, f"{at}.config")
        found.configs[name] = dict(model.get("config") or {})
        _check_tags_docs(check, model, at)
        found.run_models[name] = _run_entry(
            name,
            _check_tests(check, model, at, found),
            _check_columns(check, model.get("columns") or [], at, found),
        )
    for index, source in enumerate(check.items(document.get("sources") or [], "sources")):
        at = f"sources[{index}]"
        check.mapping(
            source, at, {"name", "description", "tables", "tags"}, ("name", "tables"), IGNORED["source"]
        )
        source_name = check.identifier(source["name"], f"{at}.name")
        check.text(source.get("description"), f"{at}.description", description=True)
        for number, table in enumerate(check.items(source["tables"], f"{at}.tables")):
            where = f"{at}.tables[{number}]"
            check.mapping(
                table, where, {"name", "description", "columns", "tests", "data_tests", "tags"}, ("name",),
                IGNORED["table"],
            )  # fmt: skip
            table_name = check.identifier(table["name"], f"{where}.name")
            found.sources.add((source_name, table_name))
            check.text(table.get("description"), f"{where}.description", description=True)
            _check_tags_docs(check, table, where)
            tests = _check_tests(check, table, where, found)
            columns = _check_columns(check, table.get("columns") or [], where, found)
            found.run_sources.setdefault(source_name, []).append(_run_entry(table_name, tests, columns))
        _check_tags_docs(check, source, at)
    return found


def _run_entry(name: str, tests: list[Any], columns: list[dict[str, Any]]) -> dict[str, Any]:
    """A model's or a source table's entry in the run form's properties file: only what a run reads."""
    entry: dict[str, Any] = {"name": name}
    if columns:
        entry["columns"] = columns
    if tests:
        entry["data_tests"] = tests
    return entry


@dataclass
class _Properties:
    sources: set[tuple[str, str]] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    relationships: list[str] = field(default_factory=list)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    run_models: dict[str, dict[str, Any]] = field(default_factory=dict)


def _check_tags_docs(check: _Checker, entry: dict, at: str) -> None:
    tags = entry.get("tags")
    if tags is not None:
        for tag in [tags] if isinstance(tags, str) else check.items(tags, f"{at}.tags"):
            if not isinstance(tag, str):
                raise check.fail(f"{at}.tags", "tags are strings")
            check.text(tag, f"{at}.tags")
    if "docs" in entry:
        docs = check.mapping(entry["docs"], f"{at}.docs", {"show"})
        if "show" in docs and not isinstance(docs["show"], bool):
            raise check.fail(f"{at}.docs.show", "show is true or false")


def _check_columns(check: _Checker, columns: Any, at: str, found: _Properties) -> list[dict[str, Any]]:
    """Check a columns list; the run form's entries of the columns that have tests (name, quote, data_tests)."""
    kept: list[dict[str, Any]] = []
    for index, column in enumerate(check.items(columns, f"{at}.columns")):
        where = f"{at}.columns[{index}]"
        check.mapping(
            column,
            where,
            {"name", "description", "data_type", "tests", "data_tests", "quote", "tags"},
            ("name",),
            IGNORED["column"],
        )
        check.identifier(column["name"], f"{where}.name")
        check.text(column.get("description"), f"{where}.description", description=True)
        check.text(column.get("data_type"), f"{where}.data_type")
        if "quote" in column and not isinstance(column["quote"], bool):
            raise check.fail(f"{where}.quote", "quote is true or false")
        _check_tags_docs(check, column, where)
        tests = _check_tests(check, column, where, found)
        if tests:
            quote = {"quote": column["quote"]} if "quote" in column else {}
            kept.append({"name": column["name"], **quote, "data_tests": tests})
    return kept


def _check_tests(check: _Checker, entry: dict, at: str, found: _Properties) -> list[Any]:
    """Check an entry's tests (``tests`` and ``data_tests``); each as the run form writes it: a name, or
    ``{name: {arguments: {...}, config: {severity}}}``."""
    kept: list[Any] = []
    for key in ("tests", "data_tests"):
        for index, test in enumerate(check.items(entry.get(key) or [], f"{at}.{key}")):
            where = f"{at}.{key}[{index}]"
            if isinstance(test, str):
                name, body = test, {}
            elif isinstance(test, dict) and len(test) == 1:
                name, body = next(iter(test.items()))
                body = body or {}
            else:
                raise check.fail(where, "a test is a name or a one-key mapping {name: {arguments}}")
            config = body.get("config") if isinstance(body, dict) else None
            if name not in GENERIC_TESTS or (isinstance(config, dict) and set(config) - {"severity"}):
                continue  # a package's or the project's own test, or one with a where/limit: not run, not scored
            kept.append(_check_test_body(check, name, body, where, found))
    return kept


def _check_test_body(check: _Checker, name: str, body: Any, at: str, found: _Properties) -> Any:
    arguments_allowed = _TEST_ARGUMENTS[name]
    check.mapping(body, at, arguments_allowed | {"arguments", "config"})
    arguments = dict(body.get("arguments") or {})
    check.mapping(arguments, f"{at}.arguments", arguments_allowed)
    arguments.update({k: v for k, v in body.items() if k in arguments_allowed})
    if "config" in body:
        config = check.mapping(body["config"], f"{at}.config", {"severity"})
        if str(config.get("severity", "error")).lower() not in ("error", "warn"):
            raise check.fail(f"{at}.config.severity", "severity is error or warn")
    if name == "accepted_values":
        _check_accepted_values(check, arguments, at)
    if name == "relationships":
        target = arguments.get("to")
        if not isinstance(target, str) or not _RELATION.fullmatch(target):
            raise check.fail(f"{at}.to", "to is ref('model') or source('source', 'table')")
        check.identifier(arguments.get("field"), f"{at}.field")
        found.relationships.append(target.strip())
        arguments["to"] = target.strip()
    written: dict[str, Any] = {}
    if arguments:
        written["arguments"] = arguments
    if "config" in body:
        written["config"] = {"severity": str(body["config"].get("severity", "error")).lower()}
    return {name: written} if written else name


def _check_accepted_values(check: _Checker, arguments: dict[str, Any], at: str) -> None:
    """dbt pastes each value into the test's SQL (``'value'``, or bare with ``quote: false``), unescaped: a value
    that would change that SQL is refused, so the test that runs is the test that was declared."""
    values = check.items(arguments.get("values"), f"{at}.values")
    quote = arguments.get("quote", True)
    if not isinstance(quote, bool):
        raise check.fail(f"{at}.quote", "quote is true or false")
    for value in values:
        if not (value is None or isinstance(value, (str, int, float, bool))):
            raise check.fail(f"{at}.values", "accepted values are scalars")
        check.text(value, f"{at}.values")
        if isinstance(value, str) and ("'" in value or "\\" in value):
            raise check.fail(
                f"{at}.values", f"{value!r}: an accepted value may not hold a quote or a backslash"
            )
        if isinstance(value, str) and DBT_EXPRESSION.match(value):
            called = value.split("(")[0].strip()
            raise check.fail(
                f"{at}.values", f"{value!r}: dbt would run this value as Jinja (a call of {called})"
            )
        if not quote and not (isinstance(value, (int, float)) or value is None):
            raise check.fail(f"{at}.values", f"{value!r}: with quote: false, accepted values are numbers")


def _without(entry: Mapping[str, Any], targets: set[str]) -> dict[str, Any]:
    """A run-form entry without its relationships tests to `targets`."""

    def keep(test: Any) -> bool:
        body = test.get("relationships") if isinstance(test, dict) else None
        return not (isinstance(body, dict) and (body.get("arguments") or {}).get("to") in targets)

    kept = dict(entry)
    if "data_tests" in kept:
        kept["data_tests"] = [t for t in kept["data_tests"] if keep(t)]
    if "columns" in kept:
        kept["columns"] = [
            {**c, "data_tests": [t for t in c["data_tests"] if keep(t)]} for c in kept["columns"]
        ]
    return kept


def check_yaml(project: DbtProject) -> ProjectYaml:
    """Check dbt_project.yml and every models/**/*.yml; what they declare, or `CandidateRejected` on the first
    problem, naming the file and the key."""
    name, variables, models_block = check_project_file(project.files[PROJECT_FILE])
    models = frozenset(project.models())
    docs = docs_blocks(project)
    sources: set[tuple[str, str]] = set()
    documented: set[str] = set()
    targets: list[tuple[str, str]] = []
    found = _Properties()
    for path in project.paths("models/", ".yml"):
        properties = check_properties(path, project.files[path], models, docs)
        duplicate = sources & properties.sources
        if duplicate:
            source, table = sorted(duplicate)[0]
            raise CandidateRejected(f"{path}: source table {source}.{table} is declared twice")
        twice = documented & properties.models
        if twice:
            raise CandidateRejected(f"{path}: model {sorted(twice)[0]!r} is described in two property files")
        sources |= properties.sources
        documented |= properties.models
        targets.extend((path, target) for target in properties.relationships)
        found.configs.update(properties.configs)
        found.run_models.update(properties.run_models)
        for source, tables in properties.run_sources.items():
            found.run_sources.setdefault(source, []).extend(tables)
    dropped = set()
    for path, target in targets:
        match = _RELATION.fullmatch(target)
        assert match is not None  # checked above
        if match.group("model") and match.group("model") not in models:
            dropped.add(target)  # to a seed (or a model not in the program): not run
        if match.group("source") and (match.group("source"), match.group("table")) not in sources:
            raise CandidateRejected(f"{path}: relationships test to {target} names an undeclared source")
    if dropped:
        found.run_models.update({m: _without(e, dropped) for m, e in found.run_models.items()})
    return ProjectYaml(
        name=name,
        variables=MappingProxyType(dict(variables)),
        model_configs=MappingProxyType(dict(models_block)),
        sources=frozenset(sources),
        documented_models=frozenset(documented),
        relationship_targets=tuple(targets),
        file_configs=MappingProxyType(found.configs),
        run_sources=MappingProxyType({s: tuple(t) for s, t in found.run_sources.items()}),
        run_models=MappingProxyType(found.run_models),
    )
