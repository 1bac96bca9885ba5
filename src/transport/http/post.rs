//! A POST: its message read (off the async workers when large) and handed
//! to the engine with what its headers say, and what the engine made of it
//! enacted: an answer framed, an acknowledgement, a forward, a fault.

use std::sync::Arc;

use bytes::Bytes;
use hyper::Response;

use super::app::App;
use super::frame::{self, Body};
use super::headers::{Accepts, Context, FoundHeaders, check_post_headers};
use super::noted::Wire;
use super::proxy::Proxy;
use super::request::{Logged, RequestBody, read_body};
use super::status;
use crate::engine::{Call, Failure, Flight, FromClient, Outcome, Step};
use crate::error::RequestError;
use crate::jsonrpc::Message;
use crate::limits::{MAX_ASIDE_WRITE_WAIT, MAX_HANG, MAX_HANGING_REQUESTS};
use crate::mcp;
use crate::model::Era;
use crate::util;

/// A POST: one JSON-RPC message to the engine. Recording, anything the
/// front door cannot read as one goes to the upstream as it is, for the
/// upstream to judge.
pub(super) async fn post<'h>(
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
    let post = Post { parts, body, headers: read, wire };
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
    let message = crate::transport::parse_message(body, &app.params)?;
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
    headers: PostHeaders<'h>,
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
            let session = post.headers.session;
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
            let resume =
                in_session.filter(|_| app.policy.resumable_answers && post.headers.era == Era::Handshake);
            let resume = resume.map(|session| frame::Resume {
                streams: &app.resumable,
                session,
                primable: post.headers.primable,
            });
            let response = frame::answer(answer, post.headers.accepts, resume, &app.policy, session);
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
            app.engine.say(post.headers.session, said);
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
                            post.headers.accepts,
                        ));
                    };
                    Box::pin(tokio::time::sleep(MAX_HANG)).await;
                    Ok(frame::failure(Failure::Http { status: 504, retry_after: None }, post.headers.accepts))
                }
                failure => Ok(frame::failure(failure, post.headers.accepts)),
            }
        }
    }
}
