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
-- The previous release's insert (ON CONFLICT DO NOTHING) and its queries by
-- audit id work on this table as they did.
CREATE TABLE apiserver_audit_by_request (
    audit_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    cluster TEXT NOT NULL,
    verb TEXT NOT NULL,
    request_uri TEXT NOT NULL,
    user TEXT NOT NULL,
    impersonated_user TEXT NOT NULL,
    impersonated_groups TEXT NOT NULL, -- a JSON array of strings
    source_ips TEXT NOT NULL,          -- a JSON array of strings
    user_agent TEXT NOT NULL,
    code INTEGER NOT NULL,             -- 0: no response status
    decision TEXT NOT NULL,            -- authorization.k8s.io/decision
    reason TEXT NOT NULL,              -- authorization.k8s.io/reason
    received_at TEXT NOT NULL,         -- requestReceivedTimestamp
    stage_at TEXT NOT NULL,            -- stageTimestamp
    arrived_at TEXT NOT NULL,          -- when portcullis got it
    checked TEXT NOT NULL DEFAULT '',  -- '', 'matched' or 'alert'
    PRIMARY KEY (audit_id, cluster, received_at, stage)
);
INSERT INTO apiserver_audit_by_request (audit_id, stage, cluster, verb, request_uri, user, impersonated_user,
    impersonated_groups, source_ips, user_agent, code, decision, reason, received_at, stage_at, arrived_at, checked)
SELECT audit_id, stage, cluster, verb, request_uri, user, impersonated_user,
    impersonated_groups, source_ips, user_agent, code, decision, reason, received_at, stage_at, arrived_at, checked
FROM apiserver_audit;
DROP TABLE apiserver_audit;
ALTER TABLE apiserver_audit_by_request RENAME TO apiserver_audit;
CREATE INDEX apiserver_audit_unchecked ON apiserver_audit (checked, arrived_at)
