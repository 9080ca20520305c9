//! A minimal HTTP/1.1 server: requests of a port handled one after another on its thread (`port.rs`), one
//! request per connection (`Connection: close`). The port's fault and latency are applied around the handler; raw sockets
//! give the control that truncated bodies, blackholes and refused connections need.

use std::io::{self, IoSlice, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::Fault;
use super::faults::{Delivered, NetControl, Phase};
use crate::url;

/// Idle clients are dropped after this, so they cannot hang a port.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request head read.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 4 * 1024 * 1024;

/// One parsed request.
#[derive(Debug, Default)]
pub(crate) struct Request {
    pub method: String,
    /// The request target exactly as sent (path and query; what a digest `uri` must equal).
    pub target: String,
    /// Percent-decoded path, without the query.
    pub path: String,
    /// Raw query string (after `?`).
    pub query: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body parsed as JSON, once: the count key, the auth guard and the handler all read it.
    json: std::cell::OnceCell<Option<Value>>,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`None`: not JSON), parsed at the first call.
    pub(crate) fn json_body(&self) -> Option<&Value> {
        self.json
            .get_or_init(|| crate::untrusted_json::parse(&self.body).ok())
            .as_ref()
    }

    pub(crate) fn query_pairs(&self) -> Vec<(String, String)> {
        url::query_pairs(&self.query)
    }

    /// The first value of a query parameter, decoded.
    pub(crate) fn param(&self, name: &str) -> Option<String> {
        self.query_pairs()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}

/// One response.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    /// Extra headers (e.g. `WWW-Authenticate`).
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub(crate) fn json(status: u16, value: &Value) -> Self {
        Response {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: value.to_string().into_bytes(),
        }
    }

    /// Adds a header.
    pub(crate) fn with_header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }

    /// JSON with whole numbers printed without a fraction (`50`, not `50.0`), as Shelly firmware prints them.
    pub(crate) fn json_whole(status: u16, value: &Value) -> Self {
        Self::json_text(status, whole_json(value))
    }

    /// A JSON document already written (by [`whole_json`]).
    pub(crate) fn json_text(status: u16, body: Vec<u8>) -> Self {
        Response {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body,
        }
    }

    pub(crate) fn text(status: u16, text: &str) -> Self {
        Response {
            status,
            content_type: "text/plain",
            headers: Vec::new(),
            body: text.as_bytes().to_vec(),
        }
    }
}

/// `value` as compact JSON, whole numbers without a fraction. Printed as it is serialized (no copy of the
/// document to rewrite its numbers first), into this thread's scratch buffer, then copied out at its size:
/// one allocation per document instead of one per doubling.
pub(crate) fn whole_json<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| {
        let Ok(mut buf) = scratch.try_borrow_mut() else {
            // Only if a `Serialize` impl called back in here; it does not, but never panic for it.
            return to_whole(Vec::new(), value);
        };
        buf.clear();
        let out = to_whole(std::mem::take(&mut *buf), value);
        let body = out.clone();
        // A rare huge document does not stay pinned to the thread.
        if out.capacity() <= SCRATCH_KEEP {
            *buf = out;
        }
        body
    })
}

/// The largest scratch buffer a thread keeps between documents.
const SCRATCH_KEEP: usize = 64 * 1024;

fn to_whole<T: Serialize + ?Sized>(mut out: Vec<u8>, value: &T) -> Vec<u8> {
    let mut ser = serde_json::Serializer::with_formatter(&mut out, WholeNumbers);
    // Writing into a `Vec` cannot fail, and what is written here has string keys only.
    let _ = value.serialize(&mut ser);
    out
}

/// Compact JSON, but a whole `f64` below 9e15 is printed as an integer (`50`, not `50.0`).
struct WholeNumbers;

impl serde_json::ser::Formatter for WholeNumbers {
    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if value.fract() == 0.0 && value.abs() < 9e15 {
            self.write_i64(writer, value as i64)
        } else {
            serde_json::ser::CompactFormatter.write_f64(writer, value)
        }
    }
}

/// What a port serves.
pub(crate) trait Service: Send + Sync {
    /// The request-count key of a request.
    fn key(&self, req: &Request) -> String;
    /// The answer when no fault intervenes.
    fn handle(&self, req: &Request) -> Response;
    /// Takes over a connection that asks for a protocol upgrade (WebSocket), counting it in the port's
    /// requests before it answers; gives it back when the request is not one it upgrades.
    fn upgrade(self: Arc<Self>, _req: &Request, stream: TcpStream) -> Option<TcpStream> {
        Some(stream)
    }
    /// [`Service::upgrade`] over TLS (WSS): takes over the connection and its TLS state; gives them back
    /// when the request is not one it upgrades.
    fn upgrade_tls(self: Arc<Self>, _req: &Request, stream: TlsStream) -> Option<TlsStream> {
        Some(stream)
    }
    /// The TLS configuration when the port serves HTTPS (read per connection: a certificate switched at
    /// runtime is served from the next connection on).
    fn tls(&self) -> Option<Arc<rustls::ServerConfig>> {
        None
    }
}

/// A connection as the request reader and response writer see it: plain TCP or TLS over it.
trait Conn: Read + Write + Sized {
    /// Ends our side (TLS: `close_notify` first).
    fn close_write(&mut self) -> io::Result<()>;
    /// Hands a connection asking for an upgrade to the service; back when it is not one it upgrades.
    fn upgrade(self, service: &Arc<dyn Service>, req: &Request) -> Option<Self>;
    /// Keeps a blackholed connection open (its socket).
    fn hold(self, net: &NetControl);
}

impl Conn for TcpStream {
    fn close_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }

    fn upgrade(self, service: &Arc<dyn Service>, req: &Request) -> Option<Self> {
        Arc::clone(service).upgrade(req, self)
    }

    fn hold(self, net: &NetControl) {
        net.hold(self);
    }
}

/// A TLS connection as the server reads it.
pub(crate) type TlsStream = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

impl Conn for TlsStream {
    fn close_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.flush()?;
        self.sock.shutdown(Shutdown::Write)
    }

    fn upgrade(self, service: &Arc<dyn Service>, req: &Request) -> Option<Self> {
        Arc::clone(service).upgrade_tls(req, self)
    }

    fn hold(self, net: &NetControl) {
        net.hold(self.sock);
    }
}

/// Connects to a port we listen on (`0.0.0.0`: through 127.0.0.1) so that a thread blocked in `accept`
/// returns and sees the new state.
pub(crate) fn wake(local: SocketAddr) {
    let mut addr = local;
    if addr.ip().is_unspecified() {
        addr.set_ip(Ipv4Addr::LOCALHOST.into());
    }
    let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(500));
}

/// Serves a connection just accepted (blocking, on the port's thread).
pub(crate) fn serve(stream: TcpStream, service: &Arc<dyn Service>, net: &NetControl) {
    // Our own wake-up connection, or a client that raced a fault change: close without reading.
    if !matches!(net.phase(Instant::now()), Phase::Serve(_)) {
        return;
    }
    // Answers go out at once: without it, a client pipelining requests over one connection (WebSocket) waits
    // for Nagle's algorithm and its delayed ACK, about 40 ms per answer.
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(READ_TIMEOUT));
    let Some(tls) = service.tls() else {
        return serve_on(stream, Vec::new(), service, net);
    };
    // HTTPS: the handshake happens at the first read.
    match rustls::ServerConnection::new(tls) {
        Ok(conn) => serve_on(
            rustls::StreamOwned::new(conn, stream),
            Vec::new(),
            service,
            net,
        ),
        Err(e) => log::debug!("emulator: TLS: {e}"),
    }
}

/// Serves a connection the poller accepted and read the request head of (`accepting.rs`), over TLS with the
/// handshake done: the rest of its request is read here, blocking, and it is answered with the port's fault and
/// latency.
pub(crate) fn serve_delivered(conn: Delivered, service: &Arc<dyn Service>, net: &NetControl) {
    let Delivered { tcp, tls, read } = conn;
    if tcp.set_nonblocking(false).is_err() {
        return;
    }
    let _ = tcp.set_read_timeout(Some(READ_TIMEOUT));
    let _ = tcp.set_write_timeout(Some(READ_TIMEOUT));
    match tls {
        None => serve_on(tcp, read, service, net),
        Some(tls) => serve_on(rustls::StreamOwned::new(tls, tcp), read, service, net),
    }
}

/// Reads one request after the bytes already `read` (over TLS the handshake happens at this first read) and
/// answers it, or hands the connection to the service for an upgrade.
fn serve_on<S: Conn>(mut stream: S, read: Vec<u8>, service: &Arc<dyn Service>, net: &NetControl) {
    let request = match read_request(&mut stream, read) {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(e) => {
            log::trace!("emulator: failed handshake, or a bad or idle request: {e}");
            return;
        }
    };
    let stream = if request.header("upgrade").is_some() {
        match stream.upgrade(service, &request) {
            Some(s) => s,
            // Taken (and counted) by the service.
            None => return,
        }
    } else {
        stream
    };
    respond(stream, &request, service, net, |s| s.hold(net));
}

/// Answers one request, with the port's fault and latency; `hold` keeps a blackholed connection open.
fn respond<S: Conn>(
    mut stream: S,
    request: &Request,
    service: &Arc<dyn Service>,
    net: &NetControl,
    hold: impl FnOnce(S),
) {
    let key = service.key(request);
    // The scope may name a query too (`GET /relay/0?turn`): matched against the key plus the raw query.
    let (fault, latency) = if request.query.is_empty() {
        net.for_request(&key)
    } else {
        net.for_request(&format!("{key}?{}", request.query))
    };
    net.count(key);
    let (response, truncate) = match fault {
        Fault::Blackhole => {
            hold(stream);
            return;
        }
        Fault::Http500 => (Response::text(500, "Internal Server Error"), false),
        Fault::MalformedJson => (
            Response {
                status: 200,
                content_type: "application/json",
                headers: Vec::new(),
                body: b"{\"broken\":".to_vec(),
            },
            false,
        ),
        Fault::TruncatedBody => (handle(&**service, request), true),
        _ => (handle(&**service, request), false),
    };
    net.sleep(latency);
    if let Err(e) = write_response(&mut stream, &response, truncate) {
        log::trace!("emulator: cannot answer: {e}");
    }
}

/// A bug in a handler answers 500 instead of killing the port.
fn handle(service: &dyn Service, req: &Request) -> Response {
    catch_unwind(AssertUnwindSafe(|| service.handle(req)))
        .unwrap_or_else(|_| Response::text(500, "emulator handler panicked"))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn fill(stream: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    let n = stream.read(&mut chunk)?;
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// Where a request's head ends in `buf` (the index of its blank line), once it has come whole.
pub(crate) fn head_end(buf: &[u8]) -> Option<usize> {
    find(buf, b"\r\n\r\n")
}

/// The request line and headers of a head that ends at `end` (`head_end`); `None` when there is no request
/// line.
pub(crate) fn parse_head(buf: &[u8], end: usize) -> Option<Request> {
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let (Some(method), Some(target)) = (first.next(), first.next()) else {
        return None;
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut req = Request {
        method: method.to_string(),
        target: target.to_string(),
        headers,
        ..Request::default()
    };
    // Absolute-form targets (proxies) carry scheme and authority.
    let target = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    req.path = url::decode(path, false);
    req.query = query.to_string();
    Some(req)
}

/// Whether a request announces a body (a length above 0, or chunks).
pub(crate) fn has_body(req: &Request) -> bool {
    req.header("transfer-encoding").is_some()
        || req
            .header("content-length")
            .is_some_and(|v| v.trim() != "0")
}

/// Reads one request, after the bytes already read (`buf`); `None` when the peer sent nothing usable (e.g.
/// our own wake-up connection).
fn read_request(stream: &mut (impl Read + Write), mut buf: Vec<u8>) -> io::Result<Option<Request>> {
    // Grows with what arrives (a request head is a few hundred bytes), up to `MAX_HEAD`.
    let head_end = loop {
        if let Some(p) = head_end(&buf) {
            break p;
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
        match fill(stream, &mut buf) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
    };
    let Some(mut req) = parse_head(&buf, head_end) else {
        return Ok(None);
    };
    let mut body = buf[head_end + 4..].to_vec();
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = req
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    if length > MAX_BODY {
        return Ok(None);
    }
    if (chunked || body.len() < length)
        && req
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    if chunked {
        body = read_chunked(stream, body)?;
    } else {
        while body.len() < length {
            fill(stream, &mut body)?;
        }
        body.truncate(length);
    }
    req.body = body;
    Ok(Some(req))
}

fn read_chunked(stream: &mut impl Read, mut raw: Vec<u8>) -> io::Result<Vec<u8>> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let line_end = loop {
            if let Some(p) = find(&raw[pos..], b"\r\n") {
                break pos + p;
            }
            fill(stream, &mut raw)?;
        };
        let line = String::from_utf8_lossy(&raw[pos..line_end]).into_owned();
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| bad("bad chunk size"))?;
        pos = line_end + 2;
        if out.len() + size > MAX_BODY {
            return Err(bad("body too large"));
        }
        // Data plus its CRLF (for the last chunk: the final CRLF), so nothing stays unread.
        while raw.len() < pos + size + 2 {
            fill(stream, &mut raw)?;
        }
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&raw[pos..pos + size]);
        pos += size + 2;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Unknown",
    }
}

/// `truncate` announces the whole length but sends only half the body, then closes.
fn write_response(stream: &mut impl Conn, r: &Response, truncate: bool) -> io::Result<()> {
    let len = r.body.len();
    let (announced, sent) = if truncate {
        (len.max(len / 2 + 1), len / 2)
    } else {
        (len, len)
    };
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nServer: smartdev-emulator\r\nContent-Type: {}\r\nContent-Length: {announced}\r\n",
        r.status,
        reason(r.status),
        r.content_type
    );
    for (name, value) in &r.headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("Connection: close\r\n\r\n");
    // Head and body in one write, without copying the body behind the head first.
    write_all_vectored(
        stream,
        &mut [IoSlice::new(head.as_bytes()), IoSlice::new(&r.body[..sent])],
    )?;
    stream.flush()?;
    stream.close_write()
}

/// `write_all` for several buffers (`Write::write_all_vectored` is not stable yet).
fn write_all_vectored(stream: &mut impl Write, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match stream.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
