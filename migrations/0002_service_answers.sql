-- Cassette schema 2: answers of the Agent 365 service endpoints that are not
-- MCP. Released: never edit; add a new numbered file instead.

CREATE TABLE service_answer (
    -- One answer of a non-MCP Agent 365 endpoint, as record saw it. Only the
    -- answer is kept: replay answers these routes whatever the request held,
    -- and a chat-message request is the user's conversation.
    id           INTEGER PRIMARY KEY,
    -- 'gateway' (GET /agents/{agentId}/mcpServers), 'gateway-v2'
    -- (GET /agents/v2/{agentId}/mcpServers) or 'chat-message'
    -- (POST /agents/real-time-threat-protection/chat-message).
    route        TEXT    NOT NULL CHECK (route IN ('gateway', 'gateway-v2', 'chat-message')),
    -- Origin (scheme://host:port) of the upstream it came from: replay points
    -- a listed server url at this origin to itself. Never credentials.
    upstream     TEXT    NOT NULL,
    status       INTEGER NOT NULL,
    content_type TEXT    NOT NULL,
    -- The answer body as text (canonical JSON when it is JSON), scrubbed.
    body         TEXT    NOT NULL
);
