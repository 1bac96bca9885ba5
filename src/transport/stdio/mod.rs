//! The stdio front door: MCP as newline-delimited JSON-RPC on a byte
//! stream, one UTF-8 message per line. Replay speaks it on mcp-tape's own
//! stdin/stdout; record speaks it to the client the same way and forwards
//! to a child process ([`child`]).
//!
//! Each line becomes one [`Message`]; a request becomes a [`Call`] for the
//! engine. stdio has no headers, so the facts are: the server named on the
//! command line, the era the message itself shows (a `_meta` protocol
//! version, or `server/discover`: stateless; else handshake), the one
//! session of the stream (replay's, once `initialize` opened it), and for
//! record the credentials of the child's environment. Answers go out one
//! line per message, re-enacted ([`reenact`]) when they must keep time or
//! wait for the client's reply to a server request. A line that is not JSON
//! gets `-32700` (id `null`), one over [`MAX_STDIO_LINE_BYTES`] `-32600`, and the
//! stream goes on; recording, both go to the child as they are instead.

pub mod child;
mod lines;
mod pipe;

pub use pipe::{stdin, stdout};

use std::future::Future;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::RequestLine;
use crate::engine::reenact::{self, Emit, Live};
use crate::engine::{
    Answer, Call, Engine, Facts, Failure, Flight, FromClient, Outcome, Outgoing, Policy, Step,
};
use crate::error::Unanswered;
use crate::jsonrpc::{Message, Params, ParamsCache};
use crate::limits::MAX_STDIO_LINE_BYTES;
use crate::mcp;
use crate::model::Era;
use child::Link;
use lines::{Lines, Piece};

/// The least time between two messages of one replayed answer: a client
/// that reads a pipe gets each in a read of its own, as from a server that
/// produces them one at a time. (The TypeScript SDK drops a progress
/// notification that arrives in the same read as its request's answer.)
pub const STDIO_MESSAGE_GAP: Duration = Duration::from_millis(1);
/// Chunks other tasks may queue for the client at most (then they wait).
const OUTPUT_QUEUE: usize = 256;
/// The writer's buffer: queued chunks up to this go in one write.
const WRITE_BYTES: usize = 64 * 1024;

/// A chunk for the client: a line, or a piece of one being relayed.
#[derive(Debug)]
pub enum Chunk {
    /// A whole message; the writer adds the newline.
    Line(Vec<u8>),
    /// Bytes written as they are.
    Raw(Vec<u8>),
}

/// What other tasks (re-enactments, the child's relay) write to the client
/// through: a queue the [`ToClient`] empties.
#[derive(Clone)]
pub struct Output(mpsc::Sender<Chunk>);

impl Output {
    /// Queues one message line; false once the client is gone.
    pub async fn line(&self, line: impl Into<Vec<u8>>) -> bool {
        self.0.send(Chunk::Line(line.into())).await.is_ok()
    }

    /// Queues bytes to write as they are; false once the client is gone.
    pub async fn raw(&self, bytes: Vec<u8>) -> bool {
        self.0.send(Chunk::Raw(bytes)).await.is_ok()
    }
}

/// The one writer to the client's side of the stream. [`serve`] writes the
/// answers it makes at once, each line flushed as it goes (answers flow
/// back as requests flow in, as from a server), and what the [`Output`]
/// queue holds between lines; [`ToClient::drain`] writes the rest after it.
pub struct ToClient {
    sink: tokio::io::BufWriter<Box<dyn AsyncWrite + Unpin + Send>>,
    queued: mpsc::Receiver<Chunk>,
    /// The sink failed: the client went away.
    gone: bool,
}

impl ToClient {
    pub fn new(sink: Box<dyn AsyncWrite + Unpin + Send>) -> (Output, ToClient) {
        let (queue, queued) = mpsc::channel(OUTPUT_QUEUE);
        let sink = tokio::io::BufWriter::with_capacity(WRITE_BYTES, sink);
        (Output(queue), ToClient { sink, queued, gone: false })
    }

    /// Writes `chunk` and whatever else is queued already, then flushes;
    /// false once the client is gone.
    async fn write(&mut self, chunk: Chunk) -> bool {
        self.put_chunk(chunk).await;
        self.finish().await
    }

    /// Writes `batch` (whole lines) and whatever else is queued already,
    /// then flushes, leaving `batch` empty to be filled again; false once
    /// the client is gone.
    async fn write_batch(&mut self, batch: &mut Vec<u8>) -> bool {
        self.put(batch, false).await;
        batch.clear();
        self.finish().await
    }

    async fn put_chunk(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::Line(line) => self.put(&line, true).await,
            Chunk::Raw(bytes) => self.put(&bytes, false).await,
        }
    }

    /// Writes `bytes` (and a newline after them when `line`) unless the
    /// client is gone already.
    async fn put(&mut self, bytes: &[u8], line: bool) {
        if self.gone {
            return;
        }
        let mut written = self.sink.write_all(bytes).await;
        if line && written.is_ok() {
            written = self.sink.write_all(b"\n").await;
        }
        self.gone = written.is_err();
    }

    /// Writes what is queued already, then flushes; false once the client
    /// is gone.
    async fn finish(&mut self) -> bool {
        while !self.gone
            && let Ok(chunk) = self.queued.try_recv()
        {
            self.put_chunk(chunk).await;
        }
        if !self.gone && self.sink.flush().await.is_err() {
            self.gone = true;
        }
        if self.gone {
            tracing::debug!("the client's side of stdio is closed");
        }
        !self.gone
    }

    /// Writes what other tasks send until every [`Output`] is gone (or
    /// the client).
    pub async fn drain(mut self) {
        while let Some(chunk) = self.queued.recv().await {
            if !self.write(chunk).await {
                return;
            }
        }
    }
}

/// The stdio front door of one engine, whose link to the upstream (when
/// recording) is the child process.
pub struct Door {
    engine: Engine<Link>,
    /// What this door does for its engine.
    policy: Policy,
    /// The server identity every message is addressed to.
    server: String,
    /// Constant for the stream: no routing headers; record's credentials.
    facts: Facts<'static>,
    /// Params read before.
    params: ParamsCache,
}

impl Door {
    pub fn new(engine: Engine<Link>, server: String, facts: Facts<'static>) -> Door {
        Door { policy: engine.policy(), engine, server, facts, params: ParamsCache::default() }
    }

    pub fn engine(&self) -> &Engine<Link> {
        &self.engine
    }
}

/// Why [`serve`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The client closed its side (end of input).
    Input,
    /// A stop signal.
    Stopped,
    /// The child process closed its output (it exited).
    Child,
    /// A fault cut the stream: the client's output ends here.
    Cut,
}

/// What [`serve`] keeps between lines.
struct Stream {
    /// The session an answer opened (`initialize`), else the policy's.
    session: Option<String>,
    /// Re-enactments still sending.
    reenacting: JoinSet<()>,
    /// Inside an overlong line already refused.
    refusing: bool,
    /// Answer lines (each with its newline) of the line being handled.
    batch: Vec<u8>,
    /// A fault cut the stream: nothing more is read or written.
    cut: bool,
}

impl Stream {
    fn reply(&mut self, line: &[u8]) {
        self.batch.extend_from_slice(line);
        self.batch.push(b'\n');
    }
}

/// Serves `door` on `input` (the client's lines) until the input ends,
/// `stop` resolves or `child_gone` does, writing answers and what `output`
/// queues through `writer`.
///
/// # Errors
///
/// A read error of the input.
pub async fn serve(
    door: &Door,
    input: impl AsyncRead + Unpin,
    writer: &mut ToClient,
    output: &Output,
    stop: impl Future<Output = ()>,
    child_gone: impl Future<Output = ()>,
) -> std::io::Result<Ended> {
    let mut lines = Lines::new(input, MAX_STDIO_LINE_BYTES);
    let mut stream = Stream {
        session: door.policy.connection_session.map(str::to_owned),
        reenacting: JoinSet::new(),
        refusing: false,
        batch: Vec::new(),
        cut: false,
    };
    tokio::pin!(stop, child_gone);
    let ended = loop {
        let piece = tokio::select! {
            biased;
            Some(chunk) = writer.queued.recv() => {
                if !writer.write(chunk).await {
                    break Ended::Input;
                }
                continue;
            }
            piece = lines.next() => piece?,
            () = &mut stop => break Ended::Stopped,
            () = &mut child_gone => break Ended::Child,
        };
        let Some(piece) = piece else { break Ended::Input };
        // A line may wait for room towards a recorded server that does not
        // read: a stop must still end it.
        let handled = async {
            match piece {
                Piece::Line(line) => door.line(line, &mut stream, writer, output).await,
                Piece::Overlong { bytes, end } => door.overlong(bytes, end, &mut stream, writer).await,
            }
        };
        tokio::select! {
            biased;
            () = handled => {}
            () = &mut stop => break Ended::Stopped,
        }
        if !stream.batch.is_empty() && !writer.write_batch(&mut stream.batch).await {
            break Ended::Input;
        }
        if stream.cut {
            break Ended::Cut;
        }
        while stream.reenacting.try_join_next().is_some() {}
    };
    stream.reenacting.abort_all();
    Ok(ended)
}

impl Door {
    /// One line from the client.
    async fn line(&self, line: Vec<u8>, stream: &mut Stream, writer: &mut ToClient, output: &Output) {
        let started = SystemTime::now();
        let message = match super::parse_message(&line, &self.params).map_err(|e| self.engine.unread(e)) {
            Ok(message) => message,
            Err(Ok(link)) => {
                self.log("-", None, Outcome::Forwarded, started);
                return forward(link, Piece::Line(line), None, writer).await;
            }
            Err(Err(error)) => {
                self.log("-", None, Outcome::of(&error.fault), started);
                stream.reply(error.body().as_bytes());
                return;
            }
        };
        let session = stream.session.as_deref();
        let (method, params, step) = match message {
            Message::Request { id, method, params } => {
                let era = era_of(Some(&method), params.as_deref());
                let call = Call {
                    server: &self.server,
                    era,
                    session,
                    id: &id,
                    method: &method,
                    params: params.as_ref(),
                    facts: &self.facts,
                };
                let step = self.engine.request(&call);
                (method, params, step)
            }
            Message::Notification { method, params } => {
                let era = era_of(Some(&method), params.as_deref());
                let step = self.engine.client_message(era, session, FromClient::Notification(&method));
                (method, None, step)
            }
            Message::Response { id, body } => {
                let step =
                    self.engine.client_message(Era::Handshake, session, FromClient::Reply(id.as_ref(), body));
                ("(response)".into(), None, step)
            }
        };
        let subject = mcp::subject_of(&method, params.as_ref().map(Params::value));
        let log = |outcome| self.log(&method, subject, outcome, started);
        match step {
            Ok(Step::Answer(answer)) => {
                log(answer.outcome);
                self.answer(answer, Duration::ZERO, stream, output).await;
            }
            Ok(Step::Accepted) => log(Outcome::Accepted),
            Ok(Step::Said(said)) => {
                log(Outcome::Accepted);
                self.say(said, stream, output);
            }
            Ok(Step::Forward { link, flight }) => {
                log(Outcome::Forwarded);
                forward(link, Piece::Line(line), flight, writer).await;
            }
            Ok(Step::Delayed { by, then }) => {
                log(Outcome::Injected);
                self.later(by, *then, line, stream, output).await;
            }
            Ok(Step::Fail(failure)) => {
                log(Outcome::Injected);
                fail(failure, stream);
            }
            Err(error) => {
                log(Outcome::of(&error.fault));
                stream.reply(error.body().as_bytes());
            }
        }
    }

    /// One log line per client message, at debug level: a stdio server's
    /// stderr usually lands in its client's log (misses still warn).
    fn log(&self, method: &str, subject: Option<&str>, outcome: Outcome, started: SystemTime) {
        let line = RequestLine {
            door: "stdio",
            server: &self.server,
            method,
            subject,
            outcome,
            status: None,
            started,
            note: "",
        };
        tracing::debug!("{line}");
    }

    /// A piece of a line past [`MAX_STDIO_LINE_BYTES`]: refused once, at its
    /// first piece (its id cannot be read), or, recording, passed to the
    /// child as it is.
    async fn overlong(&self, bytes: Vec<u8>, end: bool, stream: &mut Stream, writer: &mut ToClient) {
        match self.engine.unread(Unanswered::LineTooLong { limit: MAX_STDIO_LINE_BYTES }.into()) {
            Ok(link) => forward(link, Piece::Overlong { bytes, end }, None, writer).await,
            Err(error) => {
                if !stream.refusing {
                    tracing::warn!(
                        "a line longer than {MAX_STDIO_LINE_BYTES} bytes from the client was refused"
                    );
                    stream.reply(error.body().as_bytes());
                }
                stream.refusing = !end;
            }
        }
    }

    /// What a fault's delay holds back: an answer or a forward waits in a
    /// task of its own (the lines after it go on), anything else here.
    async fn later(
        &self,
        by: Duration,
        step: Step<'_, Link>,
        line: Vec<u8>,
        stream: &mut Stream,
        output: &Output,
    ) {
        match step {
            Step::Answer(answer) => self.answer(answer, by, stream, output).await,
            Step::Forward { link, flight } => {
                let link = link.clone();
                stream.reenacting.spawn(async move {
                    tokio::time::sleep(by).await;
                    if let Some(flight) = flight {
                        link.expect(flight);
                    }
                    if link.input().send(Piece::Line(line)).await.is_err() {
                        tracing::warn!("a line for the stdio server was dropped: its stdin is closed");
                    }
                });
            }
            Step::Fail(failure) => {
                tokio::time::sleep(by).await;
                fail(failure, stream);
            }
            Step::Accepted | Step::Said(_) | Step::Delayed { .. } => {
                tracing::warn!("a fault's delay held nothing to send: {} left as it is", self.server)
            }
        }
    }

    /// Sends an answer, one line per message, `delay` after now (then in a
    /// task of its own); re-enacted when the policy says it takes time
    /// (several messages go at least [`STDIO_MESSAGE_GAP`] apart).
    async fn answer(&self, mut answer: Answer, delay: Duration, stream: &mut Stream, output: &Output) {
        if let Some(session) = &answer.session_id {
            stream.session = Some(session.clone());
        }
        let said = std::mem::take(&mut answer.asides.now);
        // What the server said while the exchange was in flight comes first on the one stream.
        let first = std::mem::take(&mut answer.asides.first);
        answer.messages.splice(0..0, first);
        let session = stream.session.as_deref();
        match self.policy.reenactment(&answer.messages, answer.hold_open, session, STDIO_MESSAGE_GAP) {
            Some(live) => {
                answer.messages.extend(said);
                self.reenact(answer.messages, live.after(delay), stream, output);
            }
            // Most answers are one message sent at once: no re-enactment to set up.
            None if delay.is_zero() => {
                for message in answer.messages {
                    stream.reply(message.json.as_bytes());
                }
                self.say(said, stream, output);
            }
            None => {
                answer.messages.extend(said);
                let output = output.clone();
                stream.reenacting.spawn(async move {
                    tokio::time::sleep(delay).await;
                    for message in answer.messages {
                        if !output.line(message.json).await {
                            return;
                        }
                    }
                });
            }
        }
    }

    /// Re-enacts `messages` in a task of its own, each line through `output`.
    fn reenact(&self, messages: Vec<Outgoing>, live: Live, stream: &mut Stream, output: &Output) {
        // A stream held open over HTTP has nothing more to say on stdio.
        let mut emitted = reenact::reenact(messages, live, false);
        let output = output.clone();
        stream.reenacting.spawn(async move {
            while let Some(emit) = emitted.recv().await {
                if let Emit::Message(json) = emit
                    && !output.line(json).await
                {
                    return;
                }
            }
        });
    }

    /// What the server says on its own: at once, after what is being
    /// answered, unless it must keep time or wait for the client's replies.
    fn say(&self, said: Vec<Outgoing>, stream: &mut Stream, output: &Output) {
        // The gap is not asked for: several messages said at once go together, as they do after
        // an answer sent at once; re-enacted, they keep it.
        match self.policy.reenactment(&said, false, stream.session.as_deref(), Duration::ZERO) {
            Some(live) => self.reenact(said, Live { gap: STDIO_MESSAGE_GAP, ..live }, stream, output),
            None => said.iter().for_each(|message| stream.reply(message.json.as_bytes())),
        }
    }
}

/// An injected failure on stdio: a cut stream's messages, then the end of
/// the output; a hang sends nothing. Statuses and sessions belong to HTTP:
/// such fault rules are left out on stdio at start (a lost session's
/// refusal would go as it is).
fn fail(failure: Failure, stream: &mut Stream) {
    match failure {
        Failure::Hang | Failure::Http { .. } => {}
        Failure::Cut { messages } => {
            messages.iter().for_each(|message| stream.reply(message.json.as_bytes()));
            stream.cut = true;
        }
        Failure::LostSession(refused) => stream.reply(refused.body().as_bytes()),
    }
}

/// Passes a line (or a piece of one) to the child, with the flight of its
/// answer. While the child's input is full, what the child writes is still
/// written to the client: the child may be waiting for exactly that before
/// it reads again.
async fn forward(link: &Link, piece: Piece, flight: Option<Flight>, writer: &mut ToClient) {
    if let Some(flight) = flight {
        link.expect(flight);
    }
    let room = loop {
        tokio::select! {
            biased;
            room = link.input().reserve() => break room,
            Some(chunk) = writer.queued.recv() => {
                writer.write(chunk).await;
            }
        }
    };
    match room {
        Ok(room) => room.send(piece),
        Err(_) => tracing::warn!("a line for the stdio server was dropped: its stdin is closed"),
    }
}

/// The era a message on stdio speaks: the stateless era's requests carry
/// their protocol version in `_meta`, and `server/discover` exists only
/// there; everything else is the handshake era.
fn era_of(method: Option<&str>, params: Option<&Value>) -> Era {
    let version = params.and_then(|p| p.get("_meta")).and_then(|m| m.get(mcp::META_PROTOCOL_VERSION));
    match version.and_then(Value::as_str) {
        Some(version) => mcp::era_of(Some(version)),
        None if method == Some("server/discover") => Era::Stateless,
        None => Era::Handshake,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_message_tells_its_era() {
        let meta = json!({"_meta": {mcp::META_PROTOCOL_VERSION: "2026-07-28"}});
        assert_eq!(era_of(Some("tools/list"), Some(&meta)), Era::Stateless);
        assert_eq!(era_of(Some("server/discover"), None), Era::Stateless);
        assert_eq!(era_of(Some("tools/list"), Some(&json!({"_meta": {"progressToken": 1}}))), Era::Handshake);
        let old = json!({"_meta": {mcp::META_PROTOCOL_VERSION: "2025-06-18"}});
        assert_eq!(era_of(Some("tools/list"), Some(&old)), Era::Handshake);
        assert_eq!(
            era_of(Some("initialize"), Some(&json!({"protocolVersion": "2025-06-18"}))),
            Era::Handshake
        );
    }
}
