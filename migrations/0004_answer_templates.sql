-- Schema 4: answer templates. A template answers `tools/call` of one tool on
-- one server whatever the arguments, its text's `{{argument}}` holes filled
-- from the call (imported Agent 365 mocks, or written by hand in JSON
-- Lines). A recorded exchange whose arguments match exactly wins over it.
CREATE TABLE answer_template (
    id           INTEGER PRIMARY KEY,
    server       TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    -- The tool as `tools/list` shows it.
    description  TEXT    NOT NULL,
    -- Canonical JSON.
    input_schema TEXT    NOT NULL,
    -- The answer's text content, with its holes.
    text         TEXT    NOT NULL,
    -- Milliseconds from the request to the answer (kept with --pace recorded).
    delay_ms     INTEGER NOT NULL,
    UNIQUE (server, tool)
);
