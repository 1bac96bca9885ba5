//! The one pooled HTTP client to the upstream MCP server: hyper-util's
//! client over hyper-rustls (public web roots plus an optional CA file;
//! HTTP/1.1, and HTTP/2 where TLS negotiates it), with connect and response
//! timeouts. Also which headers a proxy must not forward.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName};
use hyper::http::uri::{Authority, Scheme};
use hyper::{Request, Response, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::config::Timeouts;
use crate::error::{Error, UpstreamFailure};

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
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// Scheme, authority and base path, without a trailing slash.
    base: String,
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
        let uri: Uri = base.parse().map_err(|e| Error::Config(format!("--upstream {base:?}: {e}")))?;
        let (scheme, authority) = match (uri.scheme(), uri.authority()) {
            (Some(scheme), Some(authority)) if matches!(scheme.as_str(), "http" | "https") => {
                (scheme.clone(), authority.clone())
            }
            _ => {
                return Err(Error::Config(format!(
                    "--upstream {base:?}: expected an http:// or https:// URL"
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
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(UpstreamClient { client, base, scheme, authority, prefix, timeouts })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// The upstream URI for a request to `path_and_query` on the proxy:
    /// the upstream's scheme and authority, its path with `path_and_query`
    /// after it. Built from its parts, so nothing in the request can change
    /// where it goes.
    pub fn uri_for(&self, path_and_query: &str) -> Result<Uri, UpstreamFailure> {
        let bad = |why: String| UpstreamFailure::Address(why);
        if !path_and_query.starts_with('/') {
            return Err(bad(format!("{path_and_query:?} is not a path")));
        }
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(format!("{}{path_and_query}", self.prefix))
            .build()
            .map_err(|e| bad(format!("{e}")))
    }

    /// Sends `request` and waits for the answer's head.
    ///
    /// # Errors
    ///
    /// Why, naming the upstream: refused, unreachable, TLS failure, not
    /// HTTP ([`UpstreamFailure::Failed`]), or no answer within the response
    /// timeout ([`UpstreamFailure::Silent`]).
    pub async fn send(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, UpstreamFailure> {
        match tokio::time::timeout(self.timeouts.response, self.client.request(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(UpstreamFailure::Failed { upstream: self.base.clone(), why: error_chain(&e) }),
            Err(_) => {
                Err(UpstreamFailure::Silent { upstream: self.base.clone(), after: self.timeouts.response })
            }
        }
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
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let err = UpstreamClient::new("https://h", Some(&empty), timeouts()).err().unwrap().to_string();
        assert!(err.contains("--upstream-ca"), "{err}");
    }
}
