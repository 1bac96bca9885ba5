//! The Agent 365 service endpoints that are not MCP (the gateway's
//! discovery, chat messages).

use hyper::{Request, Response};

use super::app::App;
use super::frame::Body;
use super::headers::{credentials, origin};
use super::request::{Logged, RequestBody, read_body};
use crate::engine::PlainStep;
use crate::error::RequestError;
use crate::model::ServiceRoute;

/// An Agent 365 service endpoint: replay answers it whatever the body (a
/// chat-message body, the user's conversation, is logged at debug level
/// and dropped); recording forwards it.
pub(super) async fn service(
    request: Request<impl RequestBody>,
    route: ServiceRoute,
    app: &App,
    logged: &mut Logged,
) -> Result<Response<Body>, RequestError> {
    let (parts, body) = request.into_parts();
    let origin = origin(&parts.headers, &parts.uri);
    let body = read_body(body, app.front_door.idle_timeout).await?;
    match app.engine.service(route, &origin, credentials(&parts.headers, &app.redact_headers)) {
        PlainStep::Answer(reply) => {
            if route == ServiceRoute::ChatMessage {
                tracing::debug!("chat-message: {:?}", String::from_utf8_lossy(&body));
            }
            logged.outcome = reply.outcome;
            Ok(super::llm::answer(reply))
        }
        PlainStep::Forward { link, flight } => {
            link.service(&parts, body, route, &origin, flight, &mut logged.outcome).await
        }
    }
}
