-- Cassette schema 1. Released: never edit; add a new numbered file instead.

-- mcp-tape cassettes say so in the SQLite header ('MCPT'), so that a
-- foreign database is recognized before anything is written to it.
PRAGMA application_id = 1296257108;

CREATE TABLE exchange (
    -- One finished request/answer pair, normalized (ids, progress tokens as
    -- placeholders; sensitive values redacted).
    id               INTEGER PRIMARY KEY,
    -- Server identity from the path: the {name} of /agents/servers/{name},
    -- or the whole path (e.g. '/mcp') for any other endpoint.
    server           TEXT    NOT NULL,
    -- 'handshake' or 'stateless'.
    era              TEXT    NOT NULL CHECK (era IN ('handshake', 'stateless')),
    protocol_version TEXT    NOT NULL,
    method           TEXT    NOT NULL,
    -- Hex sha256 over (server, method, canonical params).
    match_key        TEXT    NOT NULL,
    -- 0 for the first exchange with this key, 1 for the next, ...
    occurrence       INTEGER NOT NULL,
    -- The normalized JSON-RPC request, canonical JSON.
    request          TEXT    NOT NULL,
    -- HTTP status and content type of the answer.
    status           INTEGER NOT NULL,
    content_type     TEXT    NOT NULL,
    UNIQUE (match_key, occurrence)
);

CREATE INDEX exchange_by_server_method ON exchange (server, method);

CREATE TABLE message (
    -- The answer's messages in order: one for a JSON answer, every event for
    -- an SSE answer (and the client's replies to server requests).
    exchange_id INTEGER NOT NULL REFERENCES exchange (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    -- Milliseconds from the request to this message, for paced replay.
    offset_ms   INTEGER NOT NULL,
    -- 'server' (to the client) or 'client' (a reply to a server request).
    direction   TEXT    NOT NULL CHECK (direction IN ('server', 'client')),
    body        TEXT    NOT NULL,
    PRIMARY KEY (exchange_id, seq)
) WITHOUT ROWID;
