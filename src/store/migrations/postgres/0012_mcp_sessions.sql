-- PostgreSQL's version of ../0012_mcp_sessions.sql.

-- Sessions of the 2025-11-25 MCP revision (`Mcp-Session-Id`), kept here so
-- that they survive a restart and work on any replica sharing the store.
-- `id_sha256` is the SHA-256 (hex) of the session id: a copy of the store
-- names no live session. `state` is the JSON of rmcp's `SessionState`: the
-- client's `initialize` parameters (client info, capabilities, protocol
-- version), replayed to restore the session; never a token, which each
-- request brings on its own.
CREATE TABLE mcp_sessions (
    id_sha256 TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX mcp_sessions_by_last_use ON mcp_sessions (last_used_at);

-- Which agent began each session: a request naming another agent's session
-- is answered as if the session did not exist (it could otherwise resume
-- that session's stream or end it).
CREATE TABLE mcp_session_owners (
    id_sha256 TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
