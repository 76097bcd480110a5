"""The SQL kind's offline mutator (`offline`, no model): data-driven edits of the SQL AST (`edits`), screened
in one query (`screening`, `scope_probing`) and scored in the engine (`hypothesis_scoring`, `scoring_sql`), the
joint fit (`joint_fit`), and the AI-pipeline search (`ai_pipeline`, `ai_edits`, `examples`, `label_words`, the
learned proxy: `proxy_edits`, `proxy_fit`, `proxy_sql`, `head_edits`, `centroid_head`)."""
