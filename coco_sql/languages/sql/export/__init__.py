"""The SQL kind's export forms (`forms`), the reference tables a form carries (`references`), the DuckDB forms
of a program that calls AI functions (`ai`), and the Snowflake deploy check (`deploy_check`); the kind's
`Exporter` over them is `languages.sql.exports`."""
