-- Tickets counted to each buyer (visitor) per schedule by Decide, for
-- reservations that carry a buyer limit; sold by its conditional UPDATE:
--   UPDATE buyer_tickets SET tickets = tickets + ?1
--    WHERE schedule_id = ?2 AND buyer = ?3 AND tickets + ?1 <= ?4
CREATE TABLE buyer_tickets (
	schedule_id INTEGER NOT NULL,
	buyer       TEXT    NOT NULL,
	tickets     INTEGER NOT NULL DEFAULT 0 CHECK (tickets >= 0),
	PRIMARY KEY (schedule_id, buyer)
) STRICT, WITHOUT ROWID;
