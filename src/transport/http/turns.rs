//! What answers a server's requests ([`Serving`]): one app for the whole
//! run, or a test runner's tapes one after another on one port ([`Turns`],
//! `mcp-tape test --tapes-on-stdin`). Connections outlive a tape, so a
//! test's client goes on with the connections the test before it opened;
//! each request is served by the tape running when it arrives, and a tape
//! ends once every request it took is answered. A request in a session an
//! earlier tape's server opened is refused (404, as for any session that
//! has ended): a request a test left unanswered never lands on the next
//! test's tape, nor, recording, on its cassette.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};

use hyper::HeaderMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::app::App;
use crate::config::FrontDoor;
use crate::error::Unanswered;
use crate::limits::{MAX_SESSIONS, SHUTDOWN_GRACE, STOPPING_ANSWERED};
use crate::mcp::HEADER_SESSION_ID;
use crate::util::{FastMap, lock};

/// What answers a server's requests.
#[derive(Clone)]
pub enum Serving {
    /// One app for the whole run.
    One(Arc<App>),
    /// Tapes one after another.
    Turns(Arc<Turns>),
}

/// A request's app, held for as long as its answer is being sent: the end
/// of its tape waits for it.
pub(super) struct Taken {
    pub(super) app: Arc<App>,
    pub(super) held: Option<OwnedSemaphorePermit>,
    /// The tapes it took its turn among, and the sessions its tape opened.
    turn: Option<(Arc<Turns>, Opened)>,
}

/// The sessions a tape's server opened, noted as its answers go out.
type Opened = Arc<Mutex<Vec<Box<str>>>>;

impl Taken {
    /// Notes the session `answer` opened, if it opened one.
    pub(super) fn answered(&self, answer: &HeaderMap) {
        let (Some((turns, opened)), Some(session)) = (&self.turn, answer.get(HEADER_SESSION_ID)) else {
            return;
        };
        let Ok(session) = session.to_str() else { return };
        // Opened again (a server that gives every session one id): it is this tape's now.
        lock(&turns.ended).reopened(session);
        lock(opened).push(session.into());
    }
}

impl Serving {
    /// The front door's rules.
    pub(super) fn front_door(&self) -> &FrontDoor {
        match self {
            Serving::One(app) => app.front_door(),
            Serving::Turns(turns) => &turns.front_door,
        }
    }

    /// The app that answers a request with `headers` arriving now.
    ///
    /// # Errors
    ///
    /// [`Unanswered::NoTape`] between tapes; [`Unanswered::UnknownSession`]
    /// for a session an earlier tape's server opened.
    pub(super) fn take(&self, headers: &HeaderMap) -> Result<Taken, Unanswered> {
        let turns = match self {
            Serving::One(app) => return Ok(Taken { app: Arc::clone(app), held: None, turn: None }),
            Serving::Turns(turns) => turns,
        };
        let session = headers.get(HEADER_SESSION_ID).and_then(|session| session.to_str().ok());
        if session.is_some_and(|session| lock(&turns.ended).holds(session)) {
            return Err(Unanswered::UnknownSession);
        }
        let current = lock(&turns.current);
        let turn = current.as_ref().ok_or(Unanswered::NoTape)?;
        let held = Arc::clone(&turn.requests).try_acquire_owned().map_err(|_| Unanswered::NoTape)?;
        let opened = Arc::clone(&turn.opened);
        Ok(Taken { app: Arc::clone(&turn.app), held: Some(held), turn: Some((Arc::clone(turns), opened)) })
    }

    /// The app of now, if any.
    pub(super) fn current(&self) -> Option<Arc<App>> {
        match self {
            Serving::One(app) => Some(Arc::clone(app)),
            Serving::Turns(turns) => lock(&turns.current).as_ref().map(|turn| Arc::clone(&turn.app)),
        }
    }
}

/// The most requests one tape has in flight at once; past it a request
/// gets 503, as between tapes.
const MOST_IN_FLIGHT: u32 = 1 << 20;

/// Tapes one after another on one server: [`Turns::begin`] one,
/// [`Turns::end`] it, begin the next.
pub struct Turns {
    front_door: FrontDoor,
    current: Mutex<Option<Turn>>,
    ended: Mutex<EndedSessions>,
}

/// The sessions ended tapes' servers opened, the latest [`ENDED_SESSIONS_KEPT`].
#[derive(Default)]
struct EndedSessions {
    /// Each session, with the count at which it ended last.
    sessions: FastMap<Box<str>, u64>,
    /// Sessions as they ended, each with its count then: an entry whose
    /// session was opened again, or ended again since, is stale.
    order: VecDeque<(u64, Box<str>)>,
    ends: u64,
}

impl EndedSessions {
    fn holds(&self, session: &str) -> bool {
        self.sessions.contains_key(session)
    }

    /// A later tape's server opened `session` again.
    fn reopened(&mut self, session: &str) {
        self.sessions.remove(session);
    }

    /// `session` ended now; the oldest past [`ENDED_SESSIONS_KEPT`] are
    /// forgotten, never one that ended again since.
    fn ended(&mut self, session: Box<str>) {
        self.ends += 1;
        self.sessions.insert(session.clone(), self.ends);
        self.order.push_back((self.ends, session));
        while self.sessions.len() > ENDED_SESSIONS_KEPT {
            let Some((at, oldest)) = self.order.pop_front() else { break };
            if self.sessions.get(&oldest) == Some(&at) {
                self.sessions.remove(&oldest);
            }
        }
        if self.order.len() > 2 * ENDED_SESSIONS_KEPT {
            let sessions = &self.sessions;
            self.order.retain(|(at, session)| sessions.get(session) == Some(at));
        }
    }
}

/// How many sessions of ended tapes are told apart from the running one's.
const ENDED_SESSIONS_KEPT: usize = MAX_SESSIONS;

struct Turn {
    app: Arc<App>,
    /// A permit for each request in flight: the tape's end takes them all.
    requests: Arc<Semaphore>,
    opened: Opened,
}

impl Turns {
    pub fn new(front_door: FrontDoor) -> Turns {
        Turns { front_door, current: Mutex::new(None), ended: Mutex::default() }
    }

    /// `app` answers each request from now until [`Turns::end`]; the tape
    /// running, if one is, no longer takes any.
    pub fn begin(&self, app: Arc<App>) {
        let requests = Arc::new(Semaphore::new(MOST_IN_FLIGHT as usize));
        *lock(&self.current) = Some(Turn { app, requests, opened: Opened::default() });
    }

    /// Ends the tape running: it takes no more requests, its standalone
    /// streams end, and the requests it took are answered (those still
    /// waiting after the shutdown grace get 503). Returns its app; `None`
    /// when none was running.
    pub async fn end(&self) -> Option<Arc<App>> {
        let Turn { app, requests, opened } = lock(&self.current).take()?;
        app.engine().end_streams();
        let answered = requests.acquire_many_owned(MOST_IN_FLIGHT);
        within_grace(answered, Some(&app)).await;
        // Once its requests are answered: an `initialize` answered meanwhile opened one too.
        self.ended_sessions(std::mem::take(&mut *lock(&opened)));
        Some(app)
    }
}

impl Turns {
    /// Notes `sessions` as ended, forgetting the oldest past [`ENDED_SESSIONS_KEPT`].
    fn ended_sessions(&self, sessions: Vec<Box<str>>) {
        let mut ended = lock(&self.ended);
        for session in sessions {
            ended.ended(session);
        }
    }
}

/// Waits for `answered` for the shutdown grace; past it, tells `app` its
/// grace is over (each request still waiting is answered 503) and waits a
/// moment more.
pub(super) async fn within_grace(answered: impl Future, app: Option<&App>) {
    tokio::pin!(answered);
    if tokio::time::timeout(SHUTDOWN_GRACE, &mut answered).await.is_ok() {
        return;
    }
    if let Some(app) = app {
        app.grace_over();
    }
    if tokio::time::timeout(STOPPING_ANSWERED, &mut answered).await.is_err() {
        tracing::warn!("requests still in flight after {SHUTDOWN_GRACE:?}; stopping anyway");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session opened again and ended again is as new as its last end:
    /// forgetting the oldest never un-ends it.
    #[test]
    fn a_session_ended_again_is_kept_as_its_last_end() {
        let mut ended = EndedSessions::default();
        ended.ended("again".into());
        ended.reopened("again");
        for n in 1..ENDED_SESSIONS_KEPT {
            ended.ended(format!("other-{n}").into());
        }
        ended.ended("again".into());
        ended.ended("last".into());
        assert!(ended.holds("again"), "the session that ended second to last was forgotten");
        assert!(!ended.holds("other-1"), "the oldest is forgotten");
        assert_eq!(ended.sessions.len(), ENDED_SESSIONS_KEPT);
        ended.reopened("again");
        assert!(!ended.holds("again"));
    }
}
