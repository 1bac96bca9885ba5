//! What a request's headers say, read once: Host and Origin checked
//! against DNS rebinding, a POST's headers found in one pass
//! ([`FoundHeaders`]), its content type and `Accept`, the era, session and
//! facts they carry for the engine ([`Context`]), and the credentials to
//! scrub from what is stored.

use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::engine::{Facts, Headers};
use crate::error::{RequestError, Unanswered};
use crate::mcp::{self, RoutingHeaders};
use crate::model::Era;
use crate::redact;
use crate::util::pieces;

/// The MCP headers, named once: a lookup by `&str` parses the name on
/// every request.
pub(super) static SESSION_ID: HeaderName = HeaderName::from_static(mcp::HEADER_SESSION_ID);
pub(super) static PROTOCOL_VERSION: HeaderName = HeaderName::from_static(mcp::HEADER_PROTOCOL_VERSION);
static METHOD: HeaderName = HeaderName::from_static(mcp::HEADER_METHOD);
static NAME: HeaderName = HeaderName::from_static(mcp::HEADER_NAME);
pub(super) static LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// What the headers of a POST say: the era and session it belongs to, and
/// the facts the engine needs.
pub(super) struct Context<'h> {
    pub(super) era: Era,
    pub(super) session: Option<&'h str>,
    pub(super) facts: Facts<'h>,
}

impl Context<'_> {
    /// Reads the headers as `policy` says (`named`: the headers that are
    /// credentials besides the built-in ones).
    pub(super) fn read<'h>(
        headers: &'h HeaderMap,
        found: &FoundHeaders<'h>,
        policy: Headers,
        named: &[String],
    ) -> Result<Context<'h>, RequestError> {
        let passed = policy == Headers::Passed;
        let protocol_version = value_as(found.protocol_version, &PROTOCOL_VERSION, policy)?;
        let era = mcp::era_of(protocol_version);
        // `Mcp-Method` and `Mcp-Name` belong to the stateless era: checked there only.
        let stateless =
            |value, name| if era == Era::Stateless { value_as(value, name, policy) } else { Ok(None) };
        let routing = RoutingHeaders {
            protocol_version,
            method: stateless(found.method, &METHOD)?,
            name: stateless(found.name, &NAME)?,
        };
        // `Mcp-Param-{Name}` headers matter to the checks of stateless requests only, which are
        // not made on headers passed on.
        let param_headers = if era == Era::Stateless && !passed {
            headers
                .iter()
                .filter_map(|(name, value)| {
                    let suffix = name.as_str().strip_prefix(mcp::HEADER_PARAM_PREFIX)?;
                    Some((suffix.to_owned(), value.to_str().ok()?.trim().to_owned()))
                })
                .collect()
        } else {
            Vec::new()
        };
        let credentials = if passed { credentials(headers, named) } else { Vec::new() };
        Ok(Context {
            era,
            session: value_as(found.session, &SESSION_ID, policy)?,
            facts: Facts { routing: Some(routing), param_headers, credentials },
        })
    }
}

/// The headers every request is checked by and a POST read by, found in
/// one pass over its headers rather than a lookup (which hashes the name)
/// for each: the first value of `Host`, `Origin`, `Content-Type` and each
/// MCP header [`Context`] reads, and what every `Accept` allows.
#[derive(Default)]
pub(super) struct FoundHeaders<'a> {
    host: Option<&'a HeaderValue>,
    origin: Option<&'a HeaderValue>,
    content_type: Option<&'a HeaderValue>,
    /// `None` when no `Accept` value is text.
    accepts: Option<Accepts>,
    protocol_version: Option<&'a HeaderValue>,
    session: Option<&'a HeaderValue>,
    method: Option<&'a HeaderValue>,
    name: Option<&'a HeaderValue>,
}

impl FoundHeaders<'_> {
    pub(super) fn of(headers: &HeaderMap) -> FoundHeaders<'_> {
        let mut found = FoundHeaders::default();
        // Names compared as names: a custom header differs from a standard one
        // at its kind, and no name is spelled out for the comparison.
        for (name, value) in headers {
            let first = if *name == header::HOST {
                &mut found.host
            } else if *name == header::ORIGIN {
                &mut found.origin
            } else if *name == header::CONTENT_TYPE {
                &mut found.content_type
            } else if *name == header::ACCEPT {
                if value.as_bytes() == USUAL_ACCEPT {
                    found.accepts = Some(Accepts { json: true, sse: true });
                } else if let Ok(text) = value.to_str() {
                    found.accepts.get_or_insert(Accepts { json: false, sse: false }).allow(text);
                }
                continue;
            } else if *name == PROTOCOL_VERSION {
                &mut found.protocol_version
            } else if *name == SESSION_ID {
                &mut found.session
            } else if *name == METHOD {
                &mut found.method
            } else if *name == NAME {
                &mut found.name
            } else {
                continue;
            };
            first.get_or_insert(value);
        }
        found
    }

    /// The answer framings the client allows: both without an `Accept`.
    fn accepts(&self) -> Accepts {
        self.accepts.unwrap_or(Accepts { json: true, sse: true })
    }
}

/// The credentials a request carries in its headers ([`redact::header_secrets`]),
/// to be scrubbed from whatever is recorded of it.
pub(super) fn credentials(headers: &HeaderMap, named: &[String]) -> Vec<String> {
    redact::header_secrets(
        headers.iter().filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?))),
        named,
    )
}

/// A POST's `Content-Type` (JSON) and `Accept` (JSON or SSE); returns the
/// framings the client accepts.
///
/// # Errors
///
/// 415 or 406.
pub(super) fn check_post_headers(found: &FoundHeaders<'_>) -> Result<Accepts, RequestError> {
    if !is_json_content_type(found.content_type) {
        return Err(Unanswered::UnsupportedMediaType.into());
    }
    let accepts = found.accepts();
    if !accepts.json && !accepts.sse {
        return Err(Unanswered::NotAcceptable.into());
    }
    Ok(accepts)
}

/// DNS-rebinding defence: `Host` and `Origin`, when present, must name a
/// loopback host or one the user allowed.
pub(super) fn check_host_and_origin(
    version: hyper::Version,
    found: &FoundHeaders<'_>,
    uri: &hyper::Uri,
    allowed: &[String],
) -> Result<(), RequestError> {
    let forbidden = |header: &'static str, value: &str| -> RequestError {
        Unanswered::Forbidden { header, value: value.to_owned() }.into()
    };
    let host = match found.host {
        Some(value) => Some(value.to_str().map_err(|_| forbidden("Host", "(not ASCII)"))?),
        None => uri.authority().map(|a| a.as_str()),
    };
    match host {
        Some(host) if !is_allowed_authority(host, allowed) => return Err(forbidden("Host", host)),
        // RFC 9112 §3.2: an HTTP/1.1 request without Host is refused.
        None if version == hyper::Version::HTTP_11 => return Err(Unanswered::MissingHost.into()),
        _ => {}
    }
    if let Some(origin) = found.origin {
        let origin = origin.to_str().map_err(|_| forbidden("Origin", "(not ASCII)"))?;
        let authority = origin.split_once("://").map(|(_, rest)| rest.split('/').next().unwrap_or_default());
        if !authority.is_some_and(|a| is_allowed_authority(a, allowed)) {
            return Err(forbidden("Origin", origin));
        }
    }
    Ok(())
}

/// Whether `authority` (a Host, or an Origin's authority) names a loopback
/// host or one the user allowed, whatever its port. The usual one, the
/// loopback address and a port, is known by its bytes.
fn is_allowed_authority(authority: &str, allowed: &[String]) -> bool {
    let usual = authority
        .strip_prefix("127.0.0.1:")
        .is_some_and(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    usual || is_allowed_host(strip_port(authority), allowed)
}

/// The host of an authority: after any user part, before any port; an
/// IPv6 literal without its brackets. One pass over the bytes: every
/// request's Host is read, and it is too short for a search to pay.
fn strip_port(authority: &str) -> &str {
    let bytes = authority.as_bytes();
    // Where the part after the last `@` starts, and its first `:`.
    let (mut start, mut colon) = (0, None);
    for (at, byte) in bytes.iter().enumerate() {
        match byte {
            b'@' => (start, colon) = (at + 1, None),
            b':' if colon.is_none() => colon = Some(at),
            _ => {}
        }
    }
    if bytes.get(start) == Some(&b'[') {
        let literal = &authority[start + 1..];
        return literal.bytes().position(|b| b == b']').map_or(literal, |end| &literal[..end]);
    }
    &authority[start..colon.unwrap_or(bytes.len())]
}

fn is_allowed_host(host: &str, allowed: &[String]) -> bool {
    host == "127.0.0.1"
        || host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
        || allowed.iter().any(|name| name.eq_ignore_ascii_case(host))
}

/// A header's value, found already, as text; `None` when absent.
///
/// # Errors
///
/// 400 for a value that is not visible ASCII.
fn value_str<'a>(
    value: Option<&'a HeaderValue>,
    name: &'static HeaderName,
) -> Result<Option<&'a str>, RequestError> {
    match value {
        None => Ok(None),
        Some(value) => value.to_str().map(Some).map_err(|_| Unanswered::HeaderNotAscii(name.as_str()).into()),
    }
}

/// A header's text, read as `policy` says: one that is not visible ASCII
/// is refused, or read as absent (left for the upstream to judge).
pub(super) fn header_as<'a>(
    headers: &'a HeaderMap,
    name: &'static HeaderName,
    policy: Headers,
) -> Result<Option<&'a str>, RequestError> {
    value_as(headers.get(name), name, policy)
}

/// [`header_as`] of a value found already.
fn value_as<'a>(
    value: Option<&'a HeaderValue>,
    name: &'static HeaderName,
    policy: Headers,
) -> Result<Option<&'a str>, RequestError> {
    match (value_str(value, name), policy) {
        (Err(_), Headers::Passed) => Ok(None),
        (read, _) => read,
    }
}

fn is_json_content_type(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type else { return false };
    // The usual value is known without taking it apart.
    value.as_bytes() == b"application/json"
        || value
            .to_str()
            .ok()
            .and_then(|v| pieces(v, b';').next())
            .is_some_and(|media| media.trim_ascii().eq_ignore_ascii_case("application/json"))
}

/// The `Accept` value the official SDKs send. It allows both framings,
/// known without taking it apart (as [`Accepts::allow`] would).
const USUAL_ACCEPT: &[u8] = b"application/json, text/event-stream";

/// Which answer framings the client's `Accept` allows.
#[derive(Clone, Copy, Debug)]
pub(super) struct Accepts {
    pub(super) json: bool,
    pub(super) sse: bool,
}

impl Accepts {
    /// Adds what the media ranges of one `Accept` value allow.
    fn allow(&mut self, value: &str) {
        for range in pieces(value, b',') {
            let media = pieces(range, b';').next().unwrap_or_default().trim_ascii();
            let is = |name: &str| media.eq_ignore_ascii_case(name);
            if is("*/*") {
                *self = Accepts { json: true, sse: true };
            } else if is("application/*") || is("application/json") {
                self.json = true;
            } else if is("text/*") || is("text/event-stream") {
                self.sse = true;
            }
        }
    }
}

/// Where the client reached us, as an origin (`http://host:port`): from
/// `Host`, else the request target, else loopback.
pub(super) fn origin(headers: &HeaderMap, uri: &hyper::Uri) -> String {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    format!("http://{}", host.or(uri.authority().map(|a| a.as_str())).unwrap_or("127.0.0.1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass over the headers finds what a lookup of each header finds:
    /// the first value of each, whatever the other headers.
    #[test]
    fn post_headers_are_found_as_lookups_find_them() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("content-length", "12"),
            ("Mcp-Session-Id", "s-1"),
            ("mcp-param-region", "eu"),
            ("Content-Type", "application/json"),
            ("mcp-session-id", "s-2"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("content-type", "text/plain"),
            ("user-agent", "t"),
            ("mcp-name", "GetMessage"),
            ("host", "127.0.0.1:1"),
            ("origin", "http://localhost"),
            ("Host", "evil.example"),
        ] {
            headers.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_static(value));
        }
        let found = FoundHeaders::of(&headers);
        for (value, name) in [
            (found.host, &header::HOST),
            (found.origin, &header::ORIGIN),
            (found.content_type, &header::CONTENT_TYPE),
            (found.protocol_version, &PROTOCOL_VERSION),
            (found.session, &SESSION_ID),
            (found.method, &METHOD),
            (found.name, &NAME),
        ] {
            assert_eq!(value, headers.get(name), "{name}");
        }
        assert_eq!(found.session.map(HeaderValue::as_bytes), Some(&b"s-1"[..]), "the first of two");
        assert_eq!(found.content_type.map(HeaderValue::as_bytes), Some(&b"application/json"[..]));
    }

    proptest::proptest! {
        /// The host found in one pass over the bytes is the one splits at `@`, `]` and `:` find.
        #[test]
        fn hosts_are_found_as_splits_find_them(authority in "[a-z0-9:@\\[\\].é]{0,16}") {
            let after_user = authority.rsplit('@').next().unwrap_or_default();
            let plain = match after_user.strip_prefix('[') {
                Some(literal) => literal.split(']').next(),
                None => after_user.split(':').next(),
            };
            proptest::prop_assert_eq!(strip_port(&authority), plain.unwrap_or_default());
        }

        /// An authority known by its bytes is allowed as its host is.
        #[test]
        fn usual_authorities_are_allowed_as_their_hosts_are(
            authority in "(127\\.0\\.0\\.1:)?[0-9@:.a-z]{0,8}",
            allowed in proptest::sample::select(vec![vec![], vec!["evil".to_owned()]]),
        ) {
            proptest::prop_assert_eq!(
                is_allowed_authority(&authority, &allowed),
                is_allowed_host(strip_port(&authority), &allowed)
            );
        }

        /// Host and Origin found in one pass are the values a lookup finds (the first of each),
        /// among other headers, repeated or missing.
        #[test]
        fn host_and_origin_are_found_as_lookups_find_them(
            headers in proptest::collection::vec((0..4usize, 0..4usize), 0..6),
        ) {
            let names = [header::HOST, header::ORIGIN, header::ACCEPT, header::HeaderName::from_static("x-other")];
            let values = ["127.0.0.1:80", "evil.example", "http://localhost:3000", "http://evil.example"];
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.append(names[name].clone(), HeaderValue::from_static(values[value]));
            }
            let uri = hyper::Uri::from_static("/mcp");
            let looked_up = |name| map.get(name).map(|value: &HeaderValue| value.to_str().unwrap_or_default());
            let allowed = |authority: &str| is_allowed_host(strip_port(authority), &[]);
            let host_ok = looked_up(header::HOST).is_some_and(allowed);
            let origin_ok = looked_up(header::ORIGIN).is_none_or(|origin| {
                origin.split_once("://").is_some_and(|(_, rest)| allowed(rest.split('/').next().unwrap_or_default()))
            });
            let checked = check_host_and_origin(hyper::Version::HTTP_11, &FoundHeaders::of(&map), &uri, &[]);
            proptest::prop_assert_eq!(checked.is_ok(), host_ok && origin_ok, "{:?}", map);
        }
    }

    #[test]
    fn loopback_hosts_only_unless_allowed() {
        let ok = |h: &str| is_allowed_host(strip_port(h), &["tape.test".into()]);
        assert!(
            ok("127.0.0.1:5309")
                && ok("localhost")
                && ok("[::1]:80")
                && ok("LOCALHOST:1")
                && ok("tape.test:9")
        );
        assert!(ok("127.8.9.10"));
        assert!(!ok("evil.example.com") && !ok("10.0.0.1:5309") && !ok("localhost.evil.com"));
    }

    #[test]
    fn accept_header_decides_framing() {
        let of = |values: &[&[u8]]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(header::ACCEPT, HeaderValue::from_bytes(value).unwrap());
            }
            let a = FoundHeaders::of(&headers).accepts();
            (a.json, a.sse)
        };
        assert_eq!(of(&[b"application/json, text/event-stream"]), (true, true));
        assert_eq!(of(&[b"text/event-stream"]), (false, true));
        assert_eq!(of(&[b"application/json;q=0.9"]), (true, false));
        assert_eq!(of(&[b"*/*"]), (true, true));
        assert_eq!(of(&[b"image/png"]), (false, false));
        assert_eq!(of(&[]), (true, true), "no Accept: either");
        assert_eq!(of(&[b"application/json", b"text/event-stream"]), (true, true), "every Accept counts");
        assert_eq!(of(&[b"caf\xc3\xa9/x"]), (true, true), "no Accept value is text: either");
        assert_eq!(of(&[b"caf\xc3\xa9/x", b"text/*"]), (false, true), "the text ones count");
        assert_eq!(of(&[USUAL_ACCEPT, b"image/png"]), (true, true), "the usual value, then another");
        assert_eq!(of(&[b"image/png", USUAL_ACCEPT]), (true, true), "another, then the usual value");
        let mut usual = Accepts { json: false, sse: false };
        usual.allow(std::str::from_utf8(USUAL_ACCEPT).unwrap());
        assert_eq!((usual.json, usual.sse), (true, true), "the usual value, taken apart, allows both");
    }

    /// JSON bodies are told by their media type, whatever its case, spaces and parameters.
    #[test]
    fn json_content_types_are_told_by_their_media_type() {
        let is = |value: &str| is_json_content_type(Some(&HeaderValue::from_str(value).unwrap()));
        assert!(is("application/json") && is("Application/JSON") && is(" application/json ; charset=utf-8"));
        assert!(!is("application/jsonx") && !is("text/json") && !is("application/json-seq") && !is(""));
        assert!(!is_json_content_type(None));
    }
}
