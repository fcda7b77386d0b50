-- Version 16 is PostgreSQL's notice of changes (postgres/0016_notify.sql):
-- replicas sharing PostgreSQL tell each other what changed. The embedded
-- SQLite store has one process, which needs no telling, so this version
-- does nothing here. It exists so that both backends keep the same version
-- numbers: a replica's refusal of a newer schema, and `store migrate`'s
-- copy from SQLite into PostgreSQL, compare versions across backends.
SELECT 1;
