-- PostgreSQL's version of ../0015_login_codes.sql.

-- The codes `portcullis login` exchanges, kept in the store rather than in
-- one process's memory, so that a code given by one replica is exchanged at
-- another. Every code is kept only as its SHA-256 (hex), user codes too: a
-- copy of the store holds none that could be used. Each is taken once.

-- Loopback codes (`/login/cli`): two minutes, one use. `session_sha256` is
-- the sign-in session the credential ends with.
CREATE TABLE cli_login_codes (
    code_sha256 TEXT PRIMARY KEY,
    login TEXT NOT NULL,
    session_sha256 TEXT NOT NULL,
    challenge TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX cli_login_codes_by_expiry ON cli_login_codes (expires_at);

-- Device codes of `portcullis login --no-browser` (RFC 8628) with their
-- user codes: ten minutes. `decision` is NULL while the person has not
-- decided, else 'allowed' (with who, and their session) or 'denied'.
CREATE TABLE device_codes (
    device_sha256 TEXT PRIMARY KEY,
    user_sha256 TEXT NOT NULL UNIQUE,
    expires_at TIMESTAMPTZ NOT NULL,
    interval_seconds BIGINT NOT NULL,
    last_poll TIMESTAMPTZ,
    decision TEXT,
    login TEXT,
    session_sha256 TEXT
);
CREATE INDEX device_codes_by_expiry ON device_codes (expires_at);
