//! The stdio floor: answers every line of its stdin with one fixed JSON-RPC
//! answer line on its stdout, each flushed as it is written: the least any
//! stdio MCP server can do, and the yardstick for `mcp-tape replay --stdio`
//! (which also writes and flushes each message on its own). The answer is
//! the one `gen-cassette` records for `lookup {"n": 500}`, so both send the
//! same number of bytes.

use std::io::{BufRead, Write};

fn main() -> std::io::Result<()> {
    let n = 500;
    let text = format!(
        "{{\"id\":\"AAMk{n:08}\",\"subject\":\"Weekly report {n}\",\"from\":\"adele.vance@contoso.com\",\"bodyPreview\":\"Numbers for week {n} are attached; travel is on plan and the pipeline grew.\"}}"
    );
    let answer = serde_json::json!({"id": 1, "jsonrpc": "2.0", "result": {"content": [{"text": text, "type": "text"}]}});
    let line = format!("{answer}\n");
    let input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    for read in input.split(b'\n') {
        read?;
        output.write_all(line.as_bytes())?;
        output.flush()?;
    }
    Ok(())
}
