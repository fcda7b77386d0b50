-- PostgreSQL's version of ../0010_session_groups.sql.

-- The groups a provider sign-in came with (a JSON array), so a command
-- line login from that session re-applies the group rules, and signing out
-- ends the rule grants no other session holds. NULL for a token sign-in.
ALTER TABLE web_sessions ADD COLUMN groups TEXT;
