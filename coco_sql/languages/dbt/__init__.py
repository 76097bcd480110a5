"""dbt projects as programs (issue 29); the kind's plug-in is `kind.PLUGIN`.

- `project`: the project as one program row (files under ``-- file:`` markers), path and size checks, diffs;
- `render`, `yaml_check`, `validate`: the validator (our own sandboxed Jinja, an allow-list of YAML, and the SQL
  candidates' checks on each rendered model); its output is the run form dbt executes;
- `runner`, `inputs`, `plugin`: real dbt (dbt-core + dbt-duckdb as a library) over an in-memory DuckDB that a
  dbt-duckdb plugin fills with the split's sources, the AI UDFs and the sandbox's lock-down;
- `sandbox`, `worker`: where that runs for a candidate: one split's sources and a warm dbt in a locked-down
  worker process (jail, Landlock, seccomp, limits, a hard deadline), which also renders and checks projects;
- `compare`: a target model's rows against the expected rows, by key (in the parent: the worker never sees them);
- `task`, `registered`: a task from a pack's task.toml, or from the user's tables (`CALL coco_task(name, NULL,
  {'kind': 'dbt', ...})`, stored as rows), both through the same checks;
- `warehouse`, `compiled`, `data_tests`: on a store that runs candidates itself (Snowflake), no dbt process: each
  model rendered by `render` and run as a warehouse query, dbt's generic tests as the same SQL, scored as above.

`runner`, `plugin` and `worker` need dbt-core and dbt-duckdb (the optional extra `coco-sql[dbt]`); the rest
needs only Jinja2, PyYAML, sqlglot and DuckDB.
"""
