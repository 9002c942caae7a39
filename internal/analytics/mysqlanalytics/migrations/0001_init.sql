-- The analytics tables, beside mysqlbooking's in the same database, with
-- their own migrations table. Every statement may run again (IF NOT
-- EXISTS): MySQL commits DDL at once. Times are DATETIME(6) in UTC; event
-- ids VARBINARY (compared byte for byte); names utf8mb4_bin.

-- Event IDs already counted (idempotence), with the event's time for
-- pruning. claim is the token of the transaction that recorded the id:
-- Claim inserts with its own token and reads back the ids that carry it.
CREATE TABLE IF NOT EXISTS analytics_seen (
	id    VARBINARY(512) NOT NULL PRIMARY KEY,
	at    DATETIME(6)    NOT NULL,
	claim BINARY(16)     NOT NULL,
	KEY analytics_seen_at (at)
) ENGINE = InnoDB;

-- One row per room and minute.
CREATE TABLE IF NOT EXISTS analytics_minutes (
	room               VARCHAR(255) NOT NULL,
	minute             DATETIME(6)  NOT NULL,
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
	PRIMARY KEY (room, minute),
	KEY analytics_minutes_minute (minute) -- the prune
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The time-in-queue histogram of each room and minute (analytics.Hist).
CREATE TABLE IF NOT EXISTS analytics_wait (
	room   VARCHAR(255) NOT NULL,
	minute DATETIME(6)  NOT NULL,
	bucket BIGINT       NOT NULL,
	n      BIGINT       NOT NULL,
	PRIMARY KEY (room, minute, bucket),
	KEY analytics_wait_minute (minute) -- the prune
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Waiting visitors' entries until their admission, and admissions whose
-- entry has not arrived yet (or MaxWait).
CREATE TABLE IF NOT EXISTS analytics_entries (
	room        VARCHAR(255) NOT NULL,
	visitor     VARCHAR(255) NOT NULL,
	at          DATETIME(6),          -- entered; NULL: not yet known
	eta_ms      BIGINT       NOT NULL,
	admitted_at DATETIME(6),          -- NULL: not yet admitted
	since       DATETIME(6)  NOT NULL, -- the earlier known of the two, for pruning
	PRIMARY KEY (room, visitor),
	KEY analytics_entries_since (since)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Each room's recent events (the console's timeline), as published.
CREATE TABLE IF NOT EXISTS analytics_events (
	seq  BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	room VARCHAR(255) NOT NULL,
	body MEDIUMTEXT   NOT NULL, -- the event as JSON
	KEY analytics_events_room (room, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
