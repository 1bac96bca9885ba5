-- Schema 6: what a server said on its own, no part of any answer. Released:
-- never edit; add a new numbered file instead.

CREATE TABLE aside (
    -- The exchange it followed: the last one the server had seen when it
    -- spoke (arrival order at the recorder).
    exchange_id INTEGER NOT NULL REFERENCES exchange (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    -- NULL: it followed the exchange's answer; else the method of the client
    -- notification after that answer it followed ('notifications/initialized').
    after       TEXT,
    -- The stream it came on: 'standalone' (HTTP's GET stream, or stdio's
    -- one stream between answers) or 'subscription' (a 2026-07-28
    -- subscriptions/listen stream). No CHECK: later schemas may add streams,
    -- and mcp-tape refuses a name it does not know when it loads the row.
    channel     TEXT    NOT NULL,
    -- Milliseconds to this message from the exchange's request (after NULL)
    -- or from the client notification it followed.
    offset_ms   INTEGER NOT NULL,
    -- 'server', or 'client' for the client's reply to a server request.
    direction   TEXT    NOT NULL CHECK (direction IN ('server', 'client')),
    body        TEXT    NOT NULL,
    PRIMARY KEY (exchange_id, seq)
) WITHOUT ROWID;
