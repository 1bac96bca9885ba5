//! Which log notifications a replayed answer carries: what the caller's
//! session asked for (`logging/setLevel`), or in the stateless era what
//! its `_meta` log level opts in to.

use serde_json::Value;

use super::Replay;
use crate::cassette::tape::ServedMessage;
use crate::engine::step::Call;
use crate::mcp;
use crate::model::Era;
use crate::util::lock;

/// Which log notifications (`notifications/message`) a caller gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogFilter {
    Everything,
    /// This level and more severe ones.
    AtLeast(String),
    Nothing,
}

impl LogFilter {
    pub(super) fn lets_through(&self, message: &ServedMessage) -> bool {
        if message.method.as_deref() != Some("notifications/message") {
            return true;
        }
        match self {
            LogFilter::Everything => true,
            LogFilter::Nothing => false,
            LogFilter::AtLeast(threshold) => {
                let level = message.log_level.as_deref().unwrap_or_default();
                mcp::log_severity(level) >= mcp::log_severity(threshold)
            }
        }
    }
}

impl Replay {
    /// `logging/setLevel` in a session: later log notifications below this
    /// level are not replayed to it.
    pub(super) fn remember_log_level(&self, call: &Call) {
        let level = call.params().and_then(|p| p.get("level")).and_then(Value::as_str);
        if let (Some(session), Some(level)) = (call.session, level)
            && let Some(state) = lock(&self.sessions).live.get_mut(session)
        {
            state.log_level = Some(level.to_owned());
        }
    }

    /// Which log notifications this call gets: in the handshake era what its
    /// session asked for (all, before any `logging/setLevel`); in the
    /// stateless era only what its `_meta` log level opts in to.
    pub(super) fn log_filter(&self, call: &Call) -> LogFilter {
        match call.era {
            Era::Stateless => {
                let level =
                    call.params().and_then(|p| p.pointer("/_meta")).and_then(|m| m.get(mcp::META_LOG_LEVEL));
                level.and_then(Value::as_str).map_or(LogFilter::Nothing, |l| LogFilter::AtLeast(l.to_owned()))
            }
            Era::Handshake => call
                .session
                .and_then(|s| lock(&self.sessions).live.get(s).and_then(|state| state.log_level.clone()))
                .map_or(LogFilter::Everything, LogFilter::AtLeast),
        }
    }
}
