-- Who asked for each held write, beside its request: the held writes of one
-- requester are counted (a requester has at most a few open at once) and
-- listed without reading every held write's request and preview. Empty in
-- rows the previous release writes during a rolling upgrade.
ALTER TABLE held_writes ADD COLUMN requester TEXT NOT NULL DEFAULT '';
UPDATE held_writes SET requester = COALESCE(json_extract(request, '$.requester'), '');
CREATE INDEX held_writes_by_requester ON held_writes (requester, state, created_at);
