-- coco-sql warehouse schema. Written once in DuckDB dialect; the Snowflake store transpiles it with sqlglot.
-- Every program, evaluation row, ledger entry and event of a run is a row here: a run can be resumed,
-- audited and queried with SQL. Tables are append-only except runs.budget, status, finished_at and config (a resume
-- may raise the budget or the max_spend option).

CREATE TABLE IF NOT EXISTS runs (
    run_id           BIGINT PRIMARY KEY,
    task             VARCHAR NOT NULL,
    task_fingerprint VARCHAR NOT NULL,   -- sha256 of the task pack; --resume refuses a changed pack
    seed             BIGINT NOT NULL,
    budget           BIGINT NOT NULL,    -- mutation iterations (the seed program is iteration 0)
    config           JSON NOT NULL,      -- policy, mutator and archive settings, as given
    status           VARCHAR NOT NULL,   -- running | finished
    created_at       TIMESTAMP NOT NULL,
    finished_at      TIMESTAMP
);

CREATE TABLE IF NOT EXISTS programs (
    program_id  VARCHAR PRIMARY KEY,     -- '<run_id>-<iteration>'
    run_id      BIGINT NOT NULL,
    iteration   BIGINT NOT NULL,         -- 0 is the seed; one child per iteration after that
    parent_id   VARCHAR,                 -- the selected parent
    donor_id    VARCHAR,                 -- second parent of a recombination, or the donor the mutator used
    code        VARCHAR NOT NULL,        -- the program as committed
    language    VARCHAR NOT NULL,        -- sql
    dialect     VARCHAR NOT NULL,        -- dialect of code: duckdb | snowflake
    island      BIGINT NOT NULL,
    cell        VARCHAR,                 -- MAP-Elites cell 'complexity:branches'; NULL when the child is invalid
    approach    VARCHAR,                 -- what the mutator did, in a sentence
    strategy    VARCHAR,                 -- the ledger strategy this child belongs to
    valid       BOOLEAN NOT NULL,        -- passed the validator and ran
    error       VARCHAR,                 -- rejection or runtime message when not valid
    created_at  TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS evaluations (  -- one row per program x split x instance
    run_id        BIGINT NOT NULL,
    program_id    VARCHAR NOT NULL,
    split         VARCHAR NOT NULL,       -- train | val | test
    instance_id   VARCHAR NOT NULL,
    score         DOUBLE NOT NULL,        -- in [0, 1]
    output        VARCHAR,                -- JSON text of the program's output cell
    expected      VARCHAR,                -- JSON text of the label
    error         VARCHAR,
    observation   JSON,                   -- everything else recorded while scoring the row
    model_calls   BIGINT NOT NULL,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    latency_ms    DOUBLE NOT NULL
);

CREATE TABLE IF NOT EXISTS program_scores (  -- one row per program x split: the aggregate of its evaluations
    run_id        BIGINT NOT NULL,
    program_id    VARCHAR NOT NULL,
    split         VARCHAR NOT NULL,
    score         DOUBLE NOT NULL,        -- mean row score
    n_rows        BIGINT NOT NULL,
    n_errors      BIGINT NOT NULL,
    model_calls   BIGINT NOT NULL,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    latency_ms    DOUBLE NOT NULL,        -- wall-clock time of the whole evaluation
    created_at    TIMESTAMP NOT NULL,
    cache_hits    BIGINT NOT NULL DEFAULT 0  -- AI calls answered from ai_cache / ai_embeddings (not in model_calls)
);

CREATE TABLE IF NOT EXISTS archive_entries (  -- MAP-Elites landings: the occupant of (island, cell) from `iteration` on
    run_id     BIGINT NOT NULL,
    iteration  BIGINT NOT NULL,
    seq        BIGINT NOT NULL,           -- order of landings within one iteration
    island     BIGINT NOT NULL,
    cell       VARCHAR NOT NULL,
    program_id VARCHAR NOT NULL,
    reason     VARCHAR NOT NULL           -- seed | admitted | migrated
);

CREATE TABLE IF NOT EXISTS ledger (  -- the strategy ledger: what each iteration tried and what it gained
    run_id       BIGINT NOT NULL,
    iteration    BIGINT NOT NULL,
    program_id   VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,        -- 'hillclimb' or the name of a new direction
    kind         VARCHAR NOT NULL,        -- hillclimb | direction
    status       VARCHAR NOT NULL,        -- improved | neutral | regressed | failed
    parent_score DOUBLE,
    child_score  DOUBLE,
    score_delta  DOUBLE,
    paradigm     VARCHAR,                 -- the active paradigm text, if one is in force
    note         VARCHAR,
    created_at   TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS events (
    run_id     BIGINT NOT NULL,
    iteration  BIGINT NOT NULL,
    kind       VARCHAR NOT NULL,          -- run_started | run_resumed | parent_selected | curated | mutation | admitted | migrated | spend_limit_reached | run_finished
    program_id VARCHAR,
    payload    JSON,
    created_at TIMESTAMP NOT NULL,
    seq        BIGINT                     -- position in its batch: events are read ORDER BY created_at, seq
);

-- Databases written before events had seq get it (NULL in their rows).
ALTER TABLE events ADD COLUMN IF NOT EXISTS seq BIGINT;

-- The AI response cache, content-addressed and shared by every run of this store (aifuncs/cache.py).
-- Likely label errors of a run's training rows (issue 38, `search.label_noise`): rows whose nearest training rows
-- hold another label and none of theirs, and that no program of the run solves; written at the run's end.
CREATE TABLE IF NOT EXISTS label_errors (
    run_id           BIGINT NOT NULL,
    iteration        BIGINT NOT NULL,   -- the run's last iteration when they were flagged
    instance_id      VARCHAR NOT NULL,
    text             VARCHAR,           -- the row's input text (its text columns, joined by a space)
    label            VARCHAR NOT NULL,  -- the row's label as given (JSON)
    neighbours_label VARCHAR NOT NULL,  -- the label most of its nearest training rows hold instead
    neighbour_share  DOUBLE NOT NULL,   -- their share of its nearest training rows
    programs         BIGINT NOT NULL,   -- programs that ran on it; none solved it
    created_at       TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS ai_cache (
    cache_key     VARCHAR PRIMARY KEY,    -- sha256 over (function, model, parameters, input)
    function      VARCHAR NOT NULL,
    model         VARCHAR NOT NULL,
    response      VARCHAR NOT NULL,       -- the provider's answer (text; JSON text for JSON output)
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    latency_ms    DOUBLE NOT NULL,        -- of the call that filled the entry
    created_at    TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS ai_embeddings (  -- embeddings cached per (model, text)
    model        VARCHAR NOT NULL,
    text_hash    VARCHAR NOT NULL,        -- sha256 of the text
    vector       FLOAT[] NOT NULL,
    input_tokens BIGINT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (model, text_hash)
);

CREATE TABLE IF NOT EXISTS ai_usage (  -- the cost ledger: AI usage per evaluation x function x model
    run_id               BIGINT NOT NULL,
    iteration            BIGINT NOT NULL,
    program_id           VARCHAR,
    split                VARCHAR NOT NULL,  -- train | val | test | drafts (the mutator's draft tests) | mutator (its models)
    function             VARCHAR NOT NULL,  -- the AI function (AI_CLASSIFY, ...); for 'mutator', the model role
    model                VARCHAR NOT NULL,
    calls                BIGINT NOT NULL,   -- rows answered, from the provider or the cache
    cache_hits           BIGINT NOT NULL,
    errors               BIGINT NOT NULL,
    input_tokens         BIGINT NOT NULL,   -- spent on provider calls
    output_tokens        BIGINT NOT NULL,
    cached_input_tokens  BIGINT NOT NULL,   -- what the cache hits would have cost
    cached_output_tokens BIGINT NOT NULL,
    latency_ms           DOUBLE NOT NULL,   -- summed over provider calls
    created_at           TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS ai_calls (  -- every provider call (cache misses), including failed ones
    run_id        BIGINT NOT NULL,
    iteration     BIGINT NOT NULL,
    program_id    VARCHAR,
    split         VARCHAR NOT NULL,
    function      VARCHAR NOT NULL,
    model         VARCHAR NOT NULL,
    provider      VARCHAR NOT NULL,
    items         BIGINT NOT NULL,        -- texts embedded or prompts completed by the call
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    latency_ms    DOUBLE NOT NULL,
    error         VARCHAR,
    created_at    TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS agent_turns (  -- the mutators' conversations with chat models: one row per message
    run_id        BIGINT NOT NULL,
    iteration     BIGINT NOT NULL,
    program_id    VARCHAR,                -- the child the conversation produced
    agent         VARCHAR NOT NULL,       -- the model role: agent | reflector | proposer | a baseline's name
    turn          BIGINT NOT NULL,        -- 0-based position in the iteration's conversation of `agent`
    role          VARCHAR NOT NULL,       -- system | user | assistant | tool
    content       VARCHAR NOT NULL,       -- the message text (a tool turn: the tool's result)
    tool_calls    JSON,                   -- an assistant turn's calls: [{"id", "name", "arguments"}]
    tool_call_id  VARCHAR,                -- a tool turn: the call it answers
    tool_name     VARCHAR,                -- a tool turn: the tool that answered
    input_tokens  BIGINT NOT NULL,        -- of the model call that produced an assistant turn (0 otherwise)
    output_tokens BIGINT NOT NULL,
    template      VARCHAR,                -- 'name@version' of the prompt template the turn was rendered from
    model         VARCHAR,                -- the chat model of an assistant turn
    created_at    TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS primitives (  -- a run's primitive library (PACE's EAPs): one row per primitive
    run_id            BIGINT NOT NULL,
    name              VARCHAR NOT NULL,   -- p_<short>, unique within the run
    language          VARCHAR NOT NULL,   -- sql | python
    code              VARCHAR NOT NULL,   -- the definition: CREATE MACRO ...; or a Python def (with its imports)
    signature         VARCHAR NOT NULL,   -- e.g. p_lock(p1)
    origin_program    VARCHAR,            -- the program it was extracted from
    created_iteration BIGINT NOT NULL,    -- the iteration that added it
    how               VARCHAR NOT NULL,   -- extracted | generated | seeded
    created_at        TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS primitive_trials (  -- one row per primitive-aware operator use (P1-P4)
    run_id       BIGINT NOT NULL,
    iteration    BIGINT NOT NULL,
    program_id   VARCHAR NOT NULL,        -- the child
    operator     VARCHAR NOT NULL,        -- P1 insertion | P2 replacement | P3 refinement | P4 crossover
    focus        VARCHAR,                 -- the focus primitive whose posterior the trial updates
    parent_score DOUBLE,
    child_score  DOUBLE,                  -- NULL when the child failed
    improved     BOOLEAN NOT NULL,        -- child_score > parent_score
    verified     BOOLEAN NOT NULL,        -- the operator's call-set contract held
    reason       VARCHAR,                 -- the contract violation, when not verified
    created_at   TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS tasks (  -- tasks registered from warehouse rows (coco_task), with their options
    name         VARCHAR NOT NULL,
    source       VARCHAR NOT NULL,   -- the table or query the rows came from
    options      JSON NOT NULL,
    column_types JSON NOT NULL,      -- the source's columns, in order, with their DuckDB types
    n_rows       BIGINT NOT NULL,
    created_at   TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS task_rows (  -- a registered task's rows as they were when it was registered
    task     VARCHAR NOT NULL,
    position BIGINT NOT NULL,
    row_data JSON NOT NULL
);

CREATE TABLE IF NOT EXISTS coco_progress (  -- what a run started from SQL is doing now: one row per run, rewritten as it goes
    run_id     BIGINT NOT NULL,      -- the run; a start that fails keeps its row (phase failed) and writes no run
    task       VARCHAR NOT NULL,
    phase      VARCHAR NOT NULL,     -- warming | evolving | finished | stopped | failed
    iteration  BIGINT,               -- the last committed iteration (0: the seed)
    budget     BIGINT,
    best_val   DOUBLE,               -- the best validation score so far
    done       BIGINT,               -- warming: texts embedded so far (of `total`)
    total      BIGINT,
    message    VARCHAR,              -- the last progress line, or why the run stopped or failed
    started_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
