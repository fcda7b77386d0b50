-- PostgreSQL's version of ../0013_ci_trust.sql.

-- Trust rules: a bot trusts the OpenID Connect tokens `issuer` gives CI
-- jobs for `audience` whose claims meet every condition (a JSON object of
-- claim name to exact value or `*` glob); an exchanged token gives a
-- credential lasting `duration_seconds`, if the token is at most
-- `max_token_age_seconds` old (by its iat).
CREATE TABLE ci_trust_rules (
    id TEXT PRIMARY KEY,
    bot TEXT NOT NULL,
    issuer TEXT NOT NULL,
    audience TEXT NOT NULL,
    claims TEXT NOT NULL,
    duration_seconds BIGINT NOT NULL,
    max_token_age_seconds BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    created_by TEXT NOT NULL
);
CREATE INDEX ci_trust_rules_by_issuer ON ci_trust_rules (issuer);

-- CI tokens already exchanged: the SHA-256 of issuer and jti (or of the
-- whole token when it has no jti). The primary key makes the insert the
-- replay check, atomic across replicas sharing the store. A row is kept
-- until the token's expiry plus the clock skew allowed, then swept.
CREATE TABLE ci_exchanged_tokens (
    digest TEXT PRIMARY KEY,
    keep_until TIMESTAMPTZ NOT NULL
);
CREATE INDEX ci_exchanged_tokens_by_age ON ci_exchanged_tokens (keep_until);
