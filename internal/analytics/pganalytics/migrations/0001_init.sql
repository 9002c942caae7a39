-- Event IDs already counted (idempotence), with the event's time for pruning.
CREATE TABLE analytics_seen (
    id TEXT    PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL
);
CREATE INDEX analytics_seen_at ON analytics_seen (at);

-- One row per room and minute.
CREATE TABLE analytics_minutes (
    room               TEXT    NOT NULL,
    minute             TIMESTAMPTZ NOT NULL,
    arrivals           BIGINT NOT NULL DEFAULT 0,
    admissions         BIGINT NOT NULL DEFAULT 0,
    abandons           BIGINT NOT NULL DEFAULT 0,
    expired            BIGINT NOT NULL DEFAULT 0,
    left_active        BIGINT NOT NULL DEFAULT 0,
    holds_placed       BIGINT NOT NULL DEFAULT 0,
    holds_released     BIGINT NOT NULL DEFAULT 0,
    holds_expired      BIGINT NOT NULL DEFAULT 0,
    submitted          BIGINT NOT NULL DEFAULT 0,
    confirmed          BIGINT NOT NULL DEFAULT 0,
    rejected           BIGINT NOT NULL DEFAULT 0,
    revenue            BIGINT NOT NULL DEFAULT 0,
    waits              BIGINT NOT NULL DEFAULT 0,
    wait_sum_ms        BIGINT NOT NULL DEFAULT 0,
    etas               BIGINT NOT NULL DEFAULT 0,
    eta_err_sum_ms     BIGINT NOT NULL DEFAULT 0,
    eta_abs_err_sum_ms BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (room, minute)
);

CREATE INDEX analytics_minutes_minute ON analytics_minutes (minute); -- the prune

-- The time-in-queue histogram of each room and minute (analytics.Hist).
CREATE TABLE analytics_wait (
    room   TEXT    NOT NULL,
    minute TIMESTAMPTZ NOT NULL,
    bucket BIGINT NOT NULL,
    n      BIGINT NOT NULL,
    PRIMARY KEY (room, minute, bucket)
);

CREATE INDEX analytics_wait_minute ON analytics_wait (minute); -- the prune

-- Waiting visitors' entries until their admission, and admissions whose
-- entry has not arrived yet (or MaxWait).
CREATE TABLE analytics_entries (
    room    TEXT    NOT NULL,
    visitor TEXT    NOT NULL,
    at      TIMESTAMPTZ,          -- entered; NULL: not yet known
    eta_ms  BIGINT NOT NULL,
    admitted_at TIMESTAMPTZ,      -- NULL: not yet admitted
    since   TIMESTAMPTZ NOT NULL, -- the earlier known of the two, for pruning
    PRIMARY KEY (room, visitor)
);
CREATE INDEX analytics_entries_since ON analytics_entries (since);

-- Each room's recent events (the console's timeline), as published.
CREATE TABLE analytics_events (
    seq  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    room TEXT    NOT NULL,
    body TEXT    NOT NULL -- the event as JSON
);
CREATE INDEX analytics_events_room ON analytics_events (room, seq);
