-- Clients registered through RFC 7591 Dynamic Client Registration (a
-- client with a metadata document URL is not stored: it is fetched). A
-- client unused for `[oauth] unused_client_ttl` is deleted.
CREATE TABLE oauth_clients (
    client_id TEXT PRIMARY KEY,
    client_name TEXT NOT NULL,
    redirect_uris TEXT NOT NULL, -- a JSON array of strings
    created_at TEXT NOT NULL,
    last_used_at TEXT NOT NULL
);

-- Credentials issued with an origin: where they are accepted (NULL:
-- wherever their owner may go; 'mcp': /mcp only, an OAuth access token) and
-- what issued them, named in the audit row of each of their requests.
ALTER TABLE credentials ADD COLUMN audience TEXT;
ALTER TABLE credentials ADD COLUMN via TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN via TEXT NOT NULL DEFAULT '';

-- Agent sessions: the delegated agents a person's OAuth consent makes.
ALTER TABLE agents ADD COLUMN client_id TEXT;
ALTER TABLE agents ADD COLUMN client_name TEXT;
ALTER TABLE agents ADD COLUMN expires_at TEXT;

-- A grant narrowed for an agent session (a role whose rules are a subset
-- of its parent's): it ends whenever its parent ends.
ALTER TABLE grants ADD COLUMN parent_id TEXT REFERENCES grants (id);
CREATE TRIGGER grants_end_with_their_parent AFTER UPDATE OF revoked_at ON grants
WHEN NEW.revoked_at IS NOT NULL
BEGIN
    UPDATE grants SET revoked_at = NEW.revoked_at WHERE parent_id = NEW.id AND revoked_at IS NULL;
END;

-- Authorization codes: one use, ten minutes; only their SHA-256 is kept.
-- After the exchange the row stays (used_at, agent_id) until it expires, so
-- a second exchange is recognised and ends the session it made.
CREATE TABLE oauth_codes (
    code_sha256 TEXT PRIMARY KEY,
    consent TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT,
    agent_id TEXT REFERENCES agents (id)
);

-- Refresh tokens: one use each (rotated); a used one presented again ends
-- the whole agent session.
CREATE TABLE oauth_refresh_tokens (
    token_sha256 TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents (id),
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT
);
CREATE INDEX oauth_refresh_tokens_by_agent ON oauth_refresh_tokens (agent_id)
