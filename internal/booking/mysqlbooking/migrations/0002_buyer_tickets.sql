-- Tickets counted to each buyer (visitor) per schedule by Decide, for
-- reservations that carry a buyer limit; sold by its conditional UPDATE:
--   UPDATE buyer_tickets SET tickets = tickets + ?
--    WHERE schedule_id = ? AND buyer = ? AND tickets + ? <= ?
CREATE TABLE IF NOT EXISTS buyer_tickets (
	schedule_id BIGINT       NOT NULL,
	buyer       VARCHAR(255) NOT NULL,
	tickets     BIGINT       NOT NULL DEFAULT 0 CHECK (tickets >= 0),
	PRIMARY KEY (schedule_id, buyer)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
