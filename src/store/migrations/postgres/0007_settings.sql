-- PostgreSQL's version of ../0007_settings.sql.

-- Facts about this installation, one row each. `instance_id` is the random id
-- the store was created with: the default of `[reconcile] instance`, which
-- marks this installation's RBAC objects in its clusters. Kept here so that a
-- restart keeps it and another store gets another.
CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- 16 lower-case hex digits, as SQLite's lower(hex(randomblob(8))): 64 bits
-- of a random UUID (gen_random_uuid is built in and strongly random; its
-- digest spreads the bits a version-4 UUID fixes).
INSERT INTO settings (key, value) VALUES ('instance_id', substr(md5(gen_random_uuid()::text), 1, 16));
