"""The data-agent program kind (issue 30): the program is an agent specification, run on each question of a task.

A task says ``language = "agent_spec"`` and holds its own ``[agent_spec]`` table (`settings`). The parts:

- `language`: the kind behind the `Language` seam (validate, cell, runner, DABStep row scoring, the export form),
  registered in `languages.LANGUAGES`; `mutator`: its offline mutator over `ops`, in `engine.registry`;

- `spec`: the spec (Snowflake's CREATE AGENT specification plus a semantic model and documents) and its YAML text;
- `validate`, `toolsql`: the validator over a task's tables, with the candidate validator's SQL rules;
- `pack`: the task's tables (CSV files, and its documents as the table ``documents``) and its question rows;
- `prompt`, `tools`, `runtime`, `trace`: one question's run (our tool-calling loop through the `llm` runtime and
  its cache, tools in the SQL sandbox) and its bounded trace, the evaluation row's observation;
- `scoring`: DABStep-style answer scoring;
- `ops`: the offline operators (edits without a model, from the training history and the task's documents);
- `export`: ``coco_export(run, 'cortex_agent')``'s statements (procedures, semantic view, CREATE AGENT).
"""
