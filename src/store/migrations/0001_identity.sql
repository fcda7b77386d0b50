CREATE TABLE principals (
    kind TEXT NOT NULL CHECK (kind IN ('person', 'bot')),
    name TEXT NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0,
    writes_need_approval INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE TABLE credentials (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    display_prefix TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    last_used_at TEXT,
    revoked_at TEXT,
    FOREIGN KEY (kind, owner) REFERENCES principals (kind, name)
);
CREATE TABLE grants (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT,
    role TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    FOREIGN KEY (kind, subject) REFERENCES principals (kind, name)
);
CREATE INDEX grants_by_subject ON grants (kind, subject, cluster)
