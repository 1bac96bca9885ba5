-- Cassette schema 10: the agent's model on the same tape (--model NAME=URL).
-- Released: never edit; add a new numbered file instead.

CREATE TABLE model_exchange (
    -- One request to the agent's model and its answer, as written.
    id           INTEGER PRIMARY KEY,
    -- The NAME of --model NAME=URL: the tape's /model/NAME stood for URL.
    model        TEXT    NOT NULL,
    method       TEXT    NOT NULL,
    -- The path after /model/NAME ('/' for none), with its query; credentials
    -- in the query are left out.
    target       TEXT    NOT NULL,
    -- The request body as the client wrote it, credentials scrubbed.
    request      TEXT    NOT NULL,
    status       INTEGER NOT NULL,
    content_type TEXT    NOT NULL,
    -- The answer body as the server wrote it (decompressed); NULL for a
    -- stream, whose events are in model_event.
    body         TEXT,
    -- Seconds since the Unix epoch.
    recorded_at  INTEGER
);

CREATE INDEX model_exchange_by_target ON model_exchange (model, method, target);

CREATE TABLE model_event (
    -- A streamed answer's Server-Sent Events in order.
    exchange_id INTEGER NOT NULL REFERENCES model_exchange (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    -- Milliseconds from the request to this event, for paced replay.
    offset_ms   INTEGER NOT NULL,
    -- The event's lines as the server wrote them, without its blank line.
    event       TEXT    NOT NULL,
    PRIMARY KEY (exchange_id, seq)
) WITHOUT ROWID;
