"""Issue 37's probe and its variants: a candidate's Jinja never runs in dbt.

Each probe hides Jinja from the validator's own rendering (a ``{% raw %}`` block, a ``{% call %}`` or ``{% set %}``
body, a macro, a string built with ``~``, a YAML value) so that it would reach dbt. Each is either refused with
one line, or runs with the Jinja inert: the model's value is the text the validator saw. Every probe here ran
its Jinja in dbt (or crashed the validator) before the fix.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.validate import DbtSpec, validate_project

SHOP = {
    "dbt_project.yml": "name: shop\nconfig-version: 2\nmodels:\n  shop:\n    +materialized: table\n",
    "models/sources.yml": "version: 2\nsources:\n  - name: shop\n    tables:\n      - name: texts\n",
    "macros/probes.sql": "{% macro wrap() %}'{{ caller() }}'{% endmacro %}\n"
    "{% macro jinja() %}{{ '{{' }} \"LEAK\" ~ \"ED\" {{ '}}' }}{% endmacro %}\n"
    "{% macro lit(x) %}'{{ x }}'{% endmacro %}\n",
}
SPEC = DbtSpec(source_columns={("shop", "texts"): {"id": "VARCHAR", "text": "VARCHAR"}})
FROM = "\nfrom {{ source('shop', 'texts') }} limit 1\n"
LEAK = '{{ "LEAK" ~ "ED" }}'  # dbt would render LEAKED
ISSUE = (  # the issue's probe, on this project's table: in dbt it fails the run with every text of the split
    '{% if execute %}{{ exceptions.raise_compiler_error("LEAK " ~ (run_query("select string_agg(text, chr(44)) '
    'from shop.texts").columns[0].values()[0])) }}{% endif %}'
)

# model -> (its SQL, the value its one row must hold: the Jinja as text, never what dbt would make of it)
INERT = {
    "issue_probe": ("select '{% raw %}" + ISSUE + "{% endraw %}' as v", ISSUE),
    "raw_trimmed": ("select '{%- raw -%}" + LEAK + "{%- endraw -%}' as v", LEAK),
    "call_block": (
        "select {% call wrap() %}{% raw %}" + LEAK + "{% endraw %}{% endcall %} as v",
        LEAK,
    ),
    "filter_block": (
        "select '{% filter lower %}{% raw %}" + LEAK + "{% endraw %}{% endfilter %}' as v",
        LEAK.lower(),
    ),
    "set_block": (
        "{% set x %}{% raw %}" + LEAK + "{% endraw %}{% endset %}select '{{ x }}' as v",
        LEAK,
    ),
    "macro_output": ("select '{{ jinja() }}' as v", LEAK),
    "built_with_tilde": ('select \'{{ "{" ~ "{ 9 * 9 }}" }}\' as v', "{{ 9 * 9 }}"),
    "env_var": (
        'select \'{% raw %}{{ env_var("HOME", "none") }}{% endraw %}\' as v',
        '{{ env_var("HOME", "none") }}',
    ),
    "this": ("select '{% raw %}{{ this }}{% endraw %}' as v", "{{ this }}"),
    "var": ('select \'{% raw %}{{ var("x", "VAR") }}{% endraw %}\' as v', '{{ var("x", "VAR") }}'),
    "jinja_comment": ("select '{% raw %}{# hidden #}shown{% endraw %}' as v", "{# hidden #}shown"),
    "carriage_return": ("select 'a{{ \"\\r\\n\" }}b' as v", "a\r\nb"),  # Jinja would turn a CR into \n
    "json_literal": ("select '{\"a\": 1}' as v", '{"a": 1}'),  # braces a user writes: unchanged
}


def inert_project() -> DbtProject:
    return DbtProject.of({**SHOP, **{f"models/{name}.sql": sql + FROM for name, (sql, _) in INERT.items()}})


@pytest.fixture(scope="module")
def inert_run() -> Iterator[object]:
    pytest.importorskip("dbt.adapters.duckdb", reason="dbt is not installed: pip install '.[dbt]'")
    from dbt_cases import TEXTS

    from coco_sql.languages.dbt.runner import DbtSession

    with DbtSession() as session:
        yield session.run(
            validate_project(inert_project(), SPEC), {"shop.texts": TEXTS}, sorted(INERT), tests=False
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(INERT))
def test_jinja_hidden_in_a_literal_runs_as_text_in_dbt(inert_run: object, name: str) -> None:
    assert inert_run.errors == {}  # type: ignore[attr-defined]
    [value] = inert_run.models[name]["v"].tolist()  # type: ignore[attr-defined]
    assert value == INERT[name][1]


def test_the_run_form_of_each_inert_probe_holds_no_jinja_of_the_candidate() -> None:
    """Without dbt: the run form's models hold only `{{ source() }}` and escapes of single characters."""
    validated = validate_project(inert_project(), SPEC)
    for name in INERT:
        text = validated.run_files("coco")[f"models/{name}.sql"]
        for tag in ("{{ source('shop', 'texts') }}", "{{ '{' }}", "{{ '\\r' }}"):
            text = text.replace(tag, "")
        assert not any(d in text for d in ("{{", "{%", "{#")), (name, text)


# ---------------------------------------------------------------------------------------------- refused


def refused(changes: dict[str, str]) -> str:
    with pytest.raises(CandidateRejected) as caught:
        validate_project(DbtProject.of({**SHOP, "models/m.sql": "select id from {{ source('shop', 'texts') }}\n",
                                        **changes}), SPEC)  # fmt: skip
    message = str(caught.value)
    assert "\n" not in message and len(message) <= 400
    return message


TAGGED = "version: 2\nmodels:\n  - name: m\n    {}\n"
TESTED = (
    "version: 2\nmodels:\n  - name: m\n    columns:\n      - name: id\n        data_tests:\n          - {}\n"
)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        # Jinja left outside a literal after our rendering: dbt would render it
        (
            {"models/m.sql": "select id -- {% raw %}{{ run_query('select 1') }}{% endraw %}" + FROM},
            "outside a string",
        ),
        (
            {"models/m.sql": "select id /* {%- raw -%}{% do run_query('select 1') %}{% endraw %} */" + FROM},
            "('{%'",
        ),
        (
            {"models/m.sql": 'select id as "{% raw %}{{ 9 * 9 }}{% endraw %}"' + FROM},
            "outside a string literal",
        ),
        ({"models/m.sql": "select id /* {{ jinja() }} */" + FROM}, "outside a string literal"),
        # a placeholder's name spelled by a macro, in a literal: it would have become a relation
        (
            {"models/m.sql": "select {{ lit('__coco_' ~ 'src_0') }} as v" + FROM},
            "reserved for ref() and source()",
        ),
        ({"models/m.sql": "select '{{ \"\\x00\" }}' as v" + FROM}, "NUL"),
        # YAML values dbt renders
        (
            {"models/schema.yml": TAGGED.format("tags: [\"{{ run_query('select 1') }}\"]")},
            "Jinja is not allowed",
        ),
        ({"models/schema.yml": TAGGED.format('docs: {show: "{{ 1 }}"}')}, "show is true or false"),
        (
            {"dbt_project.yml": "name: shop\nmodels:\n  shop:\n    +tags: \"{{ run_query('select 1') }}\"\n"},
            "tags may not",
        ),
        (
            {
                "models/schema.yml": TESTED.format(
                    "accepted_values: {arguments: {values: ['env_var(\"HOME\")']}}"
                )
            },
            "dbt would run this value as Jinja",
        ),
        (
            {"models/schema.yml": TESTED.format('accepted_values: {arguments: {values: ["a\') or (1=1"]}}')},
            "may not hold a quote",
        ),
        (
            {"models/schema.yml": TESTED.format("accepted_values: {arguments: {values: [a], quote: false}}")},
            "with quote: false",
        ),
        # files dbt would read that a program may not hold
        ({"packages.yml": "packages: []\n"}, "not part of a dbt program"),
        ({"seeds/s.csv": "a\n1\n"}, "not part of a dbt program"),
        ({"analyses/a.sql": "select 1\n"}, "not part of a dbt program"),
        ({"snapshots/s.sql": "select 1\n"}, "not part of a dbt program"),
        ({"tests/t.sql": "select 1 as x where false\n"}, "not part of a dbt program"),
        ({"dbt_project.yml": 'name: shop\non-run-start: ["select 1"]\n'}, "on-run-start"),
        ({"models/m.sql": "{{ config(pre_hook='select 1') }}select 1 as x"}, "pre_hook"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else v[:30],
)
def test_jinja_that_would_reach_dbt_is_refused_with_one_line(changes: dict[str, str], message: str) -> None:
    assert message in refused(changes)


# ------------------------------------------------------------------------------------- bounded, one line


def test_a_jinja_loop_without_calls_is_refused_by_its_work_not_killed() -> None:
    literal = "'" + "x" * 6_000 + "'"
    loop = "{% for a in " + literal + " %}{% for b in " + literal + " %}{% endfor %}{% endfor %}"
    start = time.monotonic()
    assert "steps" in refused({"models/m.sql": loop + "select id" + FROM})
    assert time.monotonic() - start < 20.0  # 36 million steps; refused at one million


def test_deep_yaml_and_deep_sql_in_a_project_are_one_line() -> None:
    deep = "[" * 5_000 + "]" * 5_000
    assert "nest" in refused({"models/schema.yml": f"version: 2\nmodels: {deep}\n"})
    parens = "(" * 2_000 + "1" + ")" * 2_000
    assert "nest" in refused({"models/m.sql": f"select {parens} as v" + FROM})
