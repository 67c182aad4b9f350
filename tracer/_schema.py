"""The store's schema, its version, migrations and the documented SQL views.

Tables are private (``fp_*``); the views are the public face that any DuckDB client may query:

``runs``      one row per run: id, session_id, agent, status, input, output, model, tokens, cost,
              times, fork source, labels.
``stages``    one row per stage: id, run_id, seq, kind, name, status, times, duration_ms,
              parent_id, attributes, error.
``edges``     one row per flowchart edge: run_id, src, dst, kind.
``context``   one row per snapshot position: run_id, stage_id, position, item_hash, kind, text,
              body, origin_kind, origin_run, origin_stage, origin_source, included, dropped_by,
              est_tokens. ``included = false`` rows were available but not sent.
``outputs``   one row per item a stage produced: run_id, stage_id, position, item_hash, kind, text.
``items``     every stored item once: hash, kind, text, body, size.

A snapshot is stored as one ``fp_snapshot`` row per stage: its entries (each an item hash and its
origin's fields), included flags and dropped-by reasons each packed into one string (control
characters between entries and fields),
so recording an inference writes one row instead of one per context item — the per-row work
DuckDB does on insert was most of the cost of recording.

A conversation's snapshots (a session's inferences) form a *chain*, because each sees what the
last one saw and what was added since: the system prompt composed again, the conversation (or the
part of it its window holds), the tools offered and the settings, then what the window left out.
The chain keeps a *log*, the conversation's entries in order, and each row appends to it only the
entries that are new. A row's ``entries`` are its ``head`` own entries (the prompt), the ``added``
entries it appends to the log at ``log_start``, then ``rest`` own entries (tools, settings, and
what was left out when that is not in the log). The snapshot it stands for is: its head, the log
from ``low`` to the end of what it appended (the conversation it sent), its rest, then the log from
``drop_low`` to ``drop_high``, each entry left out by ``drop_reason`` (what the window slid past).
``chain`` is the stage id of the chain's first row (``link`` 0); a chain's rows are written in
order, so they lie between its first stage id and its last. A row that continues no chain (a
rewind, a compaction, another process) starts one; a row of schema 2 is a chain of its own, all
its entries its own. Without chains every inference stored its whole context, so a session's
recording grew with the square of its length (8 sessions x 1,000 turns of 1-4 KB, in process: a
1.36 GB file, the host slowing from 111 to 5 turns/s; at 300 turns snapshots were 85% of the
bytes); with them it grows by what each turn adds.

In the same way a stage's row carries its
incoming edges (``fp_stage.edges``: source and kind per edge) and its outputs' hashes
(``fp_stage.outputs``). The ``fp_entries``, ``fp_edges`` and ``fp_outputs`` views unpack them (with
the rare value that holds those characters, kept row by row in ``fp_entry``, ``fp_edge`` and
``fp_output``); the public views read through them, so queries see one row per position, edge and
output as before.

No table that grows has a key or an index. DuckDB serializes an index whole at every checkpoint
(what it writes grows with the table), and in the storage version new files are written in (see
``tracer._lock``) a table with one keeps appending into its last row group, which a checkpoint then
rewrites whole: with keys on ``fp_item`` and ``fp_run`` a host's checkpoints grew from 15 to 80 MB
over 8,000 soak turns and held up every commit meanwhile. Run and stage ids are unique by
construction (``tracer._ids``); an item is written once by the writer, which knows which hashes
the file holds (``tracer._stored_items``).
"""

from __future__ import annotations

SCHEMA_VERSION = 4
APPLICATION = "footprint"

TABLES = """
CREATE TABLE IF NOT EXISTS fp_meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS fp_run (
    id VARCHAR, session_id VARCHAR, agent VARCHAR, status VARCHAR, input VARCHAR,
    output VARCHAR, model VARCHAR, started_at DOUBLE, ended_at DOUBLE, tokens_in BIGINT,
    tokens_out BIGINT, cost DOUBLE, forked_from_run VARCHAR, forked_from_stage VARCHAR,
    fork_edit VARCHAR, labels VARCHAR[], attributes VARCHAR, redaction VARCHAR, error VARCHAR
);
CREATE TABLE IF NOT EXISTS fp_stage (
    id VARCHAR, run_id VARCHAR, seq INTEGER, kind VARCHAR, name VARCHAR, status VARCHAR,
    started_at DOUBLE, ended_at DOUBLE, parent_id VARCHAR, attributes VARCHAR, error VARCHAR,
    edges VARCHAR, outputs VARCHAR
);
CREATE TABLE IF NOT EXISTS fp_edge (run_id VARCHAR, src VARCHAR, dst VARCHAR, kind VARCHAR);
CREATE TABLE IF NOT EXISTS fp_item (
    hash VARCHAR, kind VARCHAR, text VARCHAR, body VARCHAR
);
CREATE TABLE IF NOT EXISTS fp_entry (
    run_id VARCHAR, stage_id VARCHAR, position INTEGER, item_hash VARCHAR, origin_kind VARCHAR,
    origin_run VARCHAR, origin_stage VARCHAR, origin_source VARCHAR, included BOOLEAN,
    dropped_by VARCHAR
);
CREATE TABLE IF NOT EXISTS fp_snapshot (
    run_id VARCHAR, stage_id VARCHAR, entries VARCHAR, flags VARCHAR, dropped VARCHAR,
    chain VARCHAR, link INTEGER, head INTEGER, added INTEGER, rest INTEGER, log_start INTEGER, low INTEGER,
    drop_low INTEGER, drop_high INTEGER, drop_reason VARCHAR
);
CREATE TABLE IF NOT EXISTS fp_output (
    run_id VARCHAR, stage_id VARCHAR, position INTEGER, item_hash VARCHAR
);
"""

# Earlier stores kept an index on the run of each row. Reads now find a run's rows by a range on
# the time-sorted ids, which DuckDB answers from its per-row-group min/max (as fast at a million
# stages), so the indexes only cost every insert: a store opened for writing drops them. An
# optimization only, so not a schema version.
DROP_RUN_INDEXES = """
DROP INDEX IF EXISTS fp_stage_run;
DROP INDEX IF EXISTS fp_edge_run;
DROP INDEX IF EXISTS fp_entry_run;
DROP INDEX IF EXISTS fp_snapshot_run;
DROP INDEX IF EXISTS fp_output_run;
"""

# Separators inside a packed snapshot (see tracer._rows.add_snapshot); values holding any of
# \x1a-\x1f are stored row by row in fp_entry instead.
ENTRY_SEP = "\x1f"  # between the entries of a snapshot
FIELD_SEP = "\x1b"  # between the fields of a packed origin
FIELD_NULL = "\x1a"  # a NULL field or dropped-by reason

VIEWS = """
CREATE OR REPLACE VIEW fp_edges AS
    SELECT run_id, split_part(e, chr(27), 1) AS src, id AS dst, split_part(e, chr(27), 2) AS kind
    FROM (SELECT run_id, id, unnest(string_split(edges, chr(31))) AS e FROM fp_stage WHERE edges <> '')
    UNION ALL
    SELECT run_id, src, dst, kind FROM fp_edge;
CREATE OR REPLACE VIEW fp_outputs AS
    SELECT run_id, id AS stage_id, (generate_subscripts(string_split(outputs, chr(31)), 1) - 1)::INTEGER AS position,
           unnest(string_split(outputs, chr(31))) AS item_hash
    FROM fp_stage WHERE outputs <> ''
    UNION ALL
    SELECT run_id, stage_id, position, item_hash FROM fp_output;
CREATE OR REPLACE VIEW fp_entries AS
    -- a row's own entries: those before the conversation (position pos - 1) and after it
    SELECT run_id, stage_id, (CASE WHEN pos <= head THEN pos - 1 ELSE pos - 1 + log_start - low END)::INTEGER
               AS position, e[1] AS item_hash,
           nullif(e[2], chr(26)) AS origin_kind, nullif(e[3], chr(26)) AS origin_run,
           nullif(e[4], chr(26)) AS origin_stage, nullif(e[5], chr(26)) AS origin_source,
           flags[pos] = '1' AS included,
           CASE WHEN dropped = '' THEN NULL ELSE nullif(d[pos], chr(26)) END AS dropped_by
    FROM (
        SELECT run_id, stage_id, head, added, log_start, low, flags, dropped, string_split(dropped, chr(31)) AS d,
               generate_subscripts(string_split(entries, chr(31)), 1) AS pos,
               string_split(unnest(string_split(entries, chr(31))), chr(27)) AS e
        FROM fp_snapshot WHERE entries <> ''
    )
    WHERE pos <= head OR pos > head + added
    UNION ALL
    -- the conversation it sent (log[low:log_start + added]) and what its window left out
    -- (log[drop_low:drop_high]): entries its chain's rows (itself included) added to the log
    SELECT run_id, stage_id,
           (CASE WHEN sent THEN head + g - low ELSE head + log_start + added - low + rest + g - drop_low END)::INTEGER,
           e[1], nullif(e[2], chr(26)), nullif(e[3], chr(26)), nullif(e[4], chr(26)), nullif(e[5], chr(26)),
           sent, CASE WHEN sent THEN NULL ELSE drop_reason END
    FROM (
        SELECT *, g >= low AND g < log_start + added AS sent
        FROM (
            SELECT s.run_id, s.stage_id, s.head, s.added, s.rest, s.log_start, s.low, s.drop_low, s.drop_high,
                   s.drop_reason, p.log_start + generate_subscripts(
                       list_slice(string_split(p.entries, chr(31)), p.head + 1, p.head + p.added), 1) - 1 AS g,
                   string_split(unnest(list_slice(string_split(p.entries, chr(31)), p.head + 1, p.head + p.added)),
                                chr(27)) AS e
            FROM fp_snapshot s JOIN fp_snapshot p
              ON p.chain = s.chain AND p.link <= s.link AND p.added > 0
             AND ((p.log_start < s.log_start + s.added AND p.log_start + p.added > s.low)
                  OR (p.log_start < s.drop_high AND p.log_start + p.added > s.drop_low))
        )
    )
    WHERE sent OR (g >= drop_low AND g < drop_high)
    UNION ALL
    SELECT run_id, stage_id, position, item_hash, origin_kind, origin_run, origin_stage, origin_source,
           included, dropped_by
    FROM fp_entry;
CREATE OR REPLACE VIEW runs AS
    SELECT id, session_id, agent, status, input, output, model,
           to_timestamp(started_at) AS started_at, to_timestamp(ended_at) AS ended_at,
           tokens_in, tokens_out, cost, forked_from_run, forked_from_stage, fork_edit, labels,
           attributes, error
    FROM fp_run;
CREATE OR REPLACE VIEW stages AS
    SELECT id, run_id, seq, kind, name, status,
           to_timestamp(started_at) AS started_at, to_timestamp(ended_at) AS ended_at,
           round((ended_at - started_at) * 1000, 3) AS duration_ms, parent_id, attributes, error
    FROM fp_stage;
CREATE OR REPLACE VIEW edges AS SELECT run_id, src, dst, kind FROM fp_edges;
CREATE OR REPLACE VIEW items AS
    SELECT hash, kind, text, coalesce(body, json_object('text', text)::VARCHAR) AS body,
           length(text) AS size
    FROM fp_item;
CREATE OR REPLACE VIEW context AS
    SELECT e.run_id, e.stage_id, e.position, e.item_hash, i.kind, i.text,
           coalesce(i.body, json_object('text', i.text)::VARCHAR) AS body,
           e.origin_kind, e.origin_run, e.origin_stage, e.origin_source, e.included, e.dropped_by,
           (length(i.text) + 3) // 4 AS est_tokens
    FROM fp_entries e JOIN fp_item i ON i.hash = e.item_hash;
CREATE OR REPLACE VIEW outputs AS
    SELECT o.run_id, o.stage_id, o.position, o.item_hash, i.kind, i.text
    FROM fp_outputs o JOIN fp_item i ON i.hash = o.item_hash;
"""

# Each migration takes the store from version N to N+1. Add new ones at the end; never edit old ones.
MIGRATIONS: dict[int, str] = {
    # 1 -> 2: snapshots move from one fp_entry row per position to one packed fp_snapshot row per
    # stage, and edges and outputs into their stage's row (a value holding a separator stays a row)
    1: """
CREATE TABLE fp_snapshot (
    run_id VARCHAR, stage_id VARCHAR, entries VARCHAR, flags VARCHAR, dropped VARCHAR
);
INSERT INTO fp_snapshot
SELECT run_id, stage_id,
       string_agg(concat_ws(chr(27), item_hash, coalesce(origin_kind, chr(26)), coalesce(origin_run, chr(26)),
                            coalesce(origin_stage, chr(26)), coalesce(origin_source, chr(26))),
                  chr(31) ORDER BY position),
       string_agg(CASE WHEN included THEN '1' ELSE '0' END, '' ORDER BY position),
       CASE WHEN bool_and(dropped_by IS NULL) THEN ''
            ELSE string_agg(coalesce(dropped_by, chr(26)), chr(31) ORDER BY position) END
FROM fp_entry
GROUP BY run_id, stage_id
HAVING NOT bool_or(regexp_matches(concat(item_hash, origin_kind, origin_run, origin_stage, origin_source, dropped_by),
                                  '[' || chr(26) || '-' || chr(31) || ']'))
   AND NOT bool_or(coalesce(dropped_by = '', false))
   AND count(*) = max(position) + 1;
DELETE FROM fp_entry USING fp_snapshot s WHERE fp_entry.run_id = s.run_id AND fp_entry.stage_id = s.stage_id;
DROP INDEX IF EXISTS fp_stage_run;
CREATE TABLE fp_packed_edges AS
SELECT dst, string_agg(src || chr(27) || kind, chr(31) ORDER BY rowid) AS edges
FROM fp_edge GROUP BY dst
HAVING NOT bool_or(regexp_matches(src || kind, '[' || chr(26) || '-' || chr(31) || ']'));
CREATE TABLE fp_packed_outputs AS
SELECT stage_id, string_agg(item_hash, chr(31) ORDER BY position) AS outputs
FROM fp_output GROUP BY stage_id
HAVING NOT bool_or(regexp_matches(item_hash, '[' || chr(26) || '-' || chr(31) || ']'))
   AND count(*) = max(position) + 1;
ALTER TABLE fp_stage ADD COLUMN edges VARCHAR;
ALTER TABLE fp_stage ADD COLUMN outputs VARCHAR;
UPDATE fp_stage SET edges = coalesce(p.edges, '') FROM fp_packed_edges p WHERE fp_stage.id = p.dst;
UPDATE fp_stage SET outputs = coalesce(p.outputs, '') FROM fp_packed_outputs p WHERE fp_stage.id = p.stage_id;
UPDATE fp_stage SET edges = '' WHERE edges IS NULL AND id NOT IN (SELECT dst FROM fp_edge);
UPDATE fp_stage SET outputs = '' WHERE outputs IS NULL AND id NOT IN (SELECT stage_id FROM fp_output);
DELETE FROM fp_edge USING fp_packed_edges p WHERE fp_edge.dst = p.dst;
DELETE FROM fp_output USING fp_packed_outputs p WHERE fp_output.stage_id = p.stage_id;
DROP TABLE fp_packed_edges;
DROP TABLE fp_packed_outputs;
""",
    # 2 -> 3: snapshots of a conversation form a chain whose rows store only the conversation's new
    # entries (in the chain's log); every snapshot stored so far is a chain of its own, all its entries its own
    2: """
ALTER TABLE fp_snapshot ADD COLUMN chain VARCHAR;
ALTER TABLE fp_snapshot ADD COLUMN link INTEGER DEFAULT 0;
ALTER TABLE fp_snapshot ADD COLUMN head INTEGER DEFAULT 0;
ALTER TABLE fp_snapshot ADD COLUMN added INTEGER DEFAULT 0;
ALTER TABLE fp_snapshot ADD COLUMN rest INTEGER DEFAULT 0;
ALTER TABLE fp_snapshot ADD COLUMN log_start INTEGER DEFAULT 0;
ALTER TABLE fp_snapshot ADD COLUMN low INTEGER DEFAULT 0;
ALTER TABLE fp_snapshot ADD COLUMN drop_low INTEGER DEFAULT 0;
ALTER TABLE fp_snapshot ADD COLUMN drop_high INTEGER DEFAULT 0;
ALTER TABLE fp_snapshot ADD COLUMN drop_reason VARCHAR;
UPDATE fp_snapshot SET chain = stage_id, link = 0, head = 0, added = 0, log_start = 0, low = 0, drop_low = 0,
       drop_high = 0, rest = CASE WHEN entries = '' THEN 0 ELSE len(string_split(entries, chr(31))) END;
""",
    # 3 -> 4: fp_run and fp_item lose their primary keys (see the module docstring): each is copied
    # into a table without one (in the order it was written: DuckDB preserves insertion order)
    3: """
ALTER TABLE fp_run RENAME TO fp_run_v3;
CREATE TABLE fp_run (
    id VARCHAR, session_id VARCHAR, agent VARCHAR, status VARCHAR, input VARCHAR,
    output VARCHAR, model VARCHAR, started_at DOUBLE, ended_at DOUBLE, tokens_in BIGINT,
    tokens_out BIGINT, cost DOUBLE, forked_from_run VARCHAR, forked_from_stage VARCHAR,
    fork_edit VARCHAR, labels VARCHAR[], attributes VARCHAR, redaction VARCHAR, error VARCHAR
);
INSERT INTO fp_run SELECT * FROM fp_run_v3;
DROP TABLE fp_run_v3;
ALTER TABLE fp_item RENAME TO fp_item_v3;
CREATE TABLE fp_item (hash VARCHAR, kind VARCHAR, text VARCHAR, body VARCHAR);
INSERT INTO fp_item SELECT * FROM fp_item_v3;
DROP TABLE fp_item_v3;
""",
}
