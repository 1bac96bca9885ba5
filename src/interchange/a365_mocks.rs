//! The Agent 365 mock tooling server's mocks (`a365 develop mts`), read as
//! answer templates: `mocks/<server>.json` holds a JSON array of tools
//! (`//` and `/* */` comments and trailing commas allowed, property names
//! in any case), each with `name`, `description`, `inputSchema`,
//! `responseTemplate` (`{{argument}}` holes), `delayMs`, `errorRate`,
//! `statusCode` and `enabled`. An enabled tool becomes a template that
//! answers any call to it and lists it in `tools/list`; a disabled one is
//! left out (a call then gets `-32602`, as for any unknown tool).
//! A tool's `errorRate` becomes a seeded share of its calls that fail (the
//! same calls every run with the same seed: see `faults::draw`), with the
//! mock server's error (`{code: 500, message: "Simulated error for mock
//! tool '<name>'"}` at HTTP 200), or with `statusCode` as the HTTP status
//! when a mock sets one that is not a success (the mock server itself
//! never used it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::Error;
use crate::limits::MAX_MOCKS_FILE_BYTES;
use crate::model::{AnswerTemplate, TemplateFailure};

/// The mock server's answer text for a tool with none of its own.
const DEFAULT_TEMPLATE: &str = "Mock response from {{name}}";

/// What a mocks directory holds.
#[derive(Debug, Default)]
pub struct Mocks {
    /// One per enabled tool, by file (server) then file order.
    pub templates: Vec<AnswerTemplate>,
    /// Disabled tools left out, as "server tool".
    pub disabled: Vec<String>,
    /// Tools whose `errorRate` is not zero, as "server tool".
    pub error_rates: Vec<String>,
    /// Tools whose description and `inputSchema` came from a snapshot of the live server.
    pub from_snapshots: usize,
    /// Snapshot files that say `"capturedAt": "UNPOPULATED"` (never captured), by server.
    pub unpopulated: Vec<String>,
}

/// Reads every `*.json` file of `dir` (sorted by name); `seed` seeds the
/// draw of each tool's failing calls.
///
/// # Errors
///
/// A directory or file that cannot be read, or the first bad file: not a
/// JSON array of tool objects (after comments and trailing commas), a tool
/// without a name, a name used twice, a property of the wrong type; named
/// with its file and tool.
pub fn read_dir(dir: &Path, seed: u64) -> Result<Mocks, Error> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Read { path, source }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io(dir))?;
    files.retain(|path| path.extension().is_some_and(|ext| ext == "json"));
    files.sort();
    if files.is_empty() {
        return Err(Error::Config(format!("{}: no mocks (*.json files) in this directory", dir.display())));
    }
    let mut mocks = Mocks::default();
    for file in files {
        let text = super::foreign::read_regular_file(&file, MAX_MOCKS_FILE_BYTES, "a mocks file")?;
        let server = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        read_file(&server, &text, seed, &mut mocks)
            .map_err(|why| Error::Config(format!("{}: {why}", file.display())))?;
    }
    read_snapshots(dir, &mut mocks)?;
    Ok(mocks)
}

/// Applies the Agent 365 devTools' catalogue snapshots beside the mocks
/// (`snapshots/{server}.snapshot.json`, a sibling of the mocks directory,
/// or inside it): each tool's description and `inputSchema` as captured
/// from the live server replace the mock file's; the answer templates stay.
/// A snapshot never captured (`"capturedAt": "UNPOPULATED"`) changes nothing.
fn read_snapshots(dir: &Path, mocks: &mut Mocks) -> Result<(), Error> {
    let beside = [dir.join("..").join("snapshots"), dir.join("snapshots")];
    let Some(snapshots) = beside.iter().find(|d| d.is_dir()) else { return Ok(()) };
    let mut files: Vec<PathBuf> = std::fs::read_dir(snapshots)
        .map_err(|source| Error::Read { path: snapshots.clone(), source })?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.to_string_lossy().ends_with(".snapshot.json"))
        .collect();
    files.sort();
    for file in files {
        let text = super::foreign::read_regular_file(&file, MAX_MOCKS_FILE_BYTES, "a snapshot file")?;
        let bad = |why: String| Error::Config(format!("{}: {why}", file.display()));
        let snapshot: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let stem = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .trim_end_matches(".snapshot.json")
            .to_owned();
        let server = snapshot.get("serverName").and_then(Value::as_str).unwrap_or(&stem).to_owned();
        if snapshot.get("capturedAt").and_then(Value::as_str) == Some("UNPOPULATED") {
            mocks.unpopulated.push(server);
            continue;
        }
        let tools = snapshot
            .get("tools")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no \"tools\" array".into()))?;
        for (index, tool) in tools.iter().enumerate() {
            let name = tool
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("tool #{} has no name", index + 1)))?;
            let template =
                mocks.templates.iter_mut().find(|t| t.server == server && t.tool.eq_ignore_ascii_case(name));
            let Some(template) = template else { continue };
            if let Some(description) = tool.get("description").and_then(Value::as_str) {
                template.description = description.to_owned();
            }
            match tool.get("inputSchema") {
                Some(schema @ Value::Object(_)) => template.input_schema = schema.clone(),
                None | Some(Value::Null) => {}
                Some(_) => return Err(bad(format!("tool {name:?}: \"inputSchema\" must be an object"))),
            }
            mocks.from_snapshots += 1;
        }
    }
    Ok(())
}

/// The tools of one mocks file, for `server`.
fn read_file(server: &str, text: &str, seed: u64, mocks: &mut Mocks) -> Result<(), String> {
    let value: Value = serde_json::from_str(&lenient_json(text))
        .map_err(|e| format!("not valid JSON (comments and trailing commas allowed): {e}"))?;
    let Value::Array(tools) = value else {
        return Err("expected a JSON array of tools".into());
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, tool) in tools.iter().enumerate() {
        let Value::Object(tool) = tool else {
            return Err(format!("tool #{}: expected an object", index + 1));
        };
        let tool = Tool(tool.iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect());
        let name = match tool.get("name") {
            Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
            Some(Value::String(_)) | None => return Err(format!("tool #{} has no name", index + 1)),
            Some(_) => return Err(format!("tool #{}: \"name\" must be a string", index + 1)),
        };
        let named = |why: String| format!("tool {name:?}: {why}");
        if let Some(first) = seen.insert(name.to_ascii_lowercase(), index + 1) {
            return Err(named(format!("the name is used twice (tools #{first} and #{})", index + 1)));
        }
        if !tool.boolean("enabled").map_err(named)?.unwrap_or(true) {
            mocks.disabled.push(format!("{server} {name}"));
            continue;
        }
        let failure = match tool.number("errorrate").map_err(named)? {
            Some(rate) if !(0.0..=1.0).contains(&rate) => {
                return Err(named(format!("\"errorRate\" {rate}: a share of calls, from 0 to 1")));
            }
            Some(rate) if rate > 0.0 => {
                mocks.error_rates.push(format!("{server} {name}"));
                let status = match tool.number("statuscode").map_err(named)? {
                    None => None,
                    Some(code) if code.fract() == 0.0 && (100.0..600.0).contains(&code) => Some(code as u16),
                    Some(code) => return Err(named(format!("\"statusCode\" {code}: not an HTTP status"))),
                };
                Some(TemplateFailure { rate, seed, status })
            }
            Some(_) | None => None,
        };
        let input_schema = match tool.get("inputschema") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}, "required": []}),
            Some(schema @ Value::Object(_)) => schema.clone(),
            Some(_) => return Err(named("\"inputSchema\" must be an object".into())),
        };
        let delay_ms = match tool.number("delayms").map_err(named)? {
            Some(delay) if delay >= 0.0 => delay as u64,
            Some(_) => return Err(named("\"delayMs\" must not be negative".into())),
            None => 0,
        };
        mocks.templates.push(AnswerTemplate {
            server: server.to_owned(),
            tool: name.clone(),
            description: tool.text("description").map_err(named)?.unwrap_or_default(),
            input_schema,
            text: tool
                .text("responsetemplate")
                .map_err(named)?
                .unwrap_or_else(|| DEFAULT_TEMPLATE.to_owned()),
            delay_ms,
            failure,
        });
    }
    Ok(())
}

/// A tool object's properties, by lower-cased name.
struct Tool<'a>(HashMap<String, &'a Value>);

impl Tool<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).copied()
    }

    fn text(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(format!("{key:?} must be a string")),
        }
    }

    fn number(&self, key: &str) -> Result<Option<f64>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(format!("{key:?} must be a number")),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(_) => Err(format!("{key:?} must be true or false")),
        }
    }
}

/// `text` without `//` and `/* */` comments and without commas that only
/// close a list, outside strings: plain JSON, as the mock server reads it.
fn lenient_json(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (c, chars.get(i + 1)) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ('/', Some('*')) => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
                continue;
            }
            (',', _) => {
                let next = chars[i + 1..].iter().position(|c| !c.is_whitespace()).map(|at| chars[i + 1 + at]);
                if !matches!(next, Some('}' | ']')) {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Mocks, String> {
        let mut mocks = Mocks::default();
        read_file("mcp_Test", text, 7, &mut mocks).map(|()| mocks)
    }

    #[test]
    fn comments_trailing_commas_and_any_case() {
        let mocks = read(
            r#"// the calendar
            [
              /* first */ {"Name": "GetRooms", "RESPONSETEMPLATE": "rooms // not a comment, {{city}}", "delayMs": 250,},
              {"name": "Hidden", "enabled": false},
              {"name": "Flaky", "errorRate": 0.5},
              {"name": "Down", "errorRate": 1, "statusCode": 503},
            ]"#,
        )
        .unwrap();
        assert_eq!(mocks.templates.len(), 3);
        assert_eq!(mocks.templates[0].text, "rooms // not a comment, {{city}}");
        assert_eq!(mocks.templates[0].delay_ms, 250);
        assert_eq!(mocks.templates[1].text, DEFAULT_TEMPLATE);
        assert_eq!(mocks.disabled, ["mcp_Test Hidden"]);
        assert_eq!(mocks.error_rates, ["mcp_Test Flaky", "mcp_Test Down"]);
        assert_eq!(mocks.templates[0].failure, None);
        assert_eq!(mocks.templates[1].failure, Some(TemplateFailure { rate: 0.5, seed: 7, status: None }));
        assert_eq!(
            mocks.templates[2].failure,
            Some(TemplateFailure { rate: 1.0, seed: 7, status: Some(503) })
        );
        assert!(read(r#"[{"name": "T", "errorRate": 2}]"#).unwrap_err().contains("\"errorRate\" 2"));
        assert!(
            read(r#"[{"name": "T", "errorRate": 0.1, "statusCode": 42}]"#)
                .unwrap_err()
                .contains("not an HTTP status")
        );
    }

    #[test]
    fn bad_files_are_named_by_their_tool() {
        assert!(read("{").unwrap_err().contains("not valid JSON"));
        assert!(read(r#"{"name": "x"}"#).unwrap_err().contains("array"));
        assert!(read(r#"[{"description": "no name"}]"#).unwrap_err().contains("tool #1 has no name"));
        let twice = read(r#"[{"name": "A"}, {"name": "a"}]"#).unwrap_err();
        assert!(twice.contains("tool \"a\"") && twice.contains("used twice"), "{twice}");
        assert!(
            read(r#"[{"name": "A", "delayMs": "soon"}]"#)
                .unwrap_err()
                .contains("\"delayms\" must be a number")
        );
    }

    #[test]
    fn snapshots_beside_the_mocks_give_the_live_schemas() {
        let root = tempfile::tempdir().unwrap();
        let (mocks_dir, snapshots) = (root.path().join("mocks"), root.path().join("snapshots"));
        std::fs::create_dir_all(&mocks_dir).unwrap();
        std::fs::create_dir_all(&snapshots).unwrap();
        std::fs::write(
            mocks_dir.join("mcp_MailTools.json"),
            r#"[{"name": "GetMessage", "description": "old", "inputSchema": {"type": "object"}, "responseTemplate": "Message {{id}}"}]"#,
        )
        .unwrap();
        std::fs::write(mocks_dir.join("mcp_MeServer.json"), r#"[{"name": "GetMyDetails"}]"#).unwrap();
        let live = json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]});
        std::fs::write(
            snapshots.join("mcp_MailTools.snapshot.json"),
            json!({"$schema": "mock-snapshot-schema", "capturedAt": "2026-02-28T00:00:00Z", "serverName": "mcp_MailTools",
                "tools": [{"name": "GetMessage", "description": "Fetch one message", "inputSchema": live},
                          {"name": "NotMocked", "description": "x", "inputSchema": {}}]})
            .to_string(),
        )
        .unwrap();
        std::fs::write(
            snapshots.join("mcp_MeServer.snapshot.json"),
            json!({"capturedAt": "UNPOPULATED", "serverName": "mcp_MeServer", "tools": []}).to_string(),
        )
        .unwrap();
        let mocks = read_dir(&mocks_dir, 0).unwrap();
        let mail = &mocks.templates[0];
        assert_eq!((mail.description.as_str(), &mail.input_schema), ("Fetch one message", &live));
        assert_eq!(mail.text, "Message {{id}}", "the template stays");
        assert_eq!((mocks.from_snapshots, mocks.unpopulated.clone()), (1, vec!["mcp_MeServer".to_owned()]));
        std::fs::write(snapshots.join("mcp_MailTools.snapshot.json"), r#"{"capturedAt": "x"}"#).unwrap();
        assert!(read_dir(&mocks_dir, 0).unwrap_err().to_string().contains("no \"tools\" array"));
    }
}
