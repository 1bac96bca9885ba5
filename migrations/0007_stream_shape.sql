-- Schema 7: how an exchange's SSE answer was framed for resumption (SEP-1699,
-- protocol 2025-11-25). Released: never edit; add a new numbered file instead.

-- 1 when the stream opened with a priming event (an event id and empty data).
ALTER TABLE exchange ADD COLUMN sse_primed INTEGER NOT NULL DEFAULT 0 CHECK (sse_primed IN (0, 1));
-- The SSE `retry` the server set (milliseconds), if it set one.
ALTER TABLE exchange ADD COLUMN sse_retry_ms INTEGER CHECK (sse_retry_ms >= 0);
-- The server closed the stream after this many of its messages, before the
-- answer, and the client resumed it (GET with Last-Event-ID); NULL when the
-- answer came on the stream it began on.
ALTER TABLE exchange ADD COLUMN sse_closed_after INTEGER CHECK (sse_closed_after >= 0);
