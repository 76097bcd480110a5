"""Hostile dbt model templates, generated (hypothesis strategies) for tests/test_dbt_differential.py.

A template mixes what a candidate can use to smuggle Jinja past the validator to dbt: ``{% raw %}`` blocks (with
and without whitespace control), Jinja comments, SQL comments, string literals whose text holds delimiters,
braces, quotes, carriage returns and look-alike braces, strings built by Jinja (``~``, ``format``), the
project's macros (a plain one and one that takes a ``{% call %}`` body), ``{% set %}`` blocks and ``{% filter %}``
blocks, quoted identifiers, and the reserved placeholder names. Each is a model over `shop.texts`; the validator
may refuse it (one line) or accept it, and then dbt must compile it to exactly the SQL that was checked.
"""

from __future__ import annotations

from hypothesis import strategies as st

SHOP = {
    "dbt_project.yml": "name: shop\nconfig-version: 2\nmodels:\n  shop:\n    +materialized: table\n",
    "models/sources.yml": "version: 2\nsources:\n  - name: shop\n    tables:\n      - name: texts\n",
    "macros/hostile.sql": (
        "{% macro lit(x) %}'{{ x }}'{% endmacro %}\n"
        "{% macro wrap() %}'{{ caller() }}'{% endmacro %}\n"
        "{% macro opener() %}{{ '{' ~ '{' }}{% endmacro %}\n"
    ),
}
SOURCE = "{{ source('shop', 'texts') }}"

# text a literal may hold: Jinja delimiters and what dbt would run, quotes, escapes, look-alikes, line ends
FRAGMENTS = (
    "{{ run_query('select 1') }}",
    "{% if execute %}x{% endif %}",
    "{{ exceptions.raise_compiler_error('LEAK') }}",
    "{{ env_var('HOME') }}",
    "{# c #}",
    "{{",
    "{%",
    "{#",
    "}}",
    "%}",
    "#}",
    "{",
    "{{{",
    "{%-",
    "-%}",
    '{"a": 1}',
    "\r",
    "\r\n",
    "\n",
    "\t",
    "\uff5b\uff5b x \uff5d\uff5d",  # fullwidth braces: not Jinja's
    "\u2028",
    "''",
    "\\",
    "$$",
    "--",
    "/*",
    "*/",
    "é",
    "x",
    " ",
)
content = st.lists(st.sampled_from(FRAGMENTS), max_size=5).map("".join)


def _sql_quoted(text: str) -> str:
    return text.replace("'", "''")


def _jinja_string(text: str) -> str:
    """`text` as a Jinja double-quoted string literal."""
    return (
        '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'
    )


@st.composite
def literal(draw: st.DrawFn) -> str:
    """A SQL string literal whose text the template makes in one of several ways."""
    text = _sql_quoted(draw(content))
    way = draw(
        st.sampled_from(
            ["raw", "raw_trim", "expression", "macro", "call", "set", "filter", "concat", "plain"]
        )
    )
    if way in ("raw", "raw_trim") and "endraw" not in text:
        dash = "-" if way == "raw_trim" else ""
        return f"'{{%{dash} raw {dash}%}}{text}{{%{dash} endraw {dash}%}}'"
    if way == "macro":
        return "{{ lit(" + _jinja_string(text) + ") }}"
    if way == "call" and "endraw" not in text:
        return "{% call wrap() %}{% raw %}" + text + "{% endraw %}{% endcall %}"
    if way == "set" and "endraw" not in text:
        name = "v" + str(draw(st.integers(0, 9)))
        return "{% set " + name + " %}{% raw %}" + text + "{% endraw %}{% endset %}'{{ " + name + " }}'"
    if way == "filter" and "endraw" not in text:
        return "'{% filter upper %}{% raw %}" + text + "{% endraw %}{% endfilter %}'"
    if way == "concat":
        half = len(text) // 2
        return "'{{ " + _jinja_string(text[:half]) + " ~ " + _jinja_string(text[half:]) + " }}'"
    if way == "plain" and not any(d in text for d in ("{{", "{%", "{#")):
        return f"'{text}'"
    return "'{{ " + _jinja_string(text) + " }}'"


@st.composite
def decoration(draw: st.DrawFn) -> str:
    """What may stand between select items: nothing, whitespace control, comments of both languages."""
    kinds = ["none"] * 6 + ["jinja_comment", "line_comment", "block_comment", "trim", "trim", "opener"]
    kind = draw(st.sampled_from(kinds))
    text = draw(content).replace("#}", "").replace("*/", "").replace("\n", " ").replace("\r", " ")
    if kind == "jinja_comment":
        return "{# " + text + " #}"
    if kind == "line_comment" and "endraw" not in text:
        return "-- {% raw %}" + text + "{% endraw %}\n"
    if kind == "block_comment" and "endraw" not in text:
        return "/* {% raw %}" + text + "{% endraw %} */"
    if kind == "trim":
        return "{{- '' -}} "
    if kind == "opener":
        return "/* {{ opener() }} */"
    return " "


@st.composite
def model(draw: st.DrawFn) -> str:
    """One model: literals and columns, decorated, over shop.texts (sometimes read by a quoted alias)."""
    items = []
    for index in range(draw(st.integers(1, 4))):
        value = draw(literal())
        alias = f"c{index}"
        if index == 0 and draw(st.integers(0, 5)) == 0:
            alias = '"' + draw(st.sampled_from(["x y", "{{ x }}", "{x}", "__coco_src_0", "ok", "%}"])) + '"'
        items.append(draw(decoration()) + f"{value} as {alias}")
    items.append("id")
    return "select " + ", ".join(items) + "\nfrom " + SOURCE + "\n"


projects = st.lists(model(), min_size=1, max_size=4).map(
    lambda models: {**SHOP, **{f"models/m{k}.sql": sql for k, sql in enumerate(models)}}
)
