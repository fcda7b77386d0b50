-- Filled in by the change that needs it; empty until then.
SELECT 1;
