//! Replay's answers to the Agent 365 service endpoints that are not MCP
//! (gateway discovery, chat history): as recorded, else as the service
//! would answer.

use serde_json::Value;

use super::Replay;
use crate::agent365;
use crate::config::Pace;
use crate::engine::step::{Outcome, PlainReply};
use crate::model::{LlmAnswer, ServiceAnswer, ServiceRoute, Status};

/// The newest recorded answer of each Agent 365 service endpoint; both
/// gateway shapes share one slot, since either answers the other.
#[derive(Debug, Default)]
pub struct ServiceAnswers {
    gateway: Option<ServiceAnswer>,
    chat_message: Option<ServiceAnswer>,
}

impl ServiceAnswers {
    pub fn new(answers: Vec<ServiceAnswer>) -> ServiceAnswers {
        let mut newest = ServiceAnswers::default();
        for answer in answers {
            let slot = if answer.route.is_gateway() { &mut newest.gateway } else { &mut newest.chat_message };
            *slot = Some(answer);
        }
        newest
    }
}

impl Replay {
    /// Answers an Agent 365 service endpoint as the cassette recorded it,
    /// else as the service would. `origin` (`http://host:port`, as the
    /// client reached us) is where listed servers point: a recorded listing's
    /// urls at the upstream it came from are pointed here, and a synthesized
    /// one lists every server the cassettes hold with the Agent 365 Tools
    /// audience and scope.
    pub fn service(&self, route: ServiceRoute, origin: &str) -> PlainReply {
        let reply = |outcome, status, content_type: &str, body: String| PlainReply {
            outcome,
            status,
            content_type: content_type.to_owned(),
            answer: LlmAnswer::Whole(body),
            pace: Pace::Instant,
        };
        let json = |outcome, body: &Value| reply(outcome, Status::OK, "application/json", body.to_string());
        if route == ServiceRoute::ChatMessage {
            return match &self.service.chat_message {
                Some(recorded) => {
                    reply(Outcome::Hit, recorded.status, &recorded.content_type, recorded.body.clone())
                }
                None => json(Outcome::Mock, &agent365::chat_message_answer()),
            };
        }
        let recorded = self.service.gateway.as_ref().and_then(|recorded| {
            let mut listing: Value = serde_json::from_str(&recorded.body).ok()?;
            agent365::rewrite_urls(&mut listing, &recorded.upstream, origin);
            Some((recorded, agent365::listing_entries(&listing)?.clone()))
        });
        match recorded {
            Some((answer, entries)) => {
                PlainReply { status: answer.status, ..json(Outcome::Hit, &agent365::wrap(route, entries)) }
            }
            None => {
                let entries = self
                    .tape
                    .servers()
                    .filter(|name| !name.starts_with('/'))
                    .map(|name| agent365::gateway_entry(origin, name))
                    .collect();
                json(Outcome::Mock, &agent365::wrap(route, entries))
            }
        }
    }
}
