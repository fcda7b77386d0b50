-- PostgreSQL's version of ../0004_reconcile_access.sql.

-- Each cluster's last reconcile status (JSON of reconcile::status::ClusterStatus),
-- written by whichever process ran the pass.
CREATE TABLE cluster_status (
    cluster TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- Access requests: a person, bot or agent asks for a role; a person decides.
CREATE TABLE access_requests (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    agent_id TEXT REFERENCES agents (id),
    cluster TEXT NOT NULL,
    namespace TEXT,
    role TEXT NOT NULL,
    duration_secs BIGINT NOT NULL,
    reason TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    decided_by TEXT,
    decided_at TIMESTAMPTZ,
    decision_reason TEXT,
    grant_id TEXT REFERENCES grants (id),
    FOREIGN KEY (kind, subject) REFERENCES principals (kind, name)
);
CREATE INDEX access_requests_by_state ON access_requests (state, created_at);
