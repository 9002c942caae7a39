-- The catalog, decided reservations, stock and the outbox (the state of
-- pgbooking's migrations 0001 to 0004, in one file). MySQL commits each DDL
-- statement at once, so every statement here may run again after a
-- failure (IF NOT EXISTS, DROP … IF EXISTS).
--
-- Dialect: ids are BIGINT AUTO_INCREMENT; times DATETIME(6) in UTC (the
-- session's time_zone is '+00:00'); seat_ids a JSON array in TEXT;
-- reservation ids VARBINARY so that they compare, and are unique, byte for
-- byte (no collation, no PAD SPACE); names utf8mb4_bin (case-sensitive).

CREATE TABLE IF NOT EXISTS concert (
	concert_id BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	title      TEXT         NOT NULL,
	created_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS schedule (
	schedule_id BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	concert_id  BIGINT       NOT NULL,
	starts_at   DATETIME(6)  NOT NULL,
	room        VARCHAR(255) NOT NULL CHECK (room <> ''),
	KEY schedule_concert_id (concert_id, schedule_id),
	CONSTRAINT schedule_concert FOREIGN KEY (concert_id) REFERENCES concert (concert_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Seats are sold by Decide's conditional UPDATE:
--   UPDATE seat SET status = 'SOLD', reservation_id = ?
--    WHERE schedule_id = ? AND seat_id IN (…) AND status IN ('AVAILABLE', 'HELD')
-- No secondary index covers status or reservation_id: a sale writes the
-- clustered row only.
CREATE TABLE IF NOT EXISTS seat (
	seat_id        BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
	schedule_id    BIGINT          NOT NULL,
	section        VARCHAR(100)    NOT NULL,
	seat_row       VARCHAR(100)    NOT NULL,
	seat_number    INT             NOT NULL,
	price          BIGINT          NOT NULL CHECK (price >= 0),
	status         VARCHAR(9)      NOT NULL DEFAULT 'AVAILABLE' CHECK (status IN ('AVAILABLE', 'HELD', 'SOLD')),
	reservation_id VARBINARY(255),
	UNIQUE KEY seat_place (schedule_id, section, seat_row, seat_number),
	CONSTRAINT seat_schedule FOREIGN KEY (schedule_id) REFERENCES schedule (schedule_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A reservation row is written once, when it is decided; its schedule is
-- not a foreign key because a reservation naming an unknown schedule is
-- decided (rejected) and kept like any other. quantity: the units of a
-- stock reservation (0 for seats).
CREATE TABLE IF NOT EXISTS reservation (
	reservation_id VARBINARY(255) NOT NULL PRIMARY KEY,
	visitor        VARCHAR(255)   NOT NULL,
	schedule_id    BIGINT         NOT NULL,
	seat_ids       TEXT           NOT NULL, -- JSON array, as requested
	quantity       BIGINT         NOT NULL DEFAULT 0,
	status         VARCHAR(9)     NOT NULL CHECK (status IN ('confirmed', 'rejected')),
	reason         VARCHAR(32)    NOT NULL DEFAULT '',
	created_at     DATETIME(6)    NOT NULL,
	decided_at     DATETIME(6)    NOT NULL,
	KEY reservation_schedule (schedule_id, reservation_id),
	KEY reservation_schedule_status (schedule_id, status, reservation_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- General-admission stock, sold by Decide's conditional UPDATE:
--   UPDATE stock SET sold = sold + ? WHERE schedule_id = ? AND sold + ? <= total
CREATE TABLE IF NOT EXISTS stock (
	schedule_id BIGINT NOT NULL PRIMARY KEY,
	total       BIGINT NOT NULL CHECK (total >= 0),
	sold        BIGINT NOT NULL DEFAULT 0 CHECK (sold >= 0 AND sold <= total),
	CONSTRAINT stock_schedule FOREIGN KEY (schedule_id) REFERENCES schedule (schedule_id)
) ENGINE = InnoDB;

-- The outbox (booking.Store.Outbox): events written in the transaction
-- that made the change, removed once the relay published them. seq is the
-- order of the writes; data is the event's Data as JSON text. Decide writes
-- a batch's events with one INSERT … SELECT (outboxStmt in decide.go), not
-- a trigger: MySQL has only row triggers, and one per decision halved the
-- confirmations a second.
CREATE TABLE IF NOT EXISTS outbox (
	seq      BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
	event_id VARBINARY(300) NOT NULL,
	type     VARCHAR(64)    NOT NULL,
	room     VARCHAR(255)   NOT NULL,
	at       DATETIME(6)    NOT NULL,
	visitor  VARCHAR(255)   NOT NULL DEFAULT '',
	data     TEXT           NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
