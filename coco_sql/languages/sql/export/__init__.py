"""The SQL kind's export forms (`forms`), the reference tables a form carries (`references`), the DuckDB forms
of a program that calls AI functions (`ai`) and the AI FUNCTION forms (`ai_function`); the kind's
`Exporter` over them is `languages.sql.exports`."""
