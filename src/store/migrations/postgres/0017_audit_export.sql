-- Where the shared export of the audit stands: the last row exported by any
-- replica. One row, always written with one = 1; an exporter locks it
-- (FOR UPDATE) while it writes the rows after it, so each row is exported
-- once.
CREATE TABLE audit_export (
    one BIGINT PRIMARY KEY CHECK (one = 1),
    seq BIGINT NOT NULL
);
