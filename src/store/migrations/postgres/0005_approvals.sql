-- PostgreSQL's version of ../0005_approvals.sql.

-- Held writes: a write whose caller's policy asks for a person's approval,
-- dry-run first and kept here until decided, run once, or expired.
-- `request` is the JSON of what never changes (who asked, what, where, the
-- preview with Secret values hidden, the preconditions); `body` is the
-- request body sealed with the [approvals] key, deleted once the write ran
-- or expired. `outcome` is JSON too.
CREATE TABLE held_writes (
    id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'executing', 'executed')),
    request TEXT NOT NULL,
    body BYTEA,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    decided_by TEXT,
    decided_at TIMESTAMPTZ,
    decision_reason TEXT,
    executed_at TIMESTAMPTZ,
    outcome TEXT,
    answered BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX held_writes_by_digest ON held_writes (digest, answered);
CREATE INDEX held_writes_by_state ON held_writes (state, created_at);
