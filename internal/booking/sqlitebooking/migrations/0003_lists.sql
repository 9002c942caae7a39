-- The operator's lists (booking.Store.ListReservations): a schedule's
-- reservations by id, all of them or of one status. Schedules by concert
-- already come in id order from schedule_concert (its rows end with the
-- rowid, which is schedule_id).
CREATE INDEX reservation_schedule ON reservation (schedule_id, reservation_id);
CREATE INDEX reservation_schedule_status ON reservation (schedule_id, status, reservation_id);
