-- Schema 3: where each exchange came from, so that stale recordings can be
-- found (`--max-age`). NULL for exchanges recorded before schema 3 or
-- imported without these facts.

-- When the exchange was recorded: seconds since 1970-01-01 UTC.
ALTER TABLE exchange ADD COLUMN recorded_at INTEGER;
-- The upstream it was recorded from: host[:port] of an HTTP upstream, or
-- 'stdio:' and the program of a stdio server. Never credentials.
ALTER TABLE exchange ADD COLUMN upstream TEXT;
-- The mcp-tape version that recorded it.
ALTER TABLE exchange ADD COLUMN recorder TEXT;
