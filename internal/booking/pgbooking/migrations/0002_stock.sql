-- General-admission stock: units of a schedule without seat numbers, sold
-- by Decide's conditional UPDATE:
--   UPDATE stock SET sold = sold + $1 WHERE schedule_id = $2 AND sold + $1 <= total
CREATE TABLE stock (
	schedule_id BIGINT PRIMARY KEY REFERENCES schedule (schedule_id),
	total       BIGINT NOT NULL CHECK (total >= 0),
	sold        BIGINT NOT NULL DEFAULT 0 CHECK (sold >= 0 AND sold <= total)
);

-- The units a stock reservation asked for (0 for a seat reservation).
ALTER TABLE reservation ADD COLUMN quantity BIGINT NOT NULL DEFAULT 0;
