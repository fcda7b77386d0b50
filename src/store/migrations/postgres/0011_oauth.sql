-- PostgreSQL's version of ../0011_oauth.sql.

-- Clients registered through RFC 7591 Dynamic Client Registration (a
-- client with a metadata document URL is not stored: it is fetched). A
-- client unused for `[oauth] unused_client_ttl` is deleted.
CREATE TABLE oauth_clients (
    client_id TEXT PRIMARY KEY,
    client_name TEXT NOT NULL,
    redirect_uris TEXT NOT NULL, -- a JSON array of strings
    created_at TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ NOT NULL
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
ALTER TABLE agents ADD COLUMN expires_at TIMESTAMPTZ;

-- A grant narrowed for an agent session (a role whose rules are a subset
-- of its parent's): it ends whenever its parent ends, in the statement that
-- ends the parent (SQLite's trigger of the same name).
ALTER TABLE grants ADD COLUMN parent_id TEXT REFERENCES grants (id);
CREATE FUNCTION grants_end_with_their_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE grants SET revoked_at = NEW.revoked_at WHERE parent_id = NEW.id AND revoked_at IS NULL;
    RETURN NULL;
END;
$$;
CREATE TRIGGER grants_end_with_their_parent AFTER UPDATE OF revoked_at ON grants
FOR EACH ROW WHEN (NEW.revoked_at IS NOT NULL)
EXECUTE FUNCTION grants_end_with_their_parent();

-- Authorization codes: one use, ten minutes; only their SHA-256 is kept.
-- After the exchange the row stays (used_at, agent_id) until it expires, so
-- a second exchange is recognised and ends the session it made.
CREATE TABLE oauth_codes (
    code_sha256 TEXT PRIMARY KEY,
    consent TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at TIMESTAMPTZ,
    agent_id TEXT REFERENCES agents (id)
);

-- Refresh tokens: one use each (rotated); a used one presented again ends
-- the whole agent session.
CREATE TABLE oauth_refresh_tokens (
    token_sha256 TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL REFERENCES agents (id),
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at TIMESTAMPTZ
);
CREATE INDEX oauth_refresh_tokens_by_agent ON oauth_refresh_tokens (agent_id);
