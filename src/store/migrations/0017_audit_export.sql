-- Where the shared export of the audit stands (PostgreSQL, where every
-- replica appends to one chain and one of them exports each row). SQLite
-- has one process, whose writer exports the chain itself: the table stays
-- empty there, and is here so both schemas keep one version number.
CREATE TABLE audit_export (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    seq INTEGER NOT NULL
)
