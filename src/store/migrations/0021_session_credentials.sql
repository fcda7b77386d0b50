-- The web sign-in session a credential was issued under (`portcullis
-- login`'s, allowed in the browser): signing out of the session revokes it,
-- as it revokes the session's own credential. NULL for every other.
ALTER TABLE credentials ADD COLUMN web_session TEXT;
CREATE INDEX credentials_by_web_session ON credentials (web_session) WHERE web_session IS NOT NULL
