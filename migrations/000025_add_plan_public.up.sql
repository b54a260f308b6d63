-- A public plan may be offered to a customer whose check a hard limit
-- denied (the check answer's "upgrade"). An attribute of the plan, not of
-- its versions: a change of it alone makes no version.
ALTER TABLE plans ADD COLUMN public boolean NOT NULL DEFAULT false;
