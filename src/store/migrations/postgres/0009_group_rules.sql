-- PostgreSQL's version of ../0009_group_rules.sql.

-- Group rules: people signed in with `group` (from the identity provider's
-- groups claim) hold `role` on `cluster`, in `namespace` or cluster-wide.
CREATE TABLE group_rules (
    id TEXT PRIMARY KEY,
    group_name TEXT NOT NULL,
    cluster TEXT NOT NULL,
    namespace TEXT,
    role TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
-- A grant a rule made (one per person and rule, extended at each sign-in,
-- revoked when the person leaves the group or the rule goes); NULL for
-- every other grant.
ALTER TABLE grants ADD COLUMN rule_id TEXT;
CREATE INDEX grants_by_rule ON grants (rule_id, kind, subject);
