-- PostgreSQL's version of ../0003_agents.sql.

-- AI agents act for a person (delegated: only the grants listed in
-- agent_grants) or for a bot (all of the bot's grants).
CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    writes_need_approval BOOLEAN NOT NULL DEFAULT FALSE,
    disabled BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (kind, owner, name),
    FOREIGN KEY (kind, owner) REFERENCES principals (kind, name)
);
CREATE TABLE agent_grants (
    agent_id TEXT NOT NULL REFERENCES agents (id),
    grant_id TEXT NOT NULL REFERENCES grants (id),
    PRIMARY KEY (agent_id, grant_id)
);
ALTER TABLE credentials ADD COLUMN agent_id TEXT REFERENCES agents (id);
