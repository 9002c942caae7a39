-- Event IDs already counted (idempotence), with the event's time for pruning.
CREATE TABLE analytics_seen (
    id TEXT    PRIMARY KEY,
    at INTEGER NOT NULL -- unix seconds
) WITHOUT ROWID;
CREATE INDEX analytics_seen_at ON analytics_seen (at);

-- One row per room and minute.
CREATE TABLE analytics_minutes (
    room               TEXT    NOT NULL,
    minute             INTEGER NOT NULL, -- unix seconds of the minute's start
    arrivals           INTEGER NOT NULL DEFAULT 0,
    admissions         INTEGER NOT NULL DEFAULT 0,
    abandons           INTEGER NOT NULL DEFAULT 0,
    expired            INTEGER NOT NULL DEFAULT 0,
    left_active        INTEGER NOT NULL DEFAULT 0,
    holds_placed       INTEGER NOT NULL DEFAULT 0,
    holds_released     INTEGER NOT NULL DEFAULT 0,
    holds_expired      INTEGER NOT NULL DEFAULT 0,
    submitted          INTEGER NOT NULL DEFAULT 0,
    confirmed          INTEGER NOT NULL DEFAULT 0,
    rejected           INTEGER NOT NULL DEFAULT 0,
    revenue            INTEGER NOT NULL DEFAULT 0,
    waits              INTEGER NOT NULL DEFAULT 0,
    wait_sum_ms        INTEGER NOT NULL DEFAULT 0,
    etas               INTEGER NOT NULL DEFAULT 0,
    eta_err_sum_ms     INTEGER NOT NULL DEFAULT 0,
    eta_abs_err_sum_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (room, minute)
) WITHOUT ROWID;

CREATE INDEX analytics_minutes_minute ON analytics_minutes (minute); -- the prune

-- The time-in-queue histogram of each room and minute (analytics.Hist).
CREATE TABLE analytics_wait (
    room   TEXT    NOT NULL,
    minute INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (room, minute, bucket)
) WITHOUT ROWID;

CREATE INDEX analytics_wait_minute ON analytics_wait (minute); -- the prune

-- Waiting visitors' entries until their admission, and admissions whose
-- entry has not arrived yet (or MaxWait).
CREATE TABLE analytics_entries (
    room    TEXT    NOT NULL,
    visitor TEXT    NOT NULL,
    at      INTEGER NOT NULL, -- entered, unix nanoseconds; 0: not yet known
    eta_ms  INTEGER NOT NULL,
    admitted_at INTEGER NOT NULL, -- unix nanoseconds; 0: not yet admitted
    since   INTEGER NOT NULL, -- the earlier known of the two, for pruning
    PRIMARY KEY (room, visitor)
) WITHOUT ROWID;
CREATE INDEX analytics_entries_since ON analytics_entries (since);

-- Each room's recent events (the console's timeline), as published.
CREATE TABLE analytics_events (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    room TEXT    NOT NULL,
    body TEXT    NOT NULL -- the event's JSON
);
CREATE INDEX analytics_events_room ON analytics_events (room, seq);
