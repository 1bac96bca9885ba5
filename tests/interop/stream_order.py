"""Where a server's log messages on the GET stream fall among its answers,
as the kernel of one client on two sockets saw them arrive.

A plain HTTP/1.1 client (no SDK, so that nothing between the sockets and the
transcript reorders or drops): it initializes a session, opens the session's
GET stream, then sends each step's POST and reads its whole answer. Each
socket is read with the kernel's receive time of every byte
(SO_TIMESTAMPNS), so where a message falls does not depend on when the
client got round to reading it: a log message is filed under the first
answer whose last byte arrived after it.

`order(base_url, steps)` returns [[step, [log data said before its answer
and after the one before]], ...] and ["after the last", [...]] (read until
the stream has been quiet for QUIET_S), session ids removed from the text.
"""

import contextlib
import json
import re
import select
import socket
import struct
import time
import urllib.parse

PROTOCOL = "2025-06-18"
TIMEOUT_S = 20
QUIET_S = 0.5


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


class Timed:
    """A socket read a byte at a time, each byte with the time the kernel
    received it."""

    def __init__(self, sock):
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock = sock
        self.at = None  # when the last byte read arrived

    def byte(self):
        data, ancillary, _, _ = self.sock.recvmsg(1, socket.CMSG_SPACE(16))
        if not data:
            raise EOFError("connection closed")
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = struct.unpack("qq", value[:16])
                self.at = seconds * 1_000_000_000 + nanoseconds
        return data

    def line(self):
        line = b""
        while not line.endswith(b"\n"):
            line += self.byte()
        return line

    def read(self, count):
        return b"".join(self.byte() for _ in range(count))

    def ready(self, wait_s):
        return bool(select.select([self.sock], [], [], wait_s)[0])


def read_head(timed):
    status_line, *lines = iter(lambda: timed.line().decode("latin-1").rstrip("\r\n"), "")
    headers = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers


def chunks(timed):
    """The chunks of a chunked body, each with when its last byte arrived."""
    while True:
        size = int(timed.line().split(b";")[0], 16)
        if size == 0:
            timed.line()
            return
        data, at = timed.read(size), timed.at
        timed.line()
        yield data, at


def read_body(timed, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return b"".join(data for data, _ in chunks(timed))
    return timed.read(int(headers.get("content-length", "0")))


def messages_of(headers, body):
    if headers.get("content-type", "").startswith("text/event-stream"):
        events = body.replace(b"\r\n", b"\n").split(b"\n\n")
        data = [[line[5:].strip() for line in e.split(b"\n") if line.startswith(b"data:")] for e in events]
        return [json.loads(b"\n".join(d)) for d in data if d and d[0]]
    return [json.loads(body)] if body.strip() else []


class Session:
    def __init__(self, base_url):
        url = urllib.parse.urlsplit(base_url)
        self.address = (url.hostname, url.port)
        self.path = url.path or "/"
        self.id = None
        self.next_id = 0

    def request(self, method, extra, body=None):
        sock = socket.create_connection(self.address, timeout=TIMEOUT_S)
        headers = {"Host": f"{self.address[0]}:{self.address[1]}",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": PROTOCOL, **extra}
        if self.id:
            headers["Mcp-Session-Id"] = self.id
        payload = json.dumps(body).encode() if body is not None else b""
        if body is not None:
            headers["Content-Type"] = "application/json"
            headers["Content-Length"] = str(len(payload))
        head = f"{method} {self.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        sock.sendall(head.encode() + b"\r\n" + payload)
        return Timed(sock)

    def post(self, message):
        """The messages of the answer to `message`, and when its last byte arrived."""
        timed = self.request("POST", {"Connection": "close"}, message)
        try:
            status, headers = read_head(timed)
            body = read_body(timed, headers)
        finally:
            timed.sock.close()
        if status >= 300:
            raise RuntimeError(f"{message.get('method')}: HTTP {status}: {body!r}")
        self.id = self.id or headers.get("mcp-session-id")
        return messages_of(headers, body), timed.at

    def call(self, method, params):
        self.next_id += 1
        said, at = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if not any(m.get("id") == self.next_id for m in said):
            raise RuntimeError(f"{method}: no answer")
        return at


class Stream:
    """The GET stream's SSE events, each with when its last byte arrived."""

    def __init__(self, timed):
        self.chunks = chunks(timed)
        self.timed = timed
        self.body = b""
        self.heard = []

    def drain(self, quiet_s):
        """Reads until nothing has come for `quiet_s`."""
        while self.timed.ready(quiet_s):
            data, at = next(self.chunks)
            self.body += data
            while b"\n\n" in self.body:
                event, self.body = self.body.split(b"\n\n", 1)
                data = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
                if data and data[0]:
                    self.heard.append((at, json.loads(b"\n".join(data))))


@contextlib.contextmanager
def timestamps_on():
    """Linux stamps received packets only while some socket asks for it, and when the first one asks
    it switches stamping on a moment later, from a kernel worker (later still on a busy machine):
    until then a TCP socket's bytes come with no time. This keeps a loopback TCP pair that asks, and
    returns once a byte sent over it comes back stamped; stamping stays on until the pair closes."""
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            socket.create_connection(listener.getsockname(), timeout=TIMEOUT_S) as sender:
        receiver, _ = listener.accept()
        with receiver:
            receiver.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                sender.sendall(b"t")
                _, ancillary, _, _ = receiver.recvmsg(1, socket.CMSG_SPACE(16))
                if any(kind == SO_TIMESTAMPNS for _, kind, _ in ancillary):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no receive timestamps after {TIMEOUT_S} s")
                time.sleep(0.01)  # nothing tells when the kernel's worker has run
            yield


def log_text(data):
    """A log message's data as text, without the session it names."""
    return re.sub(r"\s*from session \S+", "", str(data)).strip()


def logged(messages):
    return [log_text(m["params"]["data"]) for m in messages if m.get("method") == "notifications/message"]


def order(base_url, steps):
    with timestamps_on():
        return ordered(base_url, steps)


def ordered(base_url, steps):
    session = Session(base_url)
    session.call("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                "clientInfo": {"name": "stream-order", "version": "1"}})
    session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    timed = session.request("GET", {"Accept": "text/event-stream"})
    try:
        status, _ = read_head(timed)
        if status != 200:
            raise RuntimeError(f"GET stream: HTTP {status}")
        stream = Stream(timed)
        answered = []
        for method, params in steps:
            answered.append((method, session.call(method, params)))
            # Read what has come, so that the kernel does not merge it with what comes next
            # (a merged read carries the later time).
            stream.drain(0)
        stream.drain(QUIET_S)
    finally:
        timed.sock.close()
    session.request("DELETE", {"Connection": "close"}).sock.close()
    transcript, heard = [], stream.heard
    for method, at in answered + [("after the last", float("inf"))]:
        transcript.append([method, logged(message for when, message in heard if when < at)])
        heard = [(when, message) for when, message in heard if when >= at]
    return transcript
