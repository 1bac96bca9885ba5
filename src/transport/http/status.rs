//! Every HTTP status mcp-tape answers with is decided here, from what the
//! engine said: an answer's [`Standing`] (the recording's own status, or
//! what the request's era makes of a final error) and a refusal's
//! [`Unanswered`] (by the side at fault and what went wrong). Neither the engine
//! nor the cassette names an HTTP status.

use hyper::StatusCode;

use crate::engine::Standing;
use crate::error::Unanswered;
use crate::jsonrpc::ErrorCode;
use crate::mcp::{HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_VERSION};
use crate::model::{Era, Status};

/// The status an answer to a request of `era` goes with.
pub(super) fn of_answer(era: Era, standing: Standing) -> StatusCode {
    match standing {
        Standing::Recorded(status) => recorded(status),
        Standing::Final(None) => StatusCode::OK,
        Standing::Final(Some(code)) => of_error(era, code),
    }
}

/// A status as the cassette recorded it.
pub(super) fn recorded(status: Status) -> StatusCode {
    StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::OK)
}

/// A message taken with nothing to answer (a notification, a client's
/// reply): 202.
pub(super) const TAKEN: StatusCode = StatusCode::ACCEPTED;

/// Done, with nothing or a plain report to say (a session ended, the
/// health endpoint, a stream cut before its answer): 200.
pub(super) const DONE: StatusCode = StatusCode::OK;

/// The status an injected HTTP fault names (400 to 599, checked when its
/// rule was read), else 503.
pub(super) fn injected(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
}

/// A request to an agent's model no `--model` names: 404.
pub(super) const NO_SUCH_MODEL: StatusCode = StatusCode::NOT_FOUND;

/// A status to record.
pub(super) fn to_record(status: StatusCode) -> Status {
    Status::new(status.as_u16()).unwrap_or(Status::OK)
}

/// The status that carries a JSON-RPC error with `code` in `era`.
fn of_error(era: Era, code: ErrorCode) -> StatusCode {
    const BAD_REQUEST_CODES: [ErrorCode; 2] = [ErrorCode::PARSE_ERROR, ErrorCode::INVALID_REQUEST];
    const STATELESS_BAD_REQUEST_CODES: [ErrorCode; 4] =
        [ErrorCode::INVALID_PARAMS, HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_VERSION];
    match era {
        _ if BAD_REQUEST_CODES.contains(&code) => StatusCode::BAD_REQUEST,
        Era::Stateless if STATELESS_BAD_REQUEST_CODES.contains(&code) => StatusCode::BAD_REQUEST,
        Era::Stateless if code == ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// The status a request that failed with `fault` gets.
pub(super) fn of_fault(fault: &Unanswered) -> StatusCode {
    match fault {
        Unanswered::Forbidden { .. } => StatusCode::FORBIDDEN,
        Unanswered::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
        Unanswered::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        Unanswered::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
        Unanswered::BodyTooLarge { .. } | Unanswered::LineTooLong { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        Unanswered::BodyStalled { .. } | Unanswered::BodyTooSlow { .. } => StatusCode::REQUEST_TIMEOUT,
        Unanswered::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
        Unanswered::UnknownSession => StatusCode::NOT_FOUND,
        Unanswered::MissingSessionHeader
        | Unanswered::MissingHost
        | Unanswered::NotAPath
        | Unanswered::BodyUnreadable(_)
        | Unanswered::HeaderNotAscii(_)
        | Unanswered::NotJson(_)
        | Unanswered::NotJsonRpc(_)
        | Unanswered::Stateless(_) => StatusCode::BAD_REQUEST,
        Unanswered::Upstream(_) => StatusCode::BAD_GATEWAY,
        Unanswered::NotStored => StatusCode::INSUFFICIENT_STORAGE,
        Unanswered::NoFinalAnswer => StatusCode::INTERNAL_SERVER_ERROR,
        Unanswered::Busy { .. } | Unanswered::Stopping { .. } | Unanswered::NoTape => {
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Unanswered, one_of_each_fault};

    #[test]
    fn error_statuses_per_era() {
        let status = |era, code| of_answer(era, Standing::Final(Some(ErrorCode(code)))).as_u16();
        assert_eq!(status(Era::Stateless, -32601), 404);
        assert_eq!(status(Era::Stateless, -32602), 400);
        assert_eq!(status(Era::Stateless, -32021), 400);
        assert_eq!(status(Era::Stateless, -32603), 200);
        assert_eq!(status(Era::Handshake, -32602), 200);
        assert_eq!(status(Era::Handshake, -32700), 400);
        assert_eq!(of_answer(Era::Stateless, Standing::Final(None)), StatusCode::OK);
        let recorded = Standing::Recorded(Status::new(404).unwrap());
        assert_eq!(of_answer(Era::Handshake, recorded), StatusCode::NOT_FOUND);
    }

    /// Every fault maps to a status of the class of the side it lies on:
    /// the client's (4xx), the upstream's (502), the store's (507), ours (5xx).
    #[test]
    fn each_fault_maps_to_the_status_class_of_its_side() {
        for fault in one_of_each_fault() {
            let status = of_fault(&fault).as_u16();
            let class = match fault {
                Unanswered::Upstream(_) => 502..503,
                Unanswered::NotStored => 507..508,
                Unanswered::NoFinalAnswer
                | Unanswered::Busy { .. }
                | Unanswered::Stopping { .. }
                | Unanswered::NoTape => 500..504,
                _ => 400..500,
            };
            assert!(class.contains(&status), "{fault:?} → {status}");
        }
    }
}
