-- The catalog and decided reservations. Times are unix microseconds (UTC).

CREATE TABLE concert (
	concert_id INTEGER PRIMARY KEY,
	title      TEXT    NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE schedule (
	schedule_id INTEGER PRIMARY KEY,
	concert_id  INTEGER NOT NULL REFERENCES concert (concert_id),
	starts_at   INTEGER NOT NULL,
	room        TEXT    NOT NULL CHECK (room <> '')
) STRICT;

CREATE INDEX schedule_concert ON schedule (concert_id);

-- Seats are sold by Decide's conditional UPDATE:
--   UPDATE seat SET status = 'SOLD', reservation_id = ?
--    WHERE schedule_id = ? AND seat_id = ? AND status IN ('AVAILABLE', 'HELD')
CREATE TABLE seat (
	seat_id        INTEGER PRIMARY KEY,
	schedule_id    INTEGER NOT NULL REFERENCES schedule (schedule_id),
	section        TEXT    NOT NULL,
	seat_row       TEXT    NOT NULL,
	seat_number    INTEGER NOT NULL,
	price          INTEGER NOT NULL CHECK (price >= 0),
	status         TEXT    NOT NULL DEFAULT 'AVAILABLE' CHECK (status IN ('AVAILABLE', 'HELD', 'SOLD')),
	reservation_id TEXT,
	UNIQUE (schedule_id, section, seat_row, seat_number)
) STRICT;

-- A reservation row is written once, when it is decided; its schedule is
-- not a foreign key because a reservation naming an unknown schedule is
-- decided (rejected) and kept like any other.
CREATE TABLE reservation (
	reservation_id TEXT    PRIMARY KEY,
	visitor        TEXT    NOT NULL,
	schedule_id    INTEGER NOT NULL,
	seat_ids       TEXT    NOT NULL, -- JSON array of seat ids, as requested
	status         TEXT    NOT NULL CHECK (status IN ('confirmed', 'rejected')),
	reason         TEXT    NOT NULL DEFAULT '',
	created_at     INTEGER NOT NULL,
	decided_at     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
