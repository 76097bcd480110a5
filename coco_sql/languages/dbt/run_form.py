"""What dbt reads of a candidate (the run form), written from checked values only, and the audit that proves it
holds no Jinja the validator did not write.

The rule (issue 37): **dbt never renders a character that the validator did not render.** dbt renders every model
file, and every YAML value that holds ``{{``, ``{%`` or ``{#``, with its whole context (``run_query``,
``env_var``, ``graph``, ``modules``, ``exceptions``...). So the run form carries no text of the candidate that
dbt could read as Jinja:

- **models** (``models/**/<name>.sql``): the model's checked DuckDB SQL as sqlglot wrote it (comments dropped),
  each relation the validator resolved written as our own ``{{ ref('m') }}`` / ``{{ source('s', 't') }}`` (names
  are checked identifiers), and every ``{`` and carriage return of the rest written as a Jinja expression that
  prints it (`inert`). dbt's rendering therefore gives back the checked text character for character, with only
  the relation names substituted: a string literal ``'{"a": 1}'`` or ``'{{ x }}'`` stays that literal, and
  nothing of it runs. (Why not the other two designs of the issue: escaping only the delimiters dbt would see
  leaves the run form's correctness to our reading of Jinja's lexer, and refusing every brace refuses honest
  literals. Writing ``{`` as an expression is both total and exact; ``audit`` checks it.)
- **one properties file** (`PROPERTIES`): the declared sources, each model's effective config (materialized,
  enabled, as the validator resolved them) and its generic data tests with their checked arguments, as plain
  YAML. No string in it holds a Jinja delimiter; dbt leaves such a string as it is (it renders only strings
  that hold one), with one exception: a test argument that reads like a call of ``env_var``, ``ref``, ``var``,
  ``source`` or ``doc`` (`DBT_EXPRESSION`) is wrapped in ``{{ }}`` and rendered. So the only such strings are a
  relationships test's ``to``, exactly ``ref('model')`` or ``source('source', 'table')`` (`RELATION_ARGUMENT`).
- **dbt_project.yml**: the project's name, our profile, the default paths. Nothing of the author's file.
- nothing else: no macros (the validator expanded them), no docs, descriptions, tags or vars (they do not change
  a run), and no file type the validator does not know.

`audit(files)` checks a run form against that before dbt sees it: in the validator (`ValidatedProject.run_files`)
and again in the dbt session that runs it (`runner.DbtSession.run_files`), so the property holds even for a run
form that did not come from the validator. A ``.sql`` file may hold only the four Jinja tags this module writes,
and between them no ``{`` and no carriage return; a YAML file may hold no Jinja delimiter in any key or value
after parsing (YAML escapes such as ``"\\x7b\\x7b"`` are decoded first); any other file none at all. A new file
type gets its checker in `AUDITS` (and `tests/test_dbt_differential.py` runs every checker on a hostile corpus).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from coco_sql.bounded import load_yaml
from coco_sql.errors import CandidateRejected

PROJECT_FILE = "dbt_project.yml"
PROPERTIES = "models/_coco_properties.yml"
JINJA_DELIMITERS = ("{{", "{%", "{#")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
OPEN_BRACE = "{{ '{' }}"  # renders as "{"
CARRIAGE_RETURN = "{{ '\\r' }}"  # renders as "\r" (a CR in template data would be turned into "\n")
# a test argument dbt renders as Jinja although it holds no delimiter (dbt.clients.jinja.add_rendered_test_kwargs
# wraps it in {{ }}): the run form may hold one only as a relation, `RELATION_ARGUMENT`
DBT_EXPRESSION = re.compile(r"^\s*(env_var|ref|var|source|doc)\s*\(.+\)\s*$")
RELATION_ARGUMENT = re.compile(rf"ref\('{_IDENT}'\)|source\('{_IDENT}', '{_IDENT}'\)")
_TAG = re.compile(rf"\{{\{{ (?:ref\('{_IDENT}'\)|source\('{_IDENT}', '{_IDENT}'\)|'\{{'|'\\r') \}}\}}")


@dataclass(frozen=True)
class Relation:
    """A relation a model reads, as dbt's own call: ``ref('model')`` or ``source('source', 'table')``."""

    model: str | None = None
    source: tuple[str, str] | None = None

    def call(self) -> str:
        names = [self.model] if self.source is None else list(self.source)
        for name in names:
            if name is None or not re.fullmatch(_IDENT, name):
                raise CandidateRejected(f"relation name {name!r} is not a plain identifier")
        if self.model is not None:
            return "{{ ref('" + self.model + "') }}"
        assert self.source is not None
        return "{{ source('" + self.source[0] + "', '" + self.source[1] + "') }}"


def inert(text: str) -> str:
    """`text` as template data that Jinja renders back to exactly `text`: no ``{`` (so no delimiter can start)
    and no carriage return (Jinja turns template data's line ends into ``\\n``)."""
    return text.replace("{", OPEN_BRACE).replace("\r", CARRIAGE_RETURN)


def model_file(pieces: Iterable[str | Relation]) -> str:
    """A model's run form: its checked SQL, in pieces, with each relation as dbt's call and the rest inert."""
    return "".join(piece.call() if isinstance(piece, Relation) else inert(piece) for piece in pieces)


_LITERALS = frozenset(
    {
        TokenType.STRING,
        TokenType.NATIONAL_STRING,
        TokenType.RAW_STRING,
        TokenType.HEREDOC_STRING,
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
        TokenType.BYTE_STRING,
        TokenType.UNICODE_STRING,
    }
)


def refuse_jinja_outside_literals(sql: str, dialect: str) -> None:
    """Refuse a rendered model that still holds ``{{``, ``{%`` or ``{#`` outside its string literals: in a
    comment (a ``{% raw %}`` block's Jinja kept in ``-- ...``), a quoted identifier, or as code. A string literal
    may hold them (``'{{ x }}'``): `inert` makes the literal's braces print themselves."""
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    except TokenError:
        tokens = []  # the parser will say what is wrong; meanwhile the whole text counts
    outside = list(sql)
    for token in tokens:
        if token.token_type in _LITERALS:
            outside[token.start : token.end + 1] = " " * (token.end + 1 - token.start)
    text = "".join(outside)
    for delimiter in JINJA_DELIMITERS:
        at = text.find(delimiter)
        if at >= 0:
            line = sql.count("\n", 0, at) + 1
            raise CandidateRejected(
                f"the rendered model still holds Jinja ({delimiter!r}, line {line}) outside a string literal; "
                "dbt would render it: a model's Jinja must be rendered by the validator (no raw blocks or Jinja "
                "built from strings in the SQL)"
            )


def project_file(name: str, profile: str) -> str:
    """The run form's dbt_project.yml: the name (an identifier), our profile and the default paths."""
    if not re.fullmatch(_IDENT, name) or not re.fullmatch(_IDENT, profile):
        raise CandidateRejected(f"project name {name!r} is not a plain identifier")
    document = {
        "name": name,
        "version": "1.0",
        "config-version": 2,
        "profile": profile,
        "model-paths": ["models"],
        "macro-paths": ["macros"],
    }
    return yaml.safe_dump(document, sort_keys=False)


def properties_file(
    sources: Mapping[str, Sequence[Mapping[str, Any]]],
    models: Sequence[Mapping[str, Any]],
) -> str:
    """The run form's one properties file: ``sources`` (source -> its tables, each ``{name, columns?,
    data_tests?}``) and ``models`` (each ``{name, config, columns?, data_tests?}``), already checked."""
    document: dict[str, Any] = {"version": 2}
    if sources:
        document["sources"] = [
            {"name": name, "tables": list(tables)} for name, tables in sorted(sources.items())
        ]
    if models:
        document["models"] = list(models)
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


# ------------------------------------------------------------------------------------------------------ audit


class RunFormError(CandidateRejected):
    """A run form that holds Jinja the validator did not write (a validator bug, or a form made elsewhere)."""


def _audit_sql(path: str, text: str) -> None:
    position = 0
    for match in _TAG.finditer(text):
        _plain(path, text[position : match.start()])
        position = match.end()
    _plain(path, text[position:])


def _plain(path: str, gap: str) -> None:
    for bad, name in (("{", "'{'"), ("\r", "a carriage return")):
        if bad in gap:
            raise RunFormError(f"{path}: the run form holds {name} outside the validator's own Jinja")


def _audit_yaml(path: str, text: str) -> None:
    _audit_text(path, text)
    stack = [load_yaml(path, text)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            _audit_text(path, node)
            if DBT_EXPRESSION.match(node) and not RELATION_ARGUMENT.fullmatch(node):
                raise RunFormError(
                    f"{path}: the run form holds {node[:60]!r}, which dbt would render as Jinja"
                )


def _audit_text(path: str, text: str) -> None:
    for delimiter in JINJA_DELIMITERS:
        if delimiter in text:
            raise RunFormError(
                f"{path}: the run form holds the Jinja delimiter {delimiter!r}, which dbt would render"
            )


#: file suffix -> the check of a run-form file of that type (the first suffix that matches)
AUDITS: dict[str, Callable[[str, str], None]] = {
    ".sql": _audit_sql,
    ".yml": _audit_yaml,
    ".yaml": _audit_yaml,
}


def audit(files: Mapping[str, str]) -> None:
    """Check a run form (path -> content): `RunFormError` (one line) when a file holds Jinja that dbt would
    render and that this module did not write (module docstring)."""
    for path, text in files.items():
        check = next((c for suffix, c in AUDITS.items() if path.endswith(suffix)), _audit_text)
        check(path, text)
