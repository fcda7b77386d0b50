-- The credential of the web sign-in session an agent session was consented
-- in: revoking that credential (a stolen token someone signed in with)
-- ends the agent sessions consented under it, as it ends the web sessions.
-- NULL for agents added otherwise, and for consents before this column.
ALTER TABLE agents ADD COLUMN consented_with TEXT;
CREATE INDEX agents_by_consent ON agents (consented_with) WHERE consented_with IS NOT NULL;

-- Whom a client's request was sent as, on its forwarded record: a stream
-- still open has no row yet, and the bypass check compares whom the API
-- server saw it impersonate with this. Empty in the previous release's.
ALTER TABLE audit_forwarded ADD COLUMN principal_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_forwarded ADD COLUMN login TEXT NOT NULL DEFAULT '';

-- The API server's events keyed by request, not by audit id alone: the
-- API server takes a client's `Audit-ID` as it is, so a request made
-- around portcullis under an id portcullis used was a "duplicate" and
-- dropped unseen. A request is its cluster, its audit id and its
-- requestReceivedTimestamp; a batch delivered twice is still stored once.
ALTER TABLE apiserver_audit DROP CONSTRAINT apiserver_audit_pkey;
ALTER TABLE apiserver_audit ADD PRIMARY KEY (audit_id, cluster, received_at, stage)
