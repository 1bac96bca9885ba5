-- Cassette schema 11: a cassette whose recordings are pseudonymized
-- (--pseudonymize) says by which keys: each key's fingerprint, never a key.
-- Released: never edit; add a new numbered file instead.

CREATE TABLE pseudonym_key (
    -- Eight hex digits of a hash of the key: they tell two keys apart and
    -- give nothing of either.
    fingerprint TEXT NOT NULL PRIMARY KEY
) WITHOUT ROWID;
