-- PostgreSQL's version of ../0008_sign_in.sql.

-- People who sign in with the company's OpenID Connect provider, keyed on
-- the provider's issuer and `sub` (a login claim or an email can change;
-- these never do). `login` is the portcullis person they are. `groups` is
-- the groups claim of their last sign-in (a JSON array of strings).
CREATE TABLE person_identities (
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    login TEXT NOT NULL,
    email TEXT,
    groups TEXT NOT NULL DEFAULT '[]',
    created_at TIMESTAMPTZ NOT NULL,
    last_sign_in_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE UNIQUE INDEX person_identities_by_login ON person_identities (issuer, login);
-- How a web session was signed into: `token` (a person's own portcullis
-- token, whose credential the session uses) or `oidc` (the identity
-- provider; the session has a credential of its own, revoked when the
-- session ends).
ALTER TABLE web_sessions ADD COLUMN signed_in_with TEXT NOT NULL DEFAULT 'token';
