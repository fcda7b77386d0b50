-- PostgreSQL's version of ../0006_web_sessions.sql.

-- Sign-in sessions of the approval pages, kept here so that signing out or
-- disabling the person ends them at once. `id_sha256` is the SHA-256 (hex) of
-- the random id in the person's cookie: the id itself is never stored, so a
-- copy of the store signs no one in.
CREATE TABLE web_sessions (
    id_sha256 TEXT PRIMARY KEY,
    login TEXT NOT NULL,
    credential_id TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX web_sessions_by_login ON web_sessions (login);
