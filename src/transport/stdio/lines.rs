//! Newline-delimited framing with a bound: a line is buffered up to a limit
//! and handed out whole; a longer one is handed out in pieces as it
//! arrives, so that a caller can refuse it or stream it through without
//! ever holding it all.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How much of the input is read at a time.
const READ_BYTES: usize = 64 * 1024;

/// What the reader found next.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// A whole line, without its `\n` (or `\r\n`).
    Line(Vec<u8>),
    /// Part of a line past the limit, in order; `end` once its newline (or
    /// the end of input) came. The first piece of such a line holds the
    /// bytes up to the limit.
    Overlong { bytes: Vec<u8>, end: bool },
}

/// Reads [`Piece`]s from `input`, buffering at most `limit` bytes of a line.
pub struct Lines<R> {
    input: BufReader<R>,
    limit: usize,
    line: Vec<u8>,
    /// In the middle of a line past the limit.
    overlong: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub fn new(input: R, limit: usize) -> Lines<R> {
        Lines::reading(READ_BYTES, input, limit)
    }

    /// As [`Lines::new`], reading at most `capacity` bytes at a time.
    fn reading(capacity: usize, input: R, limit: usize) -> Lines<R> {
        Lines { input: BufReader::with_capacity(capacity, input), limit, line: Vec::new(), overlong: false }
    }

    /// The next piece; `None` at the end of input (a last line without a
    /// newline is still a line).
    ///
    /// # Errors
    ///
    /// Read errors of the input.
    pub async fn next(&mut self) -> std::io::Result<Option<Piece>> {
        loop {
            let available = self.input.fill_buf().await?;
            if available.is_empty() {
                return Ok(self.finish());
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if self.overlong {
                let end = newline.is_some();
                let bytes = available[..newline.unwrap_or(take)].to_vec();
                self.input.consume(take);
                self.overlong = !end;
                return Ok(Some(Piece::Overlong { bytes, end }));
            }
            let room = self.limit - self.line.len();
            let content = newline.unwrap_or(take);
            if content > room {
                // Past the limit: hand out what is held plus what fits, go on in pieces.
                self.line.extend_from_slice(&available[..room]);
                self.input.consume(room);
                self.overlong = true;
                return Ok(Some(Piece::Overlong { bytes: std::mem::take(&mut self.line), end: false }));
            }
            if newline.is_some() && self.line.is_empty() {
                // The usual case, a whole line in the buffer: one copy of the right size.
                let line = available[..content].to_vec();
                self.input.consume(take);
                return Ok(Some(Piece::Line(trimmed(line))));
            }
            self.line.extend_from_slice(&available[..content]);
            self.input.consume(take);
            if newline.is_some() {
                return Ok(Some(Piece::Line(trimmed(std::mem::take(&mut self.line)))));
            }
        }
    }

    /// At the end of input: a last line without its newline, or the end of
    /// an overlong one.
    fn finish(&mut self) -> Option<Piece> {
        if self.overlong {
            self.overlong = false;
            return Some(Piece::Overlong { bytes: Vec::new(), end: true });
        }
        (!self.line.is_empty()).then(|| Piece::Line(trimmed(std::mem::take(&mut self.line))))
    }
}

/// A line without the `\r` of a `\r\n` ending.
fn trimmed(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pieces(input: &[u8], limit: usize, chunk: usize) -> Vec<Piece> {
        // Reading at most `chunk` bytes a time, as a pipe may hand them out.
        let mut lines = Lines::reading(chunk, input, limit);
        let mut found = Vec::new();
        while let Some(piece) = lines.next().await.unwrap() {
            found.push(piece);
        }
        found
    }

    fn line(text: &str) -> Piece {
        Piece::Line(text.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn whole_lines_whatever_the_chunking() {
        for chunk in [1, 2, 3, 64] {
            let found = pieces(b"{\"a\":1}\r\n\n{\"b\":2}\nlast", 16, chunk).await;
            assert_eq!(
                found,
                [line("{\"a\":1}"), line(""), line("{\"b\":2}"), line("last")],
                "chunk {chunk}"
            );
        }
    }

    #[tokio::test]
    async fn a_line_past_the_limit_comes_in_pieces_and_the_next_is_whole() {
        for chunk in [1, 4, 64] {
            let found = pieces(b"0123456789abcdef\nok\n", 6, chunk).await;
            let mut rebuilt = Vec::new();
            for piece in &found[..found.len() - 1] {
                let Piece::Overlong { bytes, .. } = piece else { panic!("{found:?}") };
                rebuilt.extend_from_slice(bytes);
            }
            assert_eq!(rebuilt, b"0123456789abcdef", "chunk {chunk}");
            assert_eq!(found[0], Piece::Overlong { bytes: b"012345".to_vec(), end: false }, "chunk {chunk}");
            assert!(matches!(found[found.len() - 2], Piece::Overlong { end: true, .. }), "chunk {chunk}");
            assert_eq!(found.last(), Some(&line("ok")), "chunk {chunk}");
        }
        let cut = pieces(b"0123456789", 4, 64).await;
        assert_eq!(cut.last(), Some(&Piece::Overlong { bytes: Vec::new(), end: true }), "ended by the input");
    }
}
