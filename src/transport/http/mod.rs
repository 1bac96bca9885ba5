//! The Streamable HTTP front door, done once for every request in every
//! mode: Host/Origin check, path → server identity, the Agent 365 service
//! endpoints that are not MCP, and for a POST the content type, Accept, a
//! bounded body read and JSON-RPC parsing. The headers become the
//! [`Call`]'s era, session and [`Facts`]; the [`Engine`] says what to do,
//! and `frame` turns its answer into JSON, SSE or an empty 202. What a
//! recording engine forwards goes through its link, the [`Proxy`]; there,
//! a POST that is not a JSON-RPC message, and every GET and DELETE, go to
//! the upstream as they are. Every request leaves one log line.

mod app;
mod arrival;
mod frame;
mod headers;
mod holding;
mod llm;
mod noted;
mod post;
mod proxy;
mod request;
mod resume;
pub mod server;
mod service;
mod session;
mod status;
pub mod turns;
pub mod upstream;

use std::time::SystemTime;

use hyper::{Method, Request, Response};

pub use app::App;
pub use frame::Body;
pub use proxy::Proxy;
use request::{Logged, RequestLog, ServerName};
pub use request::{REQUEST_LINES, RequestBody};

use self::headers::{FoundHeaders, check_host_and_origin};
use self::noted::Wire;
use crate::agent365;
use crate::engine::Outcome;
use crate::error::{RequestError, Unanswered};
use crate::jsonrpc;
use crate::limits::{MAX_REQUEST_TARGET_BYTES, SHUTDOWN_GRACE};

/// A request no tape takes (`--tapes-on-stdin` between tapes, or in a
/// session an earlier tape opened): its fault's status and JSON-RPC error.
pub(super) fn refused(fault: Unanswered) -> Response<Body> {
    frame::error(&fault.into())
}

/// Handles one HTTP request. Never fails: every refusal is an HTTP answer.
/// `wire` is the connection's socket the answer goes out on; with none (a
/// request with no socket, a fuzzer's) an answer does not wait for what the
/// server said on the GET stream before it to be written.
pub async fn handle(request: Request<impl RequestBody>, app: &App, wire: Option<Wire>) -> Response<Body> {
    let mut line = RequestLog {
        http_method: request.method().clone(),
        started: SystemTime::now(),
        logged: Logged {
            server: ServerName::of(request.uri()),
            mcp_method: jsonrpc::Method::Borrowed(""),
            params: None,
            outcome: Outcome::Rejected,
            id: None,
        },
        written: false,
    };
    let answered = {
        tokio::select! {
            // The request first: one answered at its first poll (a replayed answer) never
            // subscribes to the shutdown signal.
            biased;
            answered = dispatch(request, app, wire, &mut line.logged) => answered,
            () = app.stopped() => Err(Unanswered::Stopping { grace: SHUTDOWN_GRACE }.into()),
        }
    };
    let response = match answered {
        Ok(response) => response,
        Err(mut error) => {
            if matches!(*error.fault, Unanswered::Stopping { .. }) {
                error.id = line.logged.id.take();
            }
            app.engine.failed(&error.fault);
            line.logged.outcome = Outcome::of(&error.fault);
            frame::error(&error)
        }
    };
    line.write(response.status().as_str(), "");
    response
}

async fn dispatch(
    request: Request<impl RequestBody>,
    app: &App,
    wire: Option<Wire>,
    logged: &mut Logged,
) -> Result<Response<Body>, RequestError> {
    let (parts, body) = request.into_parts();
    // What every request is checked by and a POST read by, found in one pass.
    let found = FoundHeaders::of(&parts.headers);
    check_host_and_origin(parts.version, &found, &parts.uri, &app.front_door.allowed_hosts)?;
    let target = parts.uri.path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_REQUEST_TARGET_BYTES {
        return Err(Unanswered::UriTooLong { limit: MAX_REQUEST_TARGET_BYTES }.into());
    }
    if !parts.uri.path().starts_with('/') {
        return Err(Unanswered::NotAPath.into());
    }
    // The futures of the rarer doors are boxed: a future is as large as its largest
    // branch, and a replayed POST's is moved whole as hyper takes it.
    if let Some((name, rest)) = llm::route(parts.uri.path()) {
        let (name, rest) = (name.to_owned(), rest.to_owned());
        return Box::pin(llm::serve(Request::from_parts(parts, body), &name, &rest, app, logged)).await;
    }
    if let Some(route) = agent365::route(parts.method.as_str(), parts.uri.path()) {
        return Box::pin(service::service(Request::from_parts(parts, body), route, app, logged)).await;
    }
    if parts.method == Method::POST {
        return post::post(&parts, &found, body, app, wire, logged).await;
    }
    Box::pin(session::other(Request::from_parts(parts, body), app, wire, logged)).await
}
