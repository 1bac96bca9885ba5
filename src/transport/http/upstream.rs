//! The one pooled HTTP client to the upstream MCP server: hyper-util's
//! client over hyper-rustls (public web roots plus an optional CA file;
//! HTTP/1.1, and HTTP/2 where TLS negotiates it), with connect and response
//! timeouts, and one retry of a request that met a reused connection the
//! server had already closed. Also which headers a proxy must not forward.

use std::io::ErrorKind;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName};
use hyper::http::uri::{Authority, Scheme};
use hyper::{Request, Response, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::arrival::Stamping;
use super::noted::{Noted, Notes};
use crate::config::Timeouts;
use crate::error::{Error, UpstreamFailure};
use crate::{redact, util};

/// Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus
/// the ones the proxy sets itself (`host`, `content-length`).
const NOT_FORWARDED: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// `headers` without hop-by-hop ones (also those `Connection` names),
/// `Host` and `Content-Length`.
pub fn forwardable(headers: &HeaderMap) -> HeaderMap {
    let named_by_connection: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let lower = name.as_str();
        if NOT_FORWARDED.contains(&lower)
            || *name == header::CONTENT_LENGTH
            || named_by_connection.iter().any(|n| n == lower)
        {
            continue;
        }
        kept.append(HeaderName::clone(name), value.clone());
    }
    kept
}

/// The upstream server and the client that reaches it.
pub struct UpstreamClient {
    client: Client<Tallying<HttpsConnector<Stamping>>, Full<Bytes>>,
    /// Scheme, authority and base path, without a trailing slash.
    base: String,
    /// `base` as log lines and messages show it, without credentials
    /// ([`redact::url_for_log`]).
    shown: String,
    /// `base` read once: every request's URI is built from these parts.
    scheme: Scheme,
    authority: Authority,
    /// The base path, without a trailing slash (empty for none).
    prefix: String,
    timeouts: Timeouts,
}

impl UpstreamClient {
    /// # Errors
    ///
    /// [`Error::Config`] for a URL that is not http(s) or a CA file that
    /// cannot be read or holds no certificate.
    pub fn new(base: &str, ca_file: Option<&Path>, timeouts: Timeouts) -> Result<UpstreamClient, Error> {
        let base = base.trim_end_matches('/').to_owned();
        let shown = redact::url_for_log(&base);
        let uri: Uri = base.parse().map_err(|e| Error::Config(format!("--upstream {shown:?}: {e}")))?;
        let (scheme, authority) = match (uri.scheme(), uri.authority()) {
            (Some(scheme), Some(authority)) if matches!(scheme.as_str(), "http" | "https") => {
                (scheme.clone(), authority.clone())
            }
            _ => {
                return Err(Error::Config(format!(
                    "--upstream {shown:?}: expected an http:// or https:// URL"
                )));
            }
        };
        let prefix = uri.path().trim_end_matches('/').to_owned();
        let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        if let Some(path) = ca_file {
            let bad = |why: String| Error::Config(format!("--upstream-ca {}: {why}", path.display()));
            let certificates: Vec<CertificateDer> = CertificateDer::pem_file_iter(path)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<_, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if certificates.is_empty() {
                return Err(bad("no PEM certificate in the file".into()));
            }
            for certificate in certificates {
                roots.add(certificate).map_err(|e| bad(e.to_string()))?;
            }
        }
        let tls =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| Error::Config(format!("TLS set-up failed: {e}")))?
                .with_root_certificates(roots)
                .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(timeouts.connect));
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(Stamping(http));
        let client = Client::builder(TokioExecutor::new()).build(Tallying(https));
        Ok(UpstreamClient { client, base, shown, scheme, authority, prefix, timeouts })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// The upstream's URL as a log line or a message may show it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// The upstream URI for a request to `path_and_query` on the proxy:
    /// the upstream's scheme and authority, then the request's path as it
    /// is when it already starts with the upstream URL's path (a client at
    /// the tape's `/mcp` with `--upstream http://host/mcp` reaches
    /// `/mcp`), the upstream URL's path alone for the tape's root, else the
    /// upstream URL's path with the request's after it (a base URL).
    /// Built from its parts, so nothing in the request can change where it
    /// goes.
    pub fn uri_for(&self, path_and_query: &str) -> Result<Uri, UpstreamFailure> {
        let bad = |why: String| UpstreamFailure::Address(why);
        if !path_and_query.starts_with('/') {
            return Err(bad(format!("{path_and_query:?} is not a path")));
        }
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        let prefix = self.prefix.as_str();
        let within = path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        let path = match path {
            _ if prefix.is_empty() || within => path.to_owned(),
            "/" => prefix.to_owned(),
            _ => format!("{prefix}{path}"),
        };
        let path_and_query = match query {
            Some(query) => format!("{path}?{query}"),
            None => path,
        };
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path_and_query)
            .build()
            .map_err(|e| bad(format!("{e}")))
    }

    /// The upstream URI for `rest_and_query` under the upstream URL: its
    /// path always after the URL's (a model's base URL), built from parts
    /// as [`UpstreamClient::uri_for`] builds its own.
    pub fn uri_under(&self, rest_and_query: &str) -> Result<Uri, UpstreamFailure> {
        if !rest_and_query.starts_with('/') {
            return Err(UpstreamFailure::Address(format!("{rest_and_query:?} is not a path")));
        }
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(format!("{}{rest_and_query}", self.prefix))
            .build()
            .map_err(|e| UpstreamFailure::Address(format!("{e}")))
    }

    /// The failure an answer to `path` is when it is a redirect: where it
    /// pointed, and the `--upstream` URL that reaches that place directly.
    pub fn redirect<B>(&self, path: &str, response: &Response<B>) -> Option<UpstreamFailure> {
        if !response.status().is_redirection() {
            return None;
        }
        let to = response.headers().get(header::LOCATION)?.to_str().unwrap_or("(not text)");
        let target = to.parse::<Uri>().ok();
        let (scheme, authority) =
            match target.as_ref().and_then(|uri| Some((uri.scheme()?, uri.authority()?))) {
                Some((scheme, authority)) => (scheme.as_str().to_owned(), authority.as_str().to_owned()),
                None => (self.scheme.as_str().to_owned(), self.authority.as_str().to_owned()),
            };
        let target_path = target.as_ref().map_or("/", Uri::path).trim_end_matches('/');
        Some(UpstreamFailure::Redirected {
            upstream: self.shown.clone(),
            from: util::printable(path).into_owned(),
            to: util::printable(&redact::url_for_log(to)).into_owned(),
            instead: util::printable(&redact::url_for_log(&format!("{scheme}://{authority}{target_path}")))
                .into_owned(),
        })
    }

    /// Sends `request` and waits for the answer's head. A request that met
    /// a kept-alive connection the server had closed before it answered
    /// anything on it (the race every keep-alive client meets, `Traffic`)
    /// is sent once more, on another connection.
    ///
    /// # Errors
    ///
    /// Why, naming the upstream: refused, unreachable, TLS failure, not
    /// HTTP ([`UpstreamFailure::Failed`]), or no answer within the response
    /// timeout ([`UpstreamFailure::Silent`]).
    pub async fn send(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, UpstreamFailure> {
        let (parts, body) = request.into_parts();
        let again = || {
            let mut request = Request::new(body.clone());
            *request.method_mut() = parts.method.clone();
            *request.uri_mut() = parts.uri.clone();
            *request.headers_mut() = parts.headers.clone();
            request
        };
        let sent = tokio::time::timeout(self.timeouts.response, async {
            match self.client.request(again()).await {
                Err(e) if met_a_closed_connection(&e) => {
                    tracing::debug!(
                        "the upstream had closed a kept-alive connection ({}); sent again",
                        error_chain(&e)
                    );
                    self.client.request(again()).await
                }
                sent => sent,
            }
        });
        match sent.await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(UpstreamFailure::Failed { upstream: self.shown.clone(), why: error_chain(&e) }),
            Err(_) => {
                Err(UpstreamFailure::Silent { upstream: self.shown.clone(), after: self.timeouts.response })
            }
        }
    }
}

/// Whether `error` is a connection that an earlier exchange had used and
/// that the server closed (or reset) without sending a byte of its answer
/// to this request: the server let the connection go before it read the
/// request, so nothing was done and sending it again is safe. A fresh
/// connection, an HTTP/2 one, or any answer begun is never retried.
fn met_a_closed_connection(error: &hyper_util::client::legacy::Error) -> bool {
    let Some(connected) = error.connect_info() else { return false };
    if connected.is_negotiated_h2() {
        return false;
    }
    let mut extensions = http::Extensions::new();
    connected.get_extras(&mut extensions);
    let Some(traffic) = extensions.get::<Arc<Traffic>>() else { return false };
    if traffic.requests.load(Ordering::Relaxed) < 2 || traffic.answered.load(Ordering::Relaxed) {
        return false;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(inner) = cause {
        if inner.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_incomplete_message)
            || inner.downcast_ref::<std::io::Error>().is_some_and(|e| {
                matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::ConnectionAborted
                )
            })
        {
            return true;
        }
        cause = inner.source();
    }
    false
}

/// What one upstream connection has carried, as HTTP/1.1 sees it: a
/// request is a run of writes after a read (or the first), and whether the
/// server has sent anything since the current one began.
#[derive(Default)]
struct Traffic {
    requests: AtomicU32,
    answered: AtomicBool,
    writing: AtomicBool,
}

/// The connector, whose connections note their [`Traffic`].
#[derive(Clone)]
struct Tallying<C>(C);

/// A connection (hyper's) that notes its [`Traffic`].
type Tallied<T> = TokioIo<Noted<TokioIo<T>, Arc<Traffic>>>;

impl<C> tower_service::Service<Uri> for Tallying<C>
where
    C: tower_service::Service<Uri>,
    C::Future: Send + 'static,
{
    type Response = Tallied<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, C::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), C::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            let io = TokioIo::new(connecting.await?);
            Ok(TokioIo::new(Noted { io, notes: Arc::default() }))
        })
    }
}

/// A connection's reads and writes, noted in its [`Traffic`], which it
/// hands to hyper-util as an extra of its [`Connected`] (so an error
/// carries it).
impl<T> Notes<T> for Arc<Traffic> {
    /// The server spoke.
    fn read(&self, _got: &[u8]) {
        self.answered.store(true, Ordering::Relaxed);
        self.writing.store(false, Ordering::Relaxed);
    }

    /// The first write after the server last spoke begins a request.
    fn writing(&self) {
        if !self.writing.swap(true, Ordering::Relaxed) {
            self.requests.fetch_add(1, Ordering::Relaxed);
            self.answered.store(false, Ordering::Relaxed);
        }
    }

    fn connected(&self, connected: Connected) -> Connected {
        connected.extra(Arc::clone(self))
    }
}

/// An error and its causes on one line, innermost last.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;
    use std::time::Duration;

    #[test]
    fn hop_by_hop_and_connection_named_headers_stay_behind() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, x-trace"),
            ("x-trace", "1"),
            ("keep-alive", "timeout=5"),
            ("host", "127.0.0.1:5309"),
            ("content-length", "12"),
            ("authorization", "Bearer t"),
            ("mcp-session-id", "s"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        let kept = forwardable(&headers);
        let names: Vec<&str> = kept.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["authorization", "mcp-session-id"]);
    }

    fn timeouts() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(1),
            response: Duration::from_secs(1),
            idle: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_base_url_is_checked_and_paths_are_appended() {
        let upstream =
            UpstreamClient::new("https://agent365.svc.cloud.microsoft/", None, timeouts()).unwrap();
        assert_eq!(
            upstream.uri_for("/agents/servers/mcp_MailTools?x=1").unwrap().to_string(),
            "https://agent365.svc.cloud.microsoft/agents/servers/mcp_MailTools?x=1"
        );
        assert!(UpstreamClient::new("ftp://host", None, timeouts()).is_err());
        let mcp = UpstreamClient::new("http://127.0.0.1:8765/mcp", None, timeouts()).unwrap();
        let at = |path: &str| mcp.uri_for(path).unwrap().to_string();
        assert_eq!(at("/mcp"), "http://127.0.0.1:8765/mcp", "the same path reaches it");
        assert_eq!(at("/mcp?x=1"), "http://127.0.0.1:8765/mcp?x=1");
        assert_eq!(at("/mcp/sub"), "http://127.0.0.1:8765/mcp/sub");
        assert_eq!(at("/"), "http://127.0.0.1:8765/mcp", "the tape's root is the server's URL");
        assert_eq!(at("/?x=1"), "http://127.0.0.1:8765/mcp?x=1");
        assert_eq!(at("/mcpx"), "http://127.0.0.1:8765/mcp/mcpx", "a base URL otherwise");
        assert_eq!(at("/agents/servers/A"), "http://127.0.0.1:8765/mcp/agents/servers/A");
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let err = UpstreamClient::new("https://h", Some(&empty), timeouts()).err().unwrap().to_string();
        assert!(err.contains("--upstream-ca"), "{err}");
    }
}
