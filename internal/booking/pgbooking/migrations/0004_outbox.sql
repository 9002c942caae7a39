-- The outbox (booking.Store.Outbox): events written in the transaction
-- that made the change, removed once the relay published them. seq is the
-- order of the writes; data is the event's Data as JSON text.
CREATE TABLE outbox (
	seq      BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id TEXT        NOT NULL,
	type     TEXT        NOT NULL,
	room     TEXT        NOT NULL,
	at       TIMESTAMPTZ NOT NULL,
	visitor  TEXT        NOT NULL DEFAULT '',
	data     TEXT        NOT NULL DEFAULT '{}'
);

-- A decision's event, with every reservation Decide stores: in the same
-- transaction (rolled back with its savepoint or transaction), once (a
-- redelivery's INSERT … ON CONFLICT DO NOTHING inserts no row, and the
-- transition table holds only inserted rows). One statement-level trigger
-- per INSERT, so a batch of 64 decisions costs one more INSERT … SELECT,
-- not 64. json_strip_nulls drops the zero fields. search_path is the one
-- of the migration, whatever the caller's. The amount reads the seats by
-- their primary key only: a confirmed reservation's seats are all of its
-- schedule (the sale's UPDATE checked), and a condition on schedule_id
-- would let the planner scan the schedule's seats through the UNIQUE index.
CREATE FUNCTION reservation_outbox() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO outbox (event_id, type, room, at, visitor, data)
	SELECT d.reservation_id || '.' || d.status,
	       'reservation_' || d.status,
	       COALESCE(s.room, 'schedule-' || d.schedule_id),
	       d.decided_at,
	       d.visitor,
	       json_strip_nulls(json_build_object(
	           'reservation', d.reservation_id,
	           'schedule', NULLIF(d.schedule_id, 0),
	           'units', NULLIF(CASE WHEN d.quantity <> 0 THEN d.quantity ELSE cardinality(d.seat_ids) END, 0),
	           'amount', CASE WHEN d.status = 'confirmed' AND d.quantity = 0 THEN NULLIF((
	               SELECT sum(price) FROM seat WHERE seat.seat_id = ANY (d.seat_ids)), 0) END
	       ))::text
	  FROM decided d LEFT JOIN schedule s ON s.schedule_id = d.schedule_id;
	RETURN NULL;
END
$$;

CREATE TRIGGER reservation_outbox AFTER INSERT ON reservation
	REFERENCING NEW TABLE AS decided
	FOR EACH STATEMENT EXECUTE FUNCTION reservation_outbox();
