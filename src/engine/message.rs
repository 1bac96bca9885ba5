//! A message from the upstream as the engine is shown it: parsed, with the
//! text it came as ([`AsWritten`]), and when it arrived ([`Arrived`]).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::model::Text;

/// One message as its sender wrote it: parsed, and the text it came as,
/// which the cassette keeps ([`written::rewrite`](crate::model::written::rewrite)).
pub struct AsWritten {
    pub body: Value,
    pub written: Option<Text>,
}

impl AsWritten {
    /// The JSON message `text`; `None` when it is not JSON.
    pub fn read(text: &str) -> Option<AsWritten> {
        let body = serde_json::from_str(text).ok()?;
        Some(AsWritten { body, written: Some(text.into()) })
    }
}

impl From<Value> for AsWritten {
    /// A message built here, from no sender's text.
    fn from(body: Value) -> AsWritten {
        AsWritten { body, written: None }
    }
}

/// When a message from the upstream arrived: the system clock's
/// nanoseconds when the kernel received its last byte, where the front
/// door can tell (so two connections' messages are ordered as they came,
/// not as they were read), else when the engine was shown it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct Arrived(u64);

impl Arrived {
    /// At `nanos` past the epoch of the system clock.
    pub fn at(nanos: u64) -> Arrived {
        Arrived(nanos)
    }

    /// Nanoseconds past the epoch of the system clock.
    pub fn nanos(self) -> u64 {
        self.0
    }

    pub fn now() -> Arrived {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Arrived(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
    }
}
