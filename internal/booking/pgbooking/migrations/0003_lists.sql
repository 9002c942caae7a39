-- The operator's lists (booking.Store.ListSchedules, ListReservations).
-- Reservation ids are ordered in byte order (COLLATE "C"), whatever the
-- database's collation, so that a cursor means the same on every backend.
CREATE INDEX schedule_concert_id ON schedule (concert_id, schedule_id);
DROP INDEX schedule_concert;
CREATE INDEX reservation_schedule ON reservation (schedule_id, reservation_id COLLATE "C");
CREATE INDEX reservation_schedule_status ON reservation (schedule_id, status, reservation_id COLLATE "C");
