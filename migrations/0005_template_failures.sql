-- Schema 5: an answer template's failures, as the Agent 365 mock tooling
-- server's `errorRate` and `statusCode` describe them. Released: never
-- edit; add a new numbered file instead.

-- The share of calls (0 to 1) that fail; NULL: none. Replay fails the same
-- calls every run: the draw is seeded (see error_seed).
ALTER TABLE answer_template ADD COLUMN error_rate REAL;
-- The seed of that draw.
ALTER TABLE answer_template ADD COLUMN error_seed INTEGER;
-- The HTTP status a failed call gets; NULL: a JSON-RPC error (code 500,
-- as the mock server answers) with status 200.
ALTER TABLE answer_template ADD COLUMN error_status INTEGER;
