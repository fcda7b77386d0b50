-- People who may read everyone's audit (GET /audit).
ALTER TABLE principals ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;

-- One row per request, in hash-chain order (seq).
CREATE TABLE audit (
    seq INTEGER PRIMARY KEY,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    "id" TEXT NOT NULL,
    "started_at" TEXT NOT NULL,
    "ended_at" TEXT NOT NULL,
    "cluster" TEXT NOT NULL,
    "principal_kind" TEXT NOT NULL,
    "login" TEXT NOT NULL,
    "credential_id" TEXT NOT NULL,
    "credential_prefix" TEXT NOT NULL,
    "session" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "client" TEXT NOT NULL,
    "method" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "query" TEXT NOT NULL,
    "verb" TEXT NOT NULL,
    "api_group" TEXT NOT NULL,
    "api_version" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "subresource" TEXT NOT NULL,
    "namespace" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "code" INTEGER NOT NULL,
    "reason" TEXT NOT NULL,
    "refused" TEXT NOT NULL,
    "bytes_in" INTEGER NOT NULL,
    "bytes_out" INTEGER NOT NULL,
    "duration_ms" INTEGER NOT NULL,
    "is_write" INTEGER NOT NULL,
    "discovery" INTEGER NOT NULL,
    "dry_run" INTEGER NOT NULL,
    "redacted" INTEGER NOT NULL,
    "truncated" INTEGER NOT NULL,
    "secret_revealed" INTEGER NOT NULL,
    "held" INTEGER NOT NULL,
    "approved" INTEGER NOT NULL
);
CREATE INDEX audit_by_id ON audit ("id");
CREATE INDEX audit_by_time ON audit ("started_at");
CREATE INDEX audit_by_login ON audit ("login", "started_at");
CREATE INDEX audit_by_namespace ON audit ("cluster", "namespace", "started_at");

-- Writes committed before they are forwarded, until their row replaces them.
CREATE TABLE audit_intents (
    "id" TEXT PRIMARY KEY,
    "row" TEXT NOT NULL
);

-- The last row removed by retention: where verification starts.
CREATE TABLE audit_anchor (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL
)
