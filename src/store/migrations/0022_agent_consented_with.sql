-- The credential of the web sign-in session an agent session was consented
-- in: revoking that credential (a stolen token someone signed in with)
-- ends the agent sessions consented under it, as it ends the web sessions.
-- NULL for agents added otherwise, and for consents before this column.
ALTER TABLE agents ADD COLUMN consented_with TEXT;
CREATE INDEX agents_by_consent ON agents (consented_with) WHERE consented_with IS NOT NULL
