-- PostgreSQL's version 16: every replica hears at once of a change another
-- made (../0016_notify.sql is a no-op: one SQLite process needs no telling).
--
-- A statement that changes a table whose rows replicas cache or wait on
-- (principals, credentials, grants, agents and agent sessions, their
-- grants, access requests, held writes) notifies the channel
-- portcullis_changes with the table's name. PostgreSQL delivers a
-- notification when its transaction commits, never when it rolls back, and
-- folds repeats of one name within one transaction into one. Each replica's
-- listener (src/store/notify.rs) drops its caches or wakes its waiters; the
-- caches' two-second lifetime and the waiters' polling remain for a
-- notification missed while it reconnects.
--
-- One trigger per event, each seeing the statement's changed rows as a
-- transition table (PostgreSQL allows one only on a single-event trigger),
-- so a statement that changed nothing (an expiry sweep finding nothing
-- overdue) notifies nothing. An update of credentials that only records a
-- use (last_used_at, written once a minute per credential in use) is no
-- change either: notifying it would empty every replica's credential cache
-- all the time.

CREATE FUNCTION portcullis_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed_rows) THEN
        PERFORM pg_notify('portcullis_changes', TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION portcullis_notify_credential_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
        WHERE (to_jsonb(n) - 'last_used_at') IS DISTINCT FROM (to_jsonb(o) - 'last_used_at')
    ) THEN
        PERFORM pg_notify('portcullis_changes', TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END;
$$;

DO $$
DECLARE
    watched TEXT;
BEGIN
    FOREACH watched IN ARRAY ARRAY[
        'principals', 'credentials', 'grants', 'agents', 'agent_grants', 'access_requests', 'held_writes'
    ] LOOP
        EXECUTE format(
            'CREATE TRIGGER %1$s_notify_insert AFTER INSERT ON %1$I '
            'REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT '
            'EXECUTE FUNCTION portcullis_notify_change()', watched);
        EXECUTE format(
            'CREATE TRIGGER %1$s_notify_delete AFTER DELETE ON %1$I '
            'REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT '
            'EXECUTE FUNCTION portcullis_notify_change()', watched);
        IF watched <> 'credentials' THEN
            EXECUTE format(
                'CREATE TRIGGER %1$s_notify_update AFTER UPDATE ON %1$I '
                'REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT '
                'EXECUTE FUNCTION portcullis_notify_change()', watched);
        END IF;
    END LOOP;
END;
$$;

CREATE TRIGGER credentials_notify_update AFTER UPDATE ON credentials
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
EXECUTE FUNCTION portcullis_notify_credential_update();
