//! Replay's handshake-era sessions: each one's cursors through the
//! recordings, log level, server and standalone stream; a bounded number
//! live at once, the least recently used ended to make room.

use std::collections::VecDeque;
use std::sync::Arc;

use super::said::Standalone;
use crate::cassette::tape::Cursors;
use crate::limits::MAX_SESSIONS;
use crate::util::FastMap;

/// One handshake-era replay session.
pub(super) struct Session {
    pub(super) cursors: Cursors,
    /// Set by `logging/setLevel`.
    pub(super) log_level: Option<String>,
    /// The server whose path opened it: only that path ends it.
    pub(super) server: Box<str>,
    /// When a use of it was last noted in [`Sessions::uses`], on its clock.
    noted: u64,
    /// Its id, as `live` holds it.
    id: Arc<str>,
    /// Its standalone stream, and what the server says on its own there.
    pub(super) said: Standalone,
}

/// A session's use is noted again only once this many uses of sessions
/// have passed since its last note: a busy session's every request does
/// not add to [`Sessions::uses`].
const NOTED_AGAIN_AFTER: u64 = 64;

/// Handshake-era replay sessions. Bounded: past [`MAX_SESSIONS`], opening
/// one ends the least recently used (near enough: a session used within
/// the last `MAX_SESSIONS - NOTED_AGAIN_AFTER` uses is never the one ended).
#[derive(Default)]
pub(super) struct Sessions {
    pub(super) live: FastMap<Arc<str>, Session>,
    /// Uses noted, oldest first: (the clock then, the session). An entry
    /// older than its session's last note is stale and skipped.
    uses: VecDeque<(u64, Arc<str>)>,
    clock: u64,
}

impl Sessions {
    /// Opens a session on `server`'s path and returns its id: 128 random
    /// bits, hex.
    pub(super) fn open(&mut self, server: &str) -> String {
        while self.live.len() >= MAX_SESSIONS {
            let Some((when, id)) = self.uses.pop_front() else { break };
            if self.live.get(&id).is_some_and(|session| session.noted == when) {
                self.live.remove(&id);
            }
        }
        let id: Arc<str> = new_session_id().into();
        let session = Session {
            cursors: Cursors::default(),
            log_level: None,
            server: server.into(),
            noted: 0,
            id: Arc::clone(&id),
            said: Standalone::default(),
        };
        self.live.insert(Arc::clone(&id), session);
        self.touch(&id);
        id.to_string()
    }

    /// Notes a use of session `id`: the session, `None` if it is not live.
    pub(super) fn touch(&mut self, id: &str) -> Option<&mut Session> {
        if self.uses.len() >= 2 * MAX_SESSIONS {
            let live = &self.live;
            self.uses.retain(|(when, id)| live.get(id).is_some_and(|session| session.noted == *when));
        }
        let session = self.live.get_mut(id)?;
        self.clock += 1;
        if self.clock - session.noted >= NOTED_AGAIN_AFTER || session.noted == 0 {
            session.noted = self.clock;
            self.uses.push_back((self.clock, Arc::clone(&session.id)));
        }
        Some(session)
    }
}

fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    // The OS random source failing is not something to serve through.
    getrandom::fill(&mut bytes).expect("the operating system's random source is unavailable");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_unique_and_bounded() {
        let mut sessions = Sessions::default();
        let first = sessions.open("mcp_A");
        assert_eq!(first.len(), 32);
        for _ in 0..MAX_SESSIONS {
            sessions.open("mcp_A");
        }
        assert_eq!(sessions.live.len(), MAX_SESSIONS);
        assert!(!sessions.live.contains_key(first.as_str()), "the oldest session makes room");
    }

    /// A flood of `initialize` once ended every live session by age; a
    /// session in use outlives any number of new ones.
    #[test]
    fn the_least_recently_used_session_makes_room() {
        let mut sessions = Sessions::default();
        let busy = sessions.open("mcp_A");
        let idle = sessions.open("mcp_A");
        for _ in 0..3 * MAX_SESSIONS {
            assert!(sessions.touch(&busy).is_some());
            sessions.open("mcp_A");
        }
        assert!(sessions.live.contains_key(busy.as_str()), "the session in use was ended");
        assert!(!sessions.live.contains_key(idle.as_str()));
        assert_eq!(sessions.live.len(), MAX_SESSIONS);
        assert!(sessions.uses.len() <= 2 * MAX_SESSIONS + 1);
    }

    /// Not every use is noted, yet a session used within the last
    /// `MAX_SESSIONS - NOTED_AGAIN_AFTER` uses is never ended to make room:
    /// here its last use is the last one not noted, and every other session
    /// is newer than its note.
    #[test]
    fn a_session_used_lately_enough_is_never_ended() {
        let mut sessions = Sessions::default();
        for _ in 0..MAX_SESSIONS {
            sessions.open("mcp_A");
        }
        let busy = sessions.open("mcp_A");
        let unnoted = usize::try_from(NOTED_AGAIN_AFTER).unwrap() - 1;
        for _ in 1..unnoted {
            sessions.open("mcp_A");
        }
        let noted = sessions.uses.len();
        assert!(sessions.touch(&busy).is_some());
        assert_eq!(sessions.uses.len(), noted, "that use was noted");
        for _ in 0..MAX_SESSIONS - unnoted - 1 {
            sessions.open("mcp_A");
        }
        assert!(sessions.live.contains_key(busy.as_str()));
        assert!(sessions.uses.len() <= 2 * MAX_SESSIONS + 1);
    }
}
