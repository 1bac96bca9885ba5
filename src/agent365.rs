//! The Agent 365 service endpoints that are not MCP: the tooling gateway's
//! discovery listing (`GET /agents/{agentId}/mcpServers`, an
//! `{"mcpServers": [...]}` object; `GET /agents/v2/{agentId}/mcpServers`, a
//! bare array) and real-time threat protection's chat history
//! (`POST /agents/real-time-threat-protection/chat-message`). The Agent 365
//! tooling SDKs call them beside the MCP servers, so both modes must answer
//! them: replay from the cassette or synthesized here, record by forwarding
//! and keeping the answer. Pure: no HTTP types, no I/O.

use serde_json::{Value, json};

use crate::model::ServiceRoute;

/// The "Agent 365 Tools" resource app id: the audience of every V1 server.
/// An SDK sees any other audience as a V2 server that needs a token
/// exchange of its own, which the legacy discovery overloads refuse.
pub const TOOLS_AUDIENCE: &str = "ea9ffc3e-8a23-4a7d-836d-234d7c7565c1";

/// The scopes the Agent 365 CLI writes into `ToolingManifest.json` for the
/// servers it knows; a server not listed gets [`DEFAULT_SCOPE`].
const KNOWN_SCOPES: [(&str, &str); 5] = [
    ("mcp_MailTools", "McpServers.Mail.All"),
    ("mcp_CalendarTools", "McpServers.Calendar.All"),
    ("mcp_MeServer", "McpServers.Me.All"),
    ("mcp_KnowledgeTools", "McpServers.Knowledge.All"),
    ("mcp_TeamsServer", "McpServers.Teams.All"),
];

/// The scope of a listed server that has none in [`KNOWN_SCOPES`].
const DEFAULT_SCOPE: &str = "Tools.ListInvoke.All";

/// The route a request addresses, if it is one of these endpoints. A
/// trailing slash does not matter.
pub fn route(http_method: &str, path: &str) -> Option<ServiceRoute> {
    // The only POST route has one path: the MCP POSTs every request makes
    // are told apart without splitting theirs.
    if http_method == "POST" {
        let chat = path.trim_end_matches('/') == "/agents/real-time-threat-protection/chat-message";
        return chat.then_some(ServiceRoute::ChatMessage);
    }
    let mut segments = crate::util::path_segments(path);
    let mut next = || segments.next();
    match (http_method, next(), next(), next(), next(), next()) {
        ("GET", Some("agents"), Some("v2"), Some(_), Some("mcpServers"), None) => {
            Some(ServiceRoute::GatewayV2)
        }
        ("GET", Some("agents"), Some(agent), Some("mcpServers"), None, _) if agent != "servers" => {
            Some(ServiceRoute::Gateway)
        }
        _ => None,
    }
}

/// Puts listing entries in the shape `route` answers with.
pub fn wrap(route: ServiceRoute, entries: Vec<Value>) -> Value {
    match route {
        ServiceRoute::Gateway => json!({"mcpServers": entries}),
        _ => Value::Array(entries),
    }
}

/// The server entries of a gateway listing in either shape.
pub fn listing_entries(listing: &Value) -> Option<&Vec<Value>> {
    match listing {
        Value::Array(entries) => Some(entries),
        other => other.get("mcpServers").and_then(Value::as_array),
    }
}

fn listing_entries_mut(listing: &mut Value) -> Option<&mut Vec<Value>> {
    match listing {
        Value::Array(entries) => Some(entries),
        other => other.get_mut("mcpServers").and_then(Value::as_array_mut),
    }
}

/// A gateway entry for `server` at `origin` (`http://host:port`), as the
/// production gateway lists an Agent 365 Tools server: the V1 audience and
/// the server's scope, so that every discovery path of the SDKs accepts it.
pub fn gateway_entry(origin: &str, server: &str) -> Value {
    let scope = KNOWN_SCOPES.iter().find(|(name, _)| *name == server).map_or(DEFAULT_SCOPE, |(_, s)| s);
    json!({
        "mcpServerName": server,
        "mcpServerUniqueName": server,
        "url": format!("{}/agents/servers/{server}", origin.trim_end_matches('/')),
        "scope": scope,
        "audience": TOOLS_AUDIENCE,
    })
}

/// The answer to a chat-message POST when the cassette holds none: the
/// SDKs count any 200 as success and read nothing from the body.
pub fn chat_message_answer() -> Value {
    json!({})
}

/// Scheme, lowercase host and port (the scheme's default if absent) of an
/// absolute URL.
fn origin_of(url: &str) -> Option<(String, String, u16)> {
    let uri: http::Uri = url.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    Some((scheme, uri.host()?.to_ascii_lowercase(), uri.port_u16().unwrap_or(default_port)))
}

/// The origin of an absolute URL as `scheme://host:port`, without user
/// info or path.
pub fn origin(url: &str) -> Option<String> {
    let (scheme, host, port) = origin_of(url)?;
    Some(format!("{scheme}://{host}:{port}"))
}

/// Points every entry `url` of a gateway listing that names the origin of
/// `from` (scheme, host and port) at `to` instead, keeping its path and
/// query; entries elsewhere and every other field stay as they are.
/// Returns how many entries changed.
pub fn rewrite_urls(listing: &mut Value, from: &str, to: &str) -> usize {
    let Some(wanted) = origin_of(from) else { return 0 };
    let Some(entries) = listing_entries_mut(listing) else { return 0 };
    let mut changed = 0;
    for url in entries.iter_mut().filter_map(|entry| entry.get_mut("url")) {
        let Some(text) = url.as_str() else { continue };
        if origin_of(text).as_ref() != Some(&wanted) {
            continue;
        }
        let Ok(uri) = text.trim().parse::<http::Uri>() else { continue };
        let rest = uri.path_and_query().map_or("", |p| p.as_str());
        *url = Value::String(format!("{}{rest}", to.trim_end_matches('/')));
        changed += 1;
    }
    changed
}

/// The server identity of a path: `{name}` for the Agent 365 forms
/// (`/agents/servers/{name}`, `/agents/tenants/{tid}/servers/{name}`,
/// `/mcp/environments/{env}/servers/{name}`, and the mock server's
/// `/mcp-mock/agents/servers/{name}` that older Agent 365 SDKs and samples
/// use), else the path itself. A trailing slash does not matter. A part of
/// `path`, but for the root's name (`/`).
pub fn server_name(path: &str) -> &str {
    // The path every request to a server takes, without the walk over every spelling below.
    let usual = path.strip_prefix("/agents/servers/").map(|rest| rest.trim_end_matches('/'));
    match usual {
        Some(name) if !name.is_empty() && !name.bytes().any(|b| b == b'/') => name,
        _ => named_in(path),
    }
}

/// [`server_name`], every spelling walked.
fn named_in(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    let mut segments = crate::util::path_segments(trimmed);
    let mut next = || segments.next();
    let named = match (next(), next(), next(), next(), next(), next()) {
        (Some("agents"), Some("servers"), Some(name), None, ..) => Some(name),
        (Some("agents"), Some("tenants"), Some(_), Some("servers"), Some(name), None)
        | (Some("mcp-mock"), Some("agents"), Some("servers"), Some(name), None, _)
        | (Some("mcp"), Some("environments"), Some(_), Some("servers"), Some(name), None) => Some(name),
        _ => None,
    };
    match named {
        Some(name) => name,
        None if trimmed.is_empty() => "/",
        None => trimmed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_from_paths() {
        assert_eq!(server_name("/agents/servers/mcp_MailTools"), "mcp_MailTools");
        assert_eq!(server_name("/agents/servers/mcp_MailTools/"), "mcp_MailTools");
        assert_eq!(server_name("/mcp-mock/agents/servers/mcp_MailTools"), "mcp_MailTools");
        assert_eq!(
            server_name("/mcp-mock/agents/servers/mcp_MailTools/extra"),
            "/mcp-mock/agents/servers/mcp_MailTools/extra"
        );
        assert_eq!(server_name("/agents/tenants/t-1/servers/mcp_MeServer"), "mcp_MeServer");
        assert_eq!(server_name("/mcp/environments/e/servers/mcp_X"), "mcp_X");
        assert_eq!(server_name("/mcp"), "/mcp");
        assert_eq!(server_name("/mcp/"), "/mcp");
        assert_eq!(server_name("/"), "/");
    }

    proptest::proptest! {
        /// The usual path's shortcut names what the walk over every spelling does.
        #[test]
        fn the_usual_paths_shortcut_agrees_with_the_walk(
            segments in proptest::collection::vec(
                proptest::sample::select(vec!["agents", "servers", "tenants", "t", "mcp-mock", "mcp", "environments", "mcp_X", ""]),
                0..7,
            ),
            usual in proptest::bool::ANY,
            trailing in 0usize..3,
        ) {
            let lead = if usual { "agents/servers/" } else { "" };
            let path = format!("/{lead}{}{}", segments.join("/"), "/".repeat(trailing));
            proptest::prop_assert_eq!(server_name(&path), named_in(&path), "{}", path);
        }
    }

    #[test]
    fn routes_from_method_and_path() {
        assert_eq!(route("GET", "/agents/a-1/mcpServers"), Some(ServiceRoute::Gateway));
        assert_eq!(route("GET", "/agents/v2/a-1/mcpServers/"), Some(ServiceRoute::GatewayV2));
        assert_eq!(
            route("POST", "/agents/real-time-threat-protection/chat-message"),
            Some(ServiceRoute::ChatMessage)
        );
        assert_eq!(route("POST", "/agents/a-1/mcpServers"), None);
        assert_eq!(route("GET", "/agents/servers/mcpServers"), None);
        assert_eq!(route("POST", "/agents/servers/mcp_MailTools"), None);
        for route in [ServiceRoute::Gateway, ServiceRoute::GatewayV2, ServiceRoute::ChatMessage] {
            assert_eq!(ServiceRoute::parse(route.as_str()), Some(route));
        }
    }

    #[test]
    fn entries_carry_the_v1_audience_and_a_scope() {
        let mail = gateway_entry("http://127.0.0.1:5309/", "mcp_MailTools");
        assert_eq!(mail["url"], "http://127.0.0.1:5309/agents/servers/mcp_MailTools");
        assert_eq!(mail["audience"], TOOLS_AUDIENCE);
        assert_eq!(mail["scope"], "McpServers.Mail.All");
        assert_eq!(gateway_entry("http://h", "mcp_Other")["scope"], DEFAULT_SCOPE);
    }

    #[test]
    fn rewrites_only_urls_at_the_named_origin() {
        let mut listing = json!({"mcpServers": [
            {"mcpServerName": "a", "url": "HTTPS://Gateway.Example:443/agents/servers/a?x=1", "scope": "s"},
            {"mcpServerName": "b", "url": "https://gateway.example:8443/agents/servers/b"},
            {"mcpServerName": "c", "url": "https://elsewhere.example/mcp"},
            {"mcpServerName": "d"},
        ]});
        let changed = rewrite_urls(&mut listing, "https://gateway.example", "http://127.0.0.1:5309");
        assert_eq!(changed, 1);
        let entries = listing_entries(&listing).unwrap();
        assert_eq!(entries[0]["url"], "http://127.0.0.1:5309/agents/servers/a?x=1");
        assert_eq!(entries[0]["scope"], "s");
        assert_eq!(entries[1]["url"], "https://gateway.example:8443/agents/servers/b");
        assert_eq!(entries[2]["url"], "https://elsewhere.example/mcp");
        assert_eq!(entries[3].get("url"), None);

        let mut bare = json!([{"url": "http://10.1.2.3/agents/servers/x/"}]);
        assert_eq!(rewrite_urls(&mut bare, "http://10.1.2.3:80/", "http://127.0.0.1:1"), 1);
        assert_eq!(bare[0]["url"], "http://127.0.0.1:1/agents/servers/x/");
        assert_eq!(
            origin("https://user:pw@Gateway.Example/base").as_deref(),
            Some("https://gateway.example:443")
        );
    }

    #[test]
    fn wraps_entries_in_either_shape() {
        let entries = vec![json!({"mcpServerName": "a"})];
        assert_eq!(
            wrap(ServiceRoute::Gateway, entries.clone()),
            json!({"mcpServers": [{"mcpServerName": "a"}]})
        );
        assert_eq!(wrap(ServiceRoute::GatewayV2, entries), json!([{"mcpServerName": "a"}]));
    }
}
