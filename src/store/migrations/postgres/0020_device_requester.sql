-- Where and when a device code was asked for: the page where a person
-- allows it shows both, so that a code someone else asked for (and sent
-- them) is seen for what it is. Rows an older release gives have neither.
ALTER TABLE device_codes ADD COLUMN requested_from TEXT NOT NULL DEFAULT '';
ALTER TABLE device_codes ADD COLUMN requested_at TIMESTAMPTZ;
