-- General-admission stock: units of a schedule without seat numbers, sold
-- by Decide's conditional UPDATE:
--   UPDATE stock SET sold = sold + ? WHERE schedule_id = ? AND sold + ? <= total
CREATE TABLE stock (
	schedule_id INTEGER PRIMARY KEY REFERENCES schedule (schedule_id),
	total       INTEGER NOT NULL CHECK (total >= 0),
	sold        INTEGER NOT NULL DEFAULT 0 CHECK (sold >= 0 AND sold <= total)
) STRICT;

-- The units a stock reservation asked for (0 for a seat reservation).
ALTER TABLE reservation ADD COLUMN quantity INTEGER NOT NULL DEFAULT 0;
