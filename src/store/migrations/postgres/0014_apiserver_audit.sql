-- PostgreSQL's version of ../0014_apiserver_audit.sql. The times here are
-- RFC 3339 text (UTC, microseconds, `Z`) compared as strings, as the
-- audit's own: COLLATE "C" orders them byte by byte, as SQLite does.

-- What kind of row: '' for a request, 'alert' for a bypass alert (an API
-- server event made with portcullis's ServiceAccount that portcullis never
-- sent), 'system' for portcullis's own requests to a cluster.
ALTER TABLE audit ADD COLUMN kind TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_by_kind ON audit (kind, started_at);

-- The API server's own audit events, only what the join needs: never a
-- request or response body. One row per request stage (auditID + stage), so
-- a batch delivered twice is stored once. "user" is a reserved word here
-- (unquoted, it is the current role): always quote it.
CREATE TABLE apiserver_audit (
    audit_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    cluster TEXT NOT NULL,
    verb TEXT NOT NULL,
    request_uri TEXT NOT NULL,
    "user" TEXT NOT NULL,
    impersonated_user TEXT NOT NULL,
    impersonated_groups TEXT NOT NULL,          -- a JSON array of strings
    source_ips TEXT NOT NULL,                   -- a JSON array of strings
    user_agent TEXT NOT NULL,
    code BIGINT NOT NULL,                       -- 0: no response status
    decision TEXT NOT NULL,                     -- authorization.k8s.io/decision
    reason TEXT NOT NULL,                       -- authorization.k8s.io/reason
    received_at TEXT COLLATE "C" NOT NULL,      -- requestReceivedTimestamp
    stage_at TEXT COLLATE "C" NOT NULL,         -- stageTimestamp
    arrived_at TEXT COLLATE "C" NOT NULL,       -- when portcullis got it
    checked TEXT NOT NULL DEFAULT '',           -- '', 'matched' or 'alert'
    PRIMARY KEY (audit_id, stage)
);
CREATE INDEX apiserver_audit_unchecked ON apiserver_audit (checked, arrived_at);

-- Requests portcullis forwarded (or sent itself: kind 'system'), recorded
-- when they leave rather than when their row is written, so that a watch
-- or exec still open has a record the API server's events can match.
CREATE TABLE audit_forwarded (
    id TEXT PRIMARY KEY,
    cluster TEXT NOT NULL,
    kind TEXT NOT NULL,
    at TEXT COLLATE "C" NOT NULL
);
CREATE INDEX audit_forwarded_by_time ON audit_forwarded (at);
