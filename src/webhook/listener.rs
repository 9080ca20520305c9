//! The webhook listener: one poller thread (`sd-webhook`) serves every connection without blocking on any, so
//! its cost is bounded by constants, not by what clients send. Each request is read under a deadline and
//! within size limits checked before anything is allocated for it; a valid one is resolved, queued, and only
//! then the wake flag is set (so a woken reader finds it), and answered.
//!
//! Why not tiny_http: it allocates a client's declared body length when dropping an unread body (one request
//! aborted the process), gives each connection a thread with no idle limit, and stops accepting for good on
//! `EMFILE`. We need one path, two methods and small bodies; `http.rs` parses exactly that.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::http::{self, MAX_HEAD};
use super::outbound_ws::{self, Flow, Session};
use super::queue::{self, EventQueue};
use super::request::{self, Incoming, MAX_BODY, Rules};
use super::routing::{self, Resolved};
use super::{HookSink, WsSink};
use crate::config::WebhookSettings;
use crate::error::Error;
use crate::event::EventChannel;
use crate::wake::WakeFlag;

/// Connections served at once; a new one beyond this closes the one idle longest.
pub(crate) const MAX_CONNECTIONS: usize = 128;
/// Connections one address may hold; its oldest goes first.
pub(crate) const MAX_PER_SOURCE: usize = 32;
/// A request must arrive whole within this, counted from its first byte (or from the connection).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// A kept-alive connection may wait this long for its next request.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(15);
/// An answer must be taken by the client within this.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// After refusing a request, how long and how much of the unread rest is read and discarded before closing, so
/// the client sees the answer instead of a reset.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1024 * 1024;
/// Pause before accepting again after the process ran out of descriptors (doubles up to 2 s).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

const WAKE: Token = Token(0);
const ACCEPT: Token = Token(1);

/// A running listener. Stopped by [`Listener::stop`] (also on drop); when that returns, its thread is gone and
/// every connection closed.
pub(crate) struct Listener {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

/// What requests are checked against and where events go.
struct Context {
    path: String,
    token: Option<String>,
    allowed: Option<super::AllowedSources>,
    queue: Arc<EventQueue>,
    wake: Option<WakeFlag>,
    sink: Arc<dyn HookSink>,
    /// The outbound WebSocket server's path and where its frames go.
    ws_path: String,
    ws: Arc<dyn WsSink>,
}

impl Listener {
    /// Binds `Host:Port` and starts the poller. A bind failure names the address.
    pub(crate) fn start(
        w: &WebhookSettings,
        allowed: Option<super::AllowedSources>,
        queue: Arc<EventQueue>,
        wake: Option<WakeFlag>,
        sink: Arc<dyn HookSink>,
        ws: Arc<dyn WsSink>,
    ) -> Result<Listener, Error> {
        let host = crate::hostname::url_host(&w.host);
        let wanted = format!("{host}:{}", w.port);
        let io = |e: std::io::Error| Error::Io {
            context: format!("starting the webhook listener on {wanted}"),
            source: e,
        };
        let std_listener = std::net::TcpListener::bind(&wanted).map_err(io)?;
        std_listener.set_nonblocking(true).map_err(io)?;
        let addr = std_listener.local_addr().map_err(io)?;
        let mut listener = TcpListener::from_std(std_listener);
        let poll = Poll::new().map_err(io)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE).map_err(io)?);
        poll.registry()
            .register(&mut listener, ACCEPT, Interest::READABLE)
            .map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let ctx = Context {
            path: w.path.clone(),
            token: w.token.clone(),
            allowed,
            queue,
            wake,
            sink,
            ws_path: w.ws_path.clone(),
            ws,
        };
        let mut server = Server {
            poll,
            listener,
            ctx,
            conns: HashMap::new(),
            next_token: 2,
            accept_paused_until: None,
            backoff: ACCEPT_BACKOFF,
            warned_descriptors: false,
            warned_full: false,
        };
        let flag = stop.clone();
        let builder = std::thread::Builder::new()
            .name("sd-webhook".into())
            .stack_size(256 * 1024);
        let thread =
            crate::log_scope::spawn(builder, move || server.run(&flag)).map_err(|e| Error::Io {
                context: "starting the webhook listener thread".into(),
                source: e,
            })?;
        log::info!("webhook listener on http://{addr}{}", w.path);
        Ok(Listener {
            waker,
            stop,
            thread: Some(thread),
            addr,
        })
    }

    /// The address actually bound (the port is real even when 0 was configured).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the poller and joins it; open connections are closed, whatever their clients do.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    peer: IpAddr,
    /// Received and not yet consumed; never more than one request's limits.
    input: Vec<u8>,
    /// The answer being written, and how much of it is out.
    output: Vec<u8>,
    sent: usize,
    /// Close once the output is out.
    close_after: bool,
    /// `100 Continue` was sent for the current request.
    continued: bool,
    /// The answer is out and our side shut: discarding what the client still sends (this many bytes so far).
    draining: Option<usize>,
    /// When the connection is dropped if nothing completes.
    deadline: Instant,
    /// Last progress, for choosing which connection to drop.
    active: Instant,
    /// Upgraded to the outbound WebSocket (`outbound_ws.rs`): frames from here on.
    ws: Option<Session>,
}

impl Conn {
    /// Nothing half-received and nothing to write.
    fn idle(&self) -> bool {
        self.input.is_empty() && self.output.is_empty()
    }
}

struct Server {
    poll: Poll,
    listener: TcpListener,
    ctx: Context,
    conns: HashMap<Token, Conn>,
    next_token: usize,
    accept_paused_until: Option<Instant>,
    backoff: Duration,
    warned_descriptors: bool,
    warned_full: bool,
}

impl Server {
    fn run(&mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(256);
        while !stop.load(Ordering::SeqCst) {
            let timeout = self
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                log::error!("webhook listener stopped: waiting for connections failed: {e}");
                return;
            }
            for event in events.iter() {
                match event.token() {
                    WAKE => {}
                    ACCEPT => self.accept_all(),
                    token => self.service(token),
                }
            }
            self.expire();
        }
    }

    /// The earliest connection deadline or accept retry.
    fn next_deadline(&self) -> Option<Instant> {
        self.conns
            .values()
            .map(|c| c.deadline)
            .chain(self.accept_paused_until)
            .min()
    }

    fn accept_all(&mut self) {
        if self.accept_paused_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        self.accept_paused_until = None;
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    self.backoff = ACCEPT_BACKOFF;
                    self.admit(stream, peer.ip());
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_resource_error(&e) => {
                    if !std::mem::replace(&mut self.warned_descriptors, true) {
                        log::warn!(
                            "webhook listener: cannot accept a connection: {e}; dropping idle connections and retrying (raise the open-file limit, ulimit -n, if this repeats)"
                        );
                    }
                    // Free a descriptor and retry at once (each round takes one waiting connection, so this
                    // cannot spin); with nothing to free, wait: the pending connection stays in the backlog.
                    if self.evict(None) {
                        continue;
                    }
                    self.accept_paused_until = Some(Instant::now() + self.backoff);
                    self.backoff = (self.backoff * 2).min(Duration::from_secs(2));
                    return;
                }
                // A connection that failed before we took it (reset, aborted): the next one may be fine.
                Err(e) => log::debug!("webhook listener: accept failed: {e}"),
            }
        }
    }

    /// Takes a new connection, making room first when the limits are reached.
    fn admit(&mut self, mut stream: TcpStream, peer: IpAddr) {
        let from_peer = self.conns.values().filter(|c| c.peer == peer).count();
        if from_peer >= MAX_PER_SOURCE {
            self.evict(Some(peer));
        } else if self.conns.len() >= MAX_CONNECTIONS {
            if !std::mem::replace(&mut self.warned_full, true) {
                log::warn!(
                    "webhook listener: {MAX_CONNECTIONS} connections open; closing the longest idle ones to take new ones"
                );
            }
            self.evict(None);
        }
        let token = Token(self.next_token);
        self.next_token = self.next_token.wrapping_add(1).max(2);
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::debug!("webhook listener: cannot watch a connection from {peer}: {e}");
            return;
        }
        let _ = stream.set_nodelay(true);
        let now = Instant::now();
        self.conns.insert(
            token,
            Conn {
                stream,
                peer,
                input: Vec::new(),
                output: Vec::new(),
                sent: 0,
                close_after: false,
                continued: false,
                draining: None,
                deadline: now + REQUEST_TIMEOUT,
                active: now,
                ws: None,
            },
        );
        // Data may already be waiting; edge-triggered readiness would not report it again.
        self.service(token);
    }

    /// Closes the connection (of `peer`, if given) idle longest; failing that, the least recently active.
    /// False when there was none.
    fn evict(&mut self, peer: Option<IpAddr>) -> bool {
        let victim = self
            .conns
            .iter()
            .filter(|(_, c)| peer.is_none_or(|p| c.peer == p))
            .min_by_key(|(_, c)| (!c.idle(), c.active))
            .map(|(t, _)| *t);
        if let Some(t) = victim {
            self.close(t);
        }
        victim.is_some()
    }

    fn close(&mut self, token: Token) {
        if let Some(mut c) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(&mut c.stream);
        }
    }

    /// Closes connections past their deadline.
    fn expire(&mut self) {
        let now = Instant::now();
        let late: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            if let Some(c) = self.conns.get(&t) {
                log::debug!(
                    "webhook listener: closing a connection from {} that did not finish in time",
                    c.peer
                );
            }
            self.close(t);
        }
        if self.accept_paused_until.is_some_and(|t| t <= now) {
            self.accept_all();
        }
    }

    /// Reads, answers and writes as far as the connection allows without waiting.
    fn service(&mut self, token: Token) {
        let Some(mut conn) = self.conns.remove(&token) else {
            return;
        };
        let keep = drive(&mut conn, &self.ctx);
        if keep {
            self.conns.insert(token, conn);
        } else {
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
    }
}

/// Whether an accept error means the process or system is out of something (descriptors, buffers, memory).
fn is_resource_error(e: &std::io::Error) -> bool {
    // EMFILE 24, ENFILE 23, ENOBUFS 105, ENOMEM 12 on Linux; by message elsewhere.
    matches!(e.raw_os_error(), Some(23 | 24 | 105 | 12)) || e.kind() == ErrorKind::OutOfMemory
}

/// Advances one connection; false when it is finished and must be closed.
fn drive(conn: &mut Conn, ctx: &Context) -> bool {
    loop {
        if !flush(conn) {
            return false;
        }
        if !conn.output.is_empty() {
            // The client is slow to read; wait for writability.
            return true;
        }
        if conn.close_after {
            return drain(conn);
        }
        if conn.ws.is_some() {
            if serve_ws(conn, ctx) {
                continue;
            }
        } else if answer_buffered(conn, ctx) {
            continue;
        }
        match fill(conn) {
            Fill::Progress => {}
            Fill::Blocked => return true,
            Fill::Closed => return false,
        }
    }
}

enum Fill {
    Progress,
    Blocked,
    Closed,
}

/// Reads what is available, at most up to one request's limits.
fn fill(conn: &mut Conn) -> Fill {
    let limit = match conn.ws {
        Some(_) => outbound_ws::MAX_FRAME + crate::driver::ws::frame::MAX_HEADER,
        None => MAX_HEAD + MAX_BODY + 4,
    };
    let room = limit.saturating_sub(conn.input.len());
    if room == 0 {
        // Cannot happen: a head or body over its limit is refused before the buffer fills.
        return Fill::Closed;
    }
    let mut chunk = [0u8; 8192];
    let want = room.min(chunk.len());
    match conn.stream.read(&mut chunk[..want]) {
        Ok(0) => Fill::Closed,
        Ok(n) => {
            let now = Instant::now();
            // A new request (or frame) starts: it has REQUEST_TIMEOUT to arrive whole. A WebSocket that has
            // not named its device keeps its first-frame deadline, whatever it sends.
            if conn.input.is_empty() && conn.ws.as_ref().is_none_or(Session::identified) {
                conn.deadline = now + REQUEST_TIMEOUT;
            }
            conn.input.extend_from_slice(&chunk[..n]);
            conn.active = now;
            Fill::Progress
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => Fill::Blocked,
        Err(e) if e.kind() == ErrorKind::Interrupted => Fill::Progress,
        Err(_) => Fill::Closed,
    }
}

/// After a final answer: shut our side, then read and drop what the client still sends (bounded in time and
/// bytes) so that closing does not reset the connection before the client read the answer. False when done.
fn drain(conn: &mut Conn) -> bool {
    if conn.draining.is_none() {
        if conn.input.is_empty() {
            // Nothing unread seen: a plain close loses nothing.
            return false;
        }
        let _ = conn.stream.shutdown(std::net::Shutdown::Write);
        conn.input = Vec::new();
        conn.draining = Some(0);
        conn.deadline = conn.deadline.min(Instant::now() + LINGER);
    }
    let mut chunk = [0u8; 8192];
    loop {
        match conn.stream.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => {
                let total = conn.draining.unwrap_or(0) + n;
                if total > LINGER_BYTES {
                    return false;
                }
                conn.draining = Some(total);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Writes pending output; false when the connection broke.
fn flush(conn: &mut Conn) -> bool {
    while conn.sent < conn.output.len() {
        match conn.stream.write(&conn.output[conn.sent..]) {
            Ok(0) => return false,
            Ok(n) => {
                conn.sent += n;
                conn.active = Instant::now();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    conn.output.clear();
    conn.sent = 0;
    true
}

/// Handles the frames of an upgraded connection; true when output was queued (a pong, or a close, after which
/// the connection ends).
fn serve_ws(conn: &mut Conn, ctx: &Context) -> bool {
    let Some(session) = conn.ws.as_mut() else {
        return false;
    };
    let now = Instant::now();
    let before = session.identified();
    let flow = session.serve(
        &mut conn.input,
        &mut conn.output,
        ctx.ws.as_ref(),
        conn.peer,
        now,
    );
    if session.identified() && (!before || conn.input.is_empty()) {
        // Named its device: it may stay, silent, for the idle time (each frame extends it).
        conn.deadline = now + outbound_ws::IDLE;
    }
    match flow {
        Flow::Wait => false,
        Flow::Answer => {
            conn.sent = 0;
            true
        }
        Flow::Close => {
            conn.sent = 0;
            conn.close_after = true;
            conn.deadline = now + WRITE_TIMEOUT;
            true
        }
    }
}

/// A WebSocket upgrade to the outbound server's path: answered `101` (from an allowed sender) and served as
/// frames from then on; `None` when the request is something else.
fn upgrade(conn: &mut Conn, ctx: &Context, head: &http::Head) -> Option<()> {
    let key = head.ws_key.as_deref()?;
    let path = head.target.split('?').next().unwrap_or_default();
    if head.method != "GET" || path != ctx.ws_path {
        return None;
    }
    let allowed = ctx.allowed.as_ref().map(|a| {
        a.read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&conn.peer)
    });
    if allowed == Some(false) {
        log::debug!(
            "outbound WebSocket from {} refused (403): not a configured device's address",
            conn.peer
        );
        conn.close_after = true;
        conn.output = http::response(403, "sender not allowed\n", false);
    } else {
        conn.output = outbound_ws::handshake(key);
        conn.ws = Some(Session::new(Instant::now()));
        // The first frame, which names the device, must come within this.
        conn.deadline = Instant::now() + outbound_ws::FIRST_FRAME;
    }
    conn.sent = 0;
    conn.input.drain(..head.len);
    Some(())
}

/// Answers the request at the front of the input if it is complete (or refused); true when output was queued.
fn answer_buffered(conn: &mut Conn, ctx: &Context) -> bool {
    let queue = |conn: &mut Conn, bytes: Vec<u8>, deadline: Duration| {
        conn.output = bytes;
        conn.sent = 0;
        conn.deadline = Instant::now() + deadline;
    };
    if conn.input.is_empty() {
        return false;
    }
    let head = match http::parse_head(&conn.input, MAX_BODY) {
        Ok(Some(h)) => h,
        Ok(None) => return false,
        Err(r) => {
            log::debug!(
                "webhook request from {} refused ({}): {}",
                conn.peer,
                r.status,
                r.reason
            );
            conn.close_after = true;
            queue(
                conn,
                http::response(r.status, &format!("{}\n", r.reason), false),
                WRITE_TIMEOUT,
            );
            return true;
        }
    };
    if head.body_len == 0 && upgrade(conn, ctx, &head).is_some() {
        return true;
    }
    let total = head.len + head.body_len;
    if conn.input.len() < total {
        if head.expect_continue && !conn.continued {
            conn.continued = true;
            let deadline = conn.deadline.saturating_duration_since(Instant::now());
            queue(conn, b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(), deadline);
            return true;
        }
        return false;
    }
    let (status, text) = handle(
        ctx,
        &head.method,
        &head.target,
        &conn.input[head.len..total],
        conn.peer,
    );
    conn.input.drain(..total);
    conn.continued = false;
    let keep = head.keep_alive && status == 200;
    conn.close_after = !keep;
    queue(conn, http::response(status, &text, keep), WRITE_TIMEOUT);
    if keep && conn.input.is_empty() {
        // After the answer is out the connection may idle; `flush` keeps this deadline.
        conn.deadline = Instant::now() + IDLE_TIMEOUT.max(WRITE_TIMEOUT);
    }
    true
}

/// The request target with any token value hidden and the rest escaped, for logs.
fn redacted(target: &str) -> String {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let shown = if query.is_empty() {
        path.to_string()
    } else {
        let q: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("token") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        format!("{path}?{}", q.join("&"))
    };
    crate::text::quote(&shown, 200)
}

/// Checks, resolves and queues one request; returns the status and text to answer.
fn handle(ctx: &Context, method: &str, target: &str, body: &[u8], source: IpAddr) -> (u16, String) {
    let allowed = ctx
        .allowed
        .as_ref()
        .map(|a| a.read().unwrap_or_else(|e| e.into_inner()));
    let rules = Rules {
        path: &ctx.path,
        token: ctx.token.as_deref(),
        allowed: allowed.as_deref().map(Vec::as_slice),
    };
    let incoming = Incoming {
        method,
        target,
        body,
        source,
    };
    match request::parse(&incoming, &rules) {
        Ok(hook) => {
            let Some(Resolved { names, order }) = ctx.sink.resolve(&hook, source) else {
                return (
                    200,
                    "smartdev: event already delivered by the push channel\n".into(),
                );
            };
            let event = routing::event(hook, names, source.to_string(), EventChannel::Webhook);
            let queued = ctx.queue.push(event);
            drop(order);
            if !queued {
                // Still 200: the device did nothing wrong by this request alone, and its state was taken.
                return (
                    200,
                    format!(
                        "smartdev: event dropped: the device sent more than {} events per second\n",
                        queue::DEVICE_RATE
                    ),
                );
            }
            if let Some(w) = &ctx.wake {
                w.set();
            }
            (200, "smartdev: event queued\n".into())
        }
        Err(r) => {
            log::debug!(
                "webhook request {} {} from {source} refused ({}): {}",
                crate::text::quote(method, 16),
                redacted(target),
                r.status,
                crate::text::quote(&r.reason, 200)
            );
            (r.status, format!("{}\n", r.reason))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn tokens_never_reach_the_log_and_control_characters_are_escaped() {
        assert_eq!(
            redacted("/h?Event=x&token=s3cret&a=1"),
            "\"/h?Event=x&token=***&a=1\""
        );
        assert_eq!(redacted("/h"), "\"/h\"");
        let r = redacted("/h?Event=a\r\nb\0");
        assert!(
            !r.contains('\r') && !r.contains('\n') && !r.contains('\0'),
            "{r}"
        );
    }
}
