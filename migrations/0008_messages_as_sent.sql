-- Schema 8: messages as their sender wrote them. Released: never edit; add a
-- new numbered file instead.

-- 1 when the exchange's messages and asides were stored with their keys
-- sorted (every exchange stored before this schema): their member order is
-- not the server's. From schema 8 on a message keeps its sender's member
-- order (what replay sends is what the server said) and this is 0; the
-- request stays canonical (keys sorted), as match keys need it.
ALTER TABLE exchange ADD COLUMN keys_sorted INTEGER NOT NULL DEFAULT 1 CHECK (keys_sorted IN (0, 1));
