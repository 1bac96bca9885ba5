//! A body that holds something (a count of requests in flight, a share of
//! the budget of answers held) for as long as it is being sent.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::Frame;

/// A body that holds `G` (a count, a share of a budget) until it is sent
/// whole or dropped.
pub(super) struct Holding<B, G> {
    body: B,
    _held: G,
}

impl<B, G> Holding<B, G> {
    pub(super) fn new(body: B, held: G) -> Holding<B, G> {
        Holding { body, _held: held }
    }
}

impl<B, G> hyper::body::Body for Holding<B, G>
where
    B: hyper::body::Body<Data = Bytes, Error = Infallible> + Unpin,
    G: Unpin,
{
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
