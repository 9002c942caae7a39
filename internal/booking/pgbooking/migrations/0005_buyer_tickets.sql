-- Tickets counted to each buyer (visitor) per schedule by Decide, for
-- reservations that carry a buyer limit (buyerStmt's conditional upsert).
CREATE TABLE buyer_tickets (
	schedule_id BIGINT NOT NULL,
	buyer       TEXT   NOT NULL,
	tickets     BIGINT NOT NULL DEFAULT 0 CHECK (tickets >= 0),
	PRIMARY KEY (schedule_id, buyer)
);
