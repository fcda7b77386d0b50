-- A request's row that stands for its forwarded record: the writer leaves
-- out the forwarded record (audit_forwarded) of a request whose row is
-- committed with it, and marks the row instead, so a small read costs one
-- insert, not two. The row is not hashed with this mark: like the
-- forwarded records, it serves the API server audit's coverage count.
ALTER TABLE audit ADD COLUMN forwarded INTEGER NOT NULL DEFAULT 0
