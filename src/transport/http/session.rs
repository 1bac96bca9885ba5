//! Anything but a POST: the health endpoint, a handshake-era session's
//! standalone stream (and its resumption), its end, and what an MCP
//! endpoint does not take; recording, the upstream's answer to each.

use hyper::{Method, Request, Response};

use super::app::App;
use super::frame::{self, Body};
use super::headers::{LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID, header_as};
use super::noted::Wire;
use super::request::{Logged, RequestBody, read_body};
use super::status;
use crate::engine::{Outcome, Resumption, SessionAsk, SessionStep};
use crate::error::{RequestError, Unanswered};
use crate::mcp;
use crate::model::Era;
use crate::util::printable;

/// Anything but a POST: the health endpoint, a handshake-era session's
/// standalone stream (resumed with `Last-Event-ID`), its end (DELETE), or
/// what an MCP endpoint does not take. The engine says what becomes of each
/// (recording: the upstream's, as it is).
pub(super) async fn other(
    request: Request<impl RequestBody>,
    app: &App,
    wire: Option<Wire>,
    logged: &mut Logged,
) -> Result<Response<Body>, RequestError> {
    let (engine, idle) = (&app.engine, app.front_door.idle_timeout);
    let method = request.method().clone();
    let health = method == Method::GET && request.uri().path().trim_end_matches('/') == "/health";
    let read = |name| header_as(request.headers(), name, app.policy.headers);
    // A health probe is answered whatever its headers say.
    let (era, session) = if health {
        (mcp::era_of(read(&PROTOCOL_VERSION).ok().flatten()), read(&SESSION_ID).ok().flatten())
    } else {
        (mcp::era_of(read(&PROTOCOL_VERSION)?), read(&SESSION_ID)?)
    };
    let mut resumed = None;
    if method == Method::GET
        && !health
        && let Some(session) = session
        && let Some(last) = read(&LAST_EVENT_ID)?
    {
        match engine.resume(era, session)? {
            // A recorded answer's stream the upstream closed early.
            Resumption::Forward(proxy) => {
                if let Some(parked) = proxy.parked(session, last) {
                    let (parts, body) = request.into_parts();
                    let body = read_body(body, idle).await?;
                    logged.outcome = Outcome::Resumed;
                    return proxy.resume(&parts, body, parked).await;
                }
            }
            Resumption::Kept => match app.resumable.after(session, last) {
                Some(rest) if !rest.standalone => {
                    logged.outcome = Outcome::Resumed;
                    return Ok(frame::resumed(rest, &app.policy, session));
                }
                Some(rest) => resumed = Some(rest),
                None => tracing::debug!(
                    "Last-Event-ID {} names no stream replay can resume; a new standalone stream opens",
                    printable(last)
                ),
            },
            Resumption::Fresh => {}
        }
    }
    let ask = match method {
        Method::GET if health => SessionAsk::Health,
        Method::GET => SessionAsk::OpenStream,
        Method::DELETE => SessionAsk::End,
        _ => SessionAsk::Other,
    };
    match engine.session(ask, era, session, logged.server.as_str())? {
        SessionStep::Health(health) => {
            logged.outcome = Outcome::Health;
            Ok(frame::json(status::DONE, &health))
        }
        SessionStep::NotAllowed if era == Era::Stateless && ask != SessionAsk::Other => {
            not_allowed("POST", "the stateless protocol era uses POST only")
        }
        SessionStep::NotAllowed => {
            not_allowed("GET, POST, DELETE", "MCP endpoints take POST, GET and DELETE")
        }
        SessionStep::NoStream => not_allowed("POST, DELETE", "this server offers no standalone SSE stream"),
        SessionStep::Stream(stream) => {
            logged.outcome = if resumed.is_some() { Outcome::Resumed } else { Outcome::Streaming };
            Ok(frame::stream(stream, &app.resumable, session.unwrap_or_default(), resumed, wire))
        }
        SessionStep::Ended => {
            app.resumable.forget(session.unwrap_or_default());
            logged.outcome = Outcome::Ended;
            Ok(frame::empty(status::DONE))
        }
        SessionStep::Forward(proxy, listener) => {
            let (parts, body) = request.into_parts();
            let body = read_body(body, idle).await?;
            logged.outcome = Outcome::Forwarded;
            match listener {
                // The standalone stream: what the server says there is recorded.
                Some(listener) => proxy.listen(&parts, body, listener).await,
                None => proxy.relay(&parts, body).await,
            }
        }
    }
}

/// 405, allowing `allow` (`why`).
fn not_allowed(allow: &'static str, why: &'static str) -> Result<Response<Body>, RequestError> {
    Err(Unanswered::MethodNotAllowed { allow, why }.into())
}
