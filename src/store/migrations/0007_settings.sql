-- Facts about this installation, one row each. `instance_id` is the random id
-- the store was created with: the default of `[reconcile] instance`, which
-- marks this installation's RBAC objects in its clusters. Kept here so that a
-- restart keeps it and another store gets another.
CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO settings (key, value) VALUES ('instance_id', lower(hex(randomblob(8))))
