-- Schema 9: asides said while their exchange was in flight. Released: never
-- edit; add a new numbered file instead.

-- 1 when the server said it (on its GET stream) while the exchange was in
-- flight, before its answer: replay sends it before that answer. 0 (every
-- aside stored before this schema) when it came after the answer, or after
-- the client notification named in `after`.
ALTER TABLE aside ADD COLUMN in_flight INTEGER NOT NULL DEFAULT 0 CHECK (in_flight IN (0, 1));
