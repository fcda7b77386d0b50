-- Only rows of a kind (bypass alerts, portcullis's own requests) are looked
-- up by kind; a request's row (kind '') no longer pays an entry in this
-- index. A query by kind says `kind <> ''` as well, so that a generic plan
-- (its value a parameter) can use the index. An older release still runs
-- on this schema: its queries by kind scan instead.
DROP INDEX audit_by_kind;
CREATE INDEX audit_by_kind ON audit (kind, started_at) WHERE kind <> '';
