"""A stdio MCP server that writes its answers by hand, spelling numbers and
strings the way a JSON library that reads them would not write them again
(the text of tests/integration/upstream.rs's RAW_CONTENT): what record and
replay must pass on byte for byte."""

import json
import sys

RAW_CONTENT = (
    '{"zeta":"w","price":1.50,"total":1e2,"tiny":1E-7,"neg0":-0,'
    '"big":123456789012345678901234567890,"esc":"caf\\u00e9"}'
)

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    id_text = json.dumps(message["id"])
    if message["method"] == "initialize":
        result = (
            '{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},'
            '"serverInfo":{"name":"raw","version":"1"}}'
        )
    elif message["method"] == "tools/call":
        result = '{"content":[],"structuredContent":' + RAW_CONTENT + "}"
    else:
        result = "{}"
    sys.stdout.write('{"jsonrpc":"2.0","id":' + id_text + ',"result":' + result + "}\n")
    sys.stdout.flush()
