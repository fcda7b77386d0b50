-- PostgreSQL's version of ../0001_identity.sql: the same tables and columns.
-- Flags are BOOLEAN and times TIMESTAMPTZ (the Rust code writes them as a
-- bool and a DateTime<Utc>).
CREATE TABLE principals (
    kind TEXT NOT NULL CHECK (kind IN ('person', 'bot')),
    name TEXT NOT NULL,
    disabled BOOLEAN NOT NULL DEFAULT FALSE,
    writes_need_approval BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE TABLE credentials (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    display_prefix TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ,
    last_used_at TIMESTAMPTZ,
    revoked_at TIMESTAMPTZ,
    FOREIGN KEY (kind, owner) REFERENCES principals (kind, name)
);
CREATE TABLE grants (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT,
    role TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    granted_by TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ,
    FOREIGN KEY (kind, subject) REFERENCES principals (kind, name)
);
CREATE INDEX grants_by_subject ON grants (kind, subject, cluster);
