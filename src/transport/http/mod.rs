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
mod proxy;
mod request;
mod resume;
pub mod server;
mod status;
pub mod turns;
pub mod upstream;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hyper::{Method, Request, Response};

pub use app::App;
pub use frame::Body;
pub use proxy::Proxy;
use request::{Logged, RequestLog, ServerName, read_body};
pub use request::{REQUEST_LINES, RequestBody};

use self::headers::{
    Accepts, Context, FoundHeaders, LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_ID, check_host_and_origin,
    check_post_headers, credentials, header_as, origin,
};
use self::noted::Wire;
use crate::agent365;
use crate::engine::{
    Call, Failure, Flight, FromClient, Outcome, Resumption, ServiceStep, SessionAsk, SessionStep, Step,
};
use crate::error::{RequestError, Unanswered};
use crate::jsonrpc::{self, Message};
use crate::limits::{
    MAX_ASIDE_WRITE_WAIT, MAX_HANG, MAX_HANGING_REQUESTS, MAX_REQUEST_TARGET_BYTES, SHUTDOWN_GRACE,
};
use crate::mcp;
use crate::model::{Era, ServiceRoute};
use crate::util::{self, printable};

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
        return Box::pin(service(Request::from_parts(parts, body), route, app, logged)).await;
    }
    if parts.method == Method::POST {
        return post(&parts, &found, body, app, wire, logged).await;
    }
    Box::pin(other(Request::from_parts(parts, body), app, wire, logged)).await
}

/// Forwards a request that is not an MCP message, as it is.
async fn relay(
    request: Request<impl RequestBody>,
    proxy: &Proxy,
    idle: Duration,
    logged: &mut Logged,
) -> Result<Response<Body>, RequestError> {
    let (parts, body) = request.into_parts();
    let body = read_body(body, idle).await?;
    logged.outcome = Outcome::Forwarded;
    proxy.relay(&parts, body).await
}

/// A POST: one JSON-RPC message to the engine. Recording, anything the
/// front door cannot read as one goes to the upstream as it is, for the
/// upstream to judge.
async fn post<'h>(
    parts: &'h hyper::http::request::Parts,
    found: &FoundHeaders<'h>,
    body: impl RequestBody,
    app: &App,
    wire: Option<Wire>,
    logged: &mut Logged,
) -> Result<Response<Body>, RequestError> {
    let body = read_body(body, app.front_door.idle_timeout).await?;
    // Held until the answer is made: large requests in work at once are bounded in bytes.
    let _turn = util::large_work_turn(body.len()).await;
    // Reading, scrubbing and matching a large body take time in its size: off the async workers.
    let (step, read) = match util::sized_work(body.len(), || step(parts, found, &body, app, logged)) {
        Ok(stepped) => stepped?,
        Err(error) => {
            let proxy = app.engine.unread(error)?;
            logged.outcome = Outcome::Forwarded;
            return Box::pin(proxy.relay(parts, body)).await;
        }
    };
    let PostHeaders { accepts, session, era, primable } = read;
    let post = Post { parts, body, accepts, session, era, primable, wire };
    respond(step, app, &post, logged).await
}

/// What a POST's headers said, beside what the engine made of its message.
struct PostHeaders<'h> {
    accepts: Accepts,
    session: Option<&'h str>,
    era: Era,
    /// The client takes SSE priming events ([`mcp::takes_priming_events`]).
    primable: bool,
}

/// Reads a POST's message and hands it to the engine. The outer error is a
/// message the front door cannot read (the engine says what becomes of
/// it); the inner one the engine's.
fn step<'a, 'h>(
    parts: &'h hyper::http::request::Parts,
    found: &FoundHeaders<'h>,
    body: &[u8],
    app: &'a App,
    logged: &mut Logged,
) -> Result<Stepped<'a, 'h>, RequestError> {
    let accepts = check_post_headers(found)?;
    let message = super::parse_message(body, &app.params)?;
    let Context { era, session, facts } =
        Context::read(&parts.headers, found, app.policy.headers, &app.redact_headers)?;
    // Whether the client takes SSE priming events, from the version it speaks (no copy of it kept).
    let header_version = facts.routing.as_ref().and_then(|r| r.protocol_version);
    let mut primable = header_version.is_some_and(mcp::takes_priming_events);
    let step = match message {
        Message::Request { id, method, params } => {
            let call = Call {
                server: logged.server.as_str(),
                era,
                session,
                id: &id,
                method: &method,
                params: params.as_ref(),
                facts: &facts,
            };
            if method == "initialize" && header_version.is_none() {
                // No header yet: the version the client asks for is in the request.
                let asked = call.params().and_then(|p| p.get("protocolVersion")).and_then(|v| v.as_str());
                primable = asked.is_some_and(mcp::takes_priming_events);
            }
            let step = app.engine.request(&call);
            logged.params = params;
            logged.mcp_method = method;
            logged.id = Some(id);
            step
        }
        Message::Notification { method, .. } => {
            let step = app.engine.client_message(era, session, FromClient::Notification(&method));
            logged.mcp_method = method;
            step
        }
        Message::Response { id, body: reply } => {
            logged.mcp_method = "(response)".into();
            app.engine.client_message(era, session, FromClient::Reply(id.as_ref(), reply))
        }
    };
    Ok(step.map(|step| (step, PostHeaders { accepts, session, era, primable })))
}

/// What the engine made of a POST's message, and what its headers said.
type Stepped<'a, 'h> = Result<(Step<'a, Proxy>, PostHeaders<'h>), RequestError>;

/// A POST the engine has read, for enacting its answer.
struct Post<'h> {
    parts: &'h hyper::http::request::Parts,
    body: Bytes,
    accepts: Accepts,
    session: Option<&'h str>,
    era: Era,
    /// The client takes SSE priming events ([`mcp::takes_priming_events`]).
    primable: bool,
    /// The connection the answer goes out on.
    wire: Option<Wire>,
}

/// Enacts what the engine made of a POST.
async fn respond(
    step: Step<'_, Proxy>,
    app: &App,
    post: &Post<'_>,
    logged: &mut Logged,
) -> Result<Response<Body>, RequestError> {
    match step {
        Step::Answer(mut answer) => {
            logged.outcome = answer.outcome;
            let session = post.session;
            let first = std::mem::take(&mut answer.asides.first);
            let said = std::mem::take(&mut answer.asides.now);
            let opened = answer.session_id.clone();
            let in_session = opened.as_deref().or(session);
            // What the server said while the exchange was in flight goes out before its answer,
            // after what it said after the session's previous answer: the answer waits until
            // they have been written (for a while: a client that does not read its GET stream
            // does not hold up its answers).
            let before = app.engine.say_before(in_session, first);
            // Boxed, as the other waits below: they are rare, and each timer would otherwise
            // add its size to every request's state.
            if let Some(written) = before.or_else(|| answer.behind.take()) {
                let _ = Box::pin(tokio::time::timeout(MAX_ASIDE_WRITE_WAIT, written)).await;
            }
            // Replayed handshake-era streams in a session can be resumed.
            let resume = in_session.filter(|_| app.policy.resumable_answers && post.era == Era::Handshake);
            let resume = resume.map(|session| frame::Resume {
                streams: &app.resumable,
                session,
                primable: post.primable,
            });
            let response = frame::answer(answer, post.accepts, resume, &app.policy, session);
            // What it said after the answer goes once the answer has been written.
            Ok(match app.engine.say_after(in_session, said) {
                Some(written) => frame::announce(response, written, post.wire.clone()),
                None => response,
            })
        }
        Step::Accepted => {
            logged.outcome = Outcome::Accepted;
            Ok(frame::empty(status::TAKEN))
        }
        Step::Said(said) => {
            logged.outcome = Outcome::Accepted;
            app.engine.say(post.session, said);
            Ok(frame::empty(status::TAKEN))
        }
        Step::Forward { link, flight } => {
            // What the server says on its GET stream after this answer waits for it to be written.
            let written = flight.as_ref().map(Flight::when_written);
            let exchange = link.exchange(post.parts, post.body.clone(), flight, &mut logged.outcome);
            let response = Box::pin(exchange).await?;
            Ok(match written {
                Some(written) => frame::announce(response, written, post.wire.clone()),
                None => response,
            })
        }
        Step::Delayed { by, then } => {
            logged.outcome = Outcome::Injected;
            Box::pin(tokio::time::sleep(by)).await;
            Box::pin(respond(*then, app, post, logged)).await
        }
        Step::Fail(failure) => {
            logged.outcome = Outcome::Injected;
            match failure {
                // Until the client gives up (hyper then drops this handler), the daemon
                // stops, or a gateway in front would give up (504); a connection is held
                // by a bounded number of hangs at once, past which the gateway is busy (503).
                Failure::Hang => {
                    let Ok(_room) = Arc::clone(&app.hanging).try_acquire_owned() else {
                        tracing::warn!(
                            "a hang fault found {MAX_HANGING_REQUESTS} requests hanging already: 503 instead"
                        );
                        return Ok(frame::failure(
                            Failure::Http { status: 503, retry_after: None },
                            post.accepts,
                        ));
                    };
                    Box::pin(tokio::time::sleep(MAX_HANG)).await;
                    Ok(frame::failure(Failure::Http { status: 504, retry_after: None }, post.accepts))
                }
                failure => Ok(frame::failure(failure, post.accepts)),
            }
        }
    }
}

/// An Agent 365 service endpoint: replay answers it whatever the body (a
/// chat-message body, the user's conversation, is logged at debug level
/// and dropped); recording forwards it.
async fn service(
    request: Request<impl RequestBody>,
    route: ServiceRoute,
    app: &App,
    logged: &mut Logged,
) -> Result<Response<Body>, RequestError> {
    let (parts, body) = request.into_parts();
    let origin = origin(&parts.headers, &parts.uri);
    let body = read_body(body, app.front_door.idle_timeout).await?;
    match app.engine.service(route, &origin, credentials(&parts.headers, &app.redact_headers)) {
        ServiceStep::Answer(reply) => {
            if route == ServiceRoute::ChatMessage {
                tracing::debug!("chat-message: {:?}", String::from_utf8_lossy(&body));
            }
            logged.outcome = reply.outcome;
            Ok(frame::service(reply))
        }
        ServiceStep::Forward { link, flight } => {
            link.service(&parts, body, route, &origin, flight, &mut logged.outcome).await
        }
    }
}

/// Anything but a POST: the health endpoint, a handshake-era session's
/// standalone stream (resumed with `Last-Event-ID`), its end (DELETE), or
/// what an MCP endpoint does not take. The engine says what becomes of each
/// (recording: the upstream's, as it is).
async fn other(
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
            Err(Unanswered::MethodNotAllowed {
                allow: "POST",
                why: "the stateless protocol era uses POST only",
            }
            .into())
        }
        SessionStep::NotAllowed => Err(Unanswered::MethodNotAllowed {
            allow: "GET, POST, DELETE",
            why: "MCP endpoints take POST, GET and DELETE",
        }
        .into()),
        SessionStep::NoStream => Err(Unanswered::MethodNotAllowed {
            allow: "POST, DELETE",
            why: "this server offers no standalone SSE stream",
        }
        .into()),
        SessionStep::Stream(stream) => {
            logged.outcome = if resumed.is_some() { Outcome::Resumed } else { Outcome::Streaming };
            Ok(frame::stream(stream, &app.resumable, session.unwrap_or_default(), resumed, wire))
        }
        SessionStep::Ended => {
            app.resumable.forget(session.unwrap_or_default());
            logged.outcome = Outcome::Ended;
            Ok(frame::empty(status::DONE))
        }
        // The standalone stream: what the server says there is recorded.
        SessionStep::Forward(proxy, Some(listener)) => {
            let (parts, body) = request.into_parts();
            let body = read_body(body, idle).await?;
            logged.outcome = Outcome::Forwarded;
            proxy.listen(&parts, body, listener).await
        }
        SessionStep::Forward(proxy, None) => relay(request, proxy, idle, logged).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name kept as a part of the path reads as the name the path gives.
    #[test]
    fn server_names_are_read_from_the_path() {
        for target in [
            "/agents/servers/mcp_MailTools",
            "/agents/servers/mcp_MailTools/?x=1",
            "/agents/tenants/t/servers/mcp_Me/",
            "/mcp",
            "/",
            "//",
            "*",
            "127.0.0.1:80",
        ] {
            let uri: hyper::Uri = target.parse().unwrap();
            assert_eq!(ServerName::of(&uri).as_str(), agent365::server_name(uri.path()), "{target}");
        }
    }
}
