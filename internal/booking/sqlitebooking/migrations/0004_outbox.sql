-- The outbox (booking.Store.Outbox): events written in the transaction
-- that made the change, removed once the relay published them. seq is the
-- rowid: the order of the writes. data is the event's Data as JSON.
CREATE TABLE outbox (
	seq      INTEGER PRIMARY KEY,
	event_id TEXT    NOT NULL,
	type     TEXT    NOT NULL,
	room     TEXT    NOT NULL,
	at       INTEGER NOT NULL,
	visitor  TEXT    NOT NULL DEFAULT '',
	data     TEXT    NOT NULL DEFAULT '{}'
) STRICT;

-- A decision's event, with every reservation Decide stores: in the same
-- transaction (rolled back with its savepoint or transaction), once (a
-- redelivery inserts no reservation row). json_patch('{}', …) drops the
-- null (zero) fields. The amount reads the seats by their primary key only:
-- a confirmed reservation's seats are all of its schedule (the sale's
-- UPDATE checked), and a condition on schedule_id would let the planner
-- scan the schedule's seats through the UNIQUE index instead.
CREATE TRIGGER reservation_outbox AFTER INSERT ON reservation
BEGIN
	INSERT INTO outbox (event_id, type, room, at, visitor, data)
	VALUES (
		NEW.reservation_id || '.' || NEW.status,
		'reservation_' || NEW.status,
		COALESCE((SELECT room FROM schedule WHERE schedule_id = NEW.schedule_id), 'schedule-' || NEW.schedule_id),
		NEW.decided_at,
		NEW.visitor,
		json_patch('{}', json_object(
			'reservation', NEW.reservation_id,
			'schedule', NULLIF(NEW.schedule_id, 0),
			'units', NULLIF(CASE WHEN NEW.quantity <> 0 THEN NEW.quantity ELSE json_array_length(NEW.seat_ids) END, 0),
			'amount', CASE WHEN NEW.status = 'confirmed' AND NEW.quantity = 0 THEN NULLIF((
				SELECT sum(price) FROM seat WHERE seat_id IN (SELECT value FROM json_each(NEW.seat_ids))), 0) END
		))
	);
END;
