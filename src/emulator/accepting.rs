//! The poller's side of the ports whose listeners it holds (lent by their threads, `port.rs`): connections
//! are accepted, an HTTPS port's TLS handshakes done and their request heads read here, without a thread woken
//! for each. A WebSocket upgrade is answered at once (`Service::upgrade`, `ws.rs`) and the connection stays on
//! the poller; any other request goes to the port's thread with the bytes read so far and its TLS state
//! (`server::serve_delivered`), which answers it with the port's fault and latency as before.
//!
//! Bounds: a port accepts at most 16 connections per turn, and none while 16 of its connections are being
//! read or wait for its thread (the others wait in the kernel's backlog, as they did for a thread busy with
//! one); a head must come whole within 2 s and 64 KiB (with TLS, 128 KiB of records read). A connection
//! costs the poller one handshake at most (rustls does not renegotiate): its public-key work (0.1–0.2 ms
//! here) is the most one client's turn takes.

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Interest, Registry, Token};

use super::faults::{Delivered, NetControl, Phase};
use super::server::{MAX_HEAD, READ_TIMEOUT, Service, has_body, head_end, parse_head};

/// Connections accepted from one port per turn.
const ACCEPT_BUDGET: usize = 16;
/// A port's connections being read or waiting for its thread, beyond which it accepts no more for now.
const WAITING: usize = 16;
/// How long a port that may accept no more (or whose `accept` failed) waits before it tries again.
const PAUSE: Duration = Duration::from_millis(5);

/// What a listener or a connection waits for after a turn.
pub(super) enum Next {
    /// Readiness or a kick.
    Wait,
    /// That time as well (a request's latency, a blocked write's deadline, a paused port).
    At(Instant),
    /// Another turn at once (its budget ran out with more to do).
    Again,
    /// It is over.
    End,
}

/// A lent listener.
pub(super) struct Port {
    listener: mio::net::TcpListener,
    service: Arc<dyn Service>,
    net: Arc<NetControl>,
    /// Its connections whose head is being read.
    pub(super) heads: usize,
}

impl Port {
    /// Registers `listener` with the poller under `token` (from any thread: events before the poller knows
    /// the port are made up for by a kick).
    pub(super) fn new(
        listener: TcpListener,
        service: Arc<dyn Service>,
        net: Arc<NetControl>,
        registry: &Registry,
        token: u64,
    ) -> Result<Port, TcpListener> {
        if listener.set_nonblocking(true).is_err() {
            return Err(listener);
        }
        let mut listener = mio::net::TcpListener::from_std(listener);
        if let Err(e) = registry.register(&mut listener, Token(token as usize), Interest::READABLE)
        {
            log::debug!("emulator: a port cannot be polled: {e}");
            return Err(listener.into());
        }
        Ok(Port {
            listener,
            service,
            net,
            heads: 0,
        })
    }

    /// Accepts what waits, within the bounds; each new connection is a head (with its deadline) in `heads`.
    pub(super) fn turn(
        &mut self,
        me: u64,
        now: Instant,
        registry: &Registry,
        mut token: impl FnMut() -> u64,
        heads: &mut Vec<(u64, Head)>,
    ) -> Next {
        for _ in 0..ACCEPT_BUDGET {
            if self.heads + self.net.delivered() >= WAITING {
                return Next::At(now + PAUSE);
            }
            match self.listener.accept() {
                Ok((mut tcp, _)) => {
                    // A client that raced a fault change, or our own wake-up connection: closed unread.
                    if !matches!(self.net.phase(now), Phase::Serve(_)) {
                        continue;
                    }
                    // Answers go out at once (see `server::serve`).
                    let _ = tcp.set_nodelay(true);
                    // Read per connection: a certificate switched at runtime is served from the next one on.
                    let tls = match self.service.tls().map(rustls::ServerConnection::new) {
                        None => None,
                        Some(Ok(conn)) => Some(conn),
                        Some(Err(e)) => {
                            log::debug!("emulator: TLS: {e}");
                            continue;
                        }
                    };
                    // A handshake's flight may not all go at once: the rest goes when the socket takes it.
                    let interest = if tls.is_some() {
                        Interest::READABLE | Interest::WRITABLE
                    } else {
                        Interest::READABLE
                    };
                    let t = token();
                    if registry
                        .register(&mut tcp, Token(t as usize), interest)
                        .is_err()
                    {
                        continue;
                    }
                    self.heads += 1;
                    heads.push((
                        t,
                        Head {
                            tcp,
                            tls,
                            raw: 0,
                            port: me,
                            service: Arc::clone(&self.service),
                            net: Arc::clone(&self.net),
                            read: Vec::new(),
                            deadline: now + READ_TIMEOUT,
                        },
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // E.g. out of file descriptors: do not spin.
                    log::debug!("emulator: accept failed: {e}");
                    return Next::At(now + PAUSE);
                }
            }
        }
        Next::Again
    }

    /// The listener, no longer polled, for the port's thread.
    pub(super) fn into_listener(mut self, registry: &Registry) -> TcpListener {
        let _ = registry.deregister(&mut self.listener);
        self.listener.into()
    }
}

/// A connection whose request head is being read.
pub(super) struct Head {
    tcp: mio::net::TcpStream,
    /// An HTTPS port's connection: its handshake happens here, and `read` is what it decrypted.
    tls: Option<rustls::ServerConnection>,
    /// Bytes read from the socket (over TLS, more than `read`).
    raw: usize,
    /// Its port's token.
    pub(super) port: u64,
    service: Arc<dyn Service>,
    net: Arc<NetControl>,
    read: Vec<u8>,
    pub(super) deadline: Instant,
}

/// Where a head is after a turn.
pub(super) enum HeadNext {
    /// More is to come.
    Wait,
    /// It came whole: `Head::finish`.
    Whole,
    /// Nothing usable comes (closed, too long, too slow, failed): the connection closes.
    Drop,
}

impl Head {
    /// Reads what came (and, over TLS, answers the handshake).
    pub(super) fn turn(&mut self, now: Instant, scratch: &mut [u8]) -> HeadNext {
        if now >= self.deadline {
            return HeadNext::Drop;
        }
        loop {
            let n = match self.tcp.read(scratch) {
                // Closed before the blank line (a whole head returned at once).
                Ok(0) => return HeadNext::Drop,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if self.flush_tls() {
                        HeadNext::Wait
                    } else {
                        HeadNext::Drop
                    };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return HeadNext::Drop,
            };
            self.raw += n;
            // Only the new bytes (and the three before them) can complete the blank line.
            let from = self.read.len().saturating_sub(3);
            let taken = match self.tls.as_mut() {
                None => {
                    self.read.extend_from_slice(&scratch[..n]);
                    true
                }
                Some(tls) => decrypt(tls, &scratch[..n], &mut self.read),
            };
            // Written even when the client broke the protocol: the alert tells it why.
            let flushed = self.flush_tls();
            if !taken || !flushed {
                return HeadNext::Drop;
            }
            if head_end(&self.read[from..]).is_some() {
                return HeadNext::Whole;
            }
            if self.read.len() > MAX_HEAD || self.raw > 2 * MAX_HEAD {
                return HeadNext::Drop;
            }
        }
    }

    /// Writes what rustls has to say (the handshake's flights, an alert): `false` when the connection failed.
    fn flush_tls(&mut self) -> bool {
        let Some(tls) = self.tls.as_mut() else {
            return true;
        };
        while tls.wants_write() {
            match tls.write_tls(&mut self.tcp) {
                Ok(_) => {}
                // The rest goes at the writable event.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// No longer polled, closed.
    pub(super) fn drop_from(mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.tcp);
    }

    /// A whole head: a WebSocket upgrade without a body is answered here (the service takes the connection),
    /// anything else goes to the port's thread.
    pub(super) fn finish(mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.tcp);
        let tcp: TcpStream = self.tcp.into();
        if self.net.phase(Instant::now()) == Phase::Stop {
            return;
        }
        let upgrade = head_end(&self.read)
            .and_then(|end| parse_head(&self.read, end))
            .filter(|req| req.header("upgrade").is_some() && !has_body(req));
        let service = Arc::clone(&self.service);
        let (tcp, tls) = match (upgrade, self.tls) {
            (None, tls) => (tcp, tls),
            (Some(req), None) => match service.upgrade(&req, tcp) {
                // Answered, counted and polled from now on (or refused).
                None => return,
                // Not one it upgrades: answered like any request.
                Some(tcp) => (tcp, None),
            },
            (Some(req), Some(tls)) => {
                match service.upgrade_tls(&req, rustls::StreamOwned::new(tls, tcp)) {
                    None => return,
                    Some(s) => (s.sock, Some(s.conn)),
                }
            }
        };
        self.net.deliver(Delivered {
            tcp,
            tls,
            read: self.read,
        });
    }
}

/// Feeds records read from the socket to rustls and appends what they decrypt to `plain`; `false` when the
/// client broke the protocol (the alert rustls made is still written) or closed its side.
fn decrypt(tls: &mut rustls::ServerConnection, mut records: &[u8], plain: &mut Vec<u8>) -> bool {
    while !records.is_empty() {
        if tls.read_tls(&mut records).is_err() {
            return false;
        }
        if let Err(e) = tls.process_new_packets() {
            log::trace!("emulator: failed handshake: {e}");
            return false;
        }
        // Taken at once: rustls holds a bounded amount of plaintext.
        match tls.reader().read_to_end(plain) {
            Ok(_) => return false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::super::cert::{CertAuthority, CertSpec, DeviceTls};
    use super::super::faults::NetControl;
    use super::super::server::{Request, Response, Service};
    use super::super::ws_poller;

    struct Plain;

    impl Service for Plain {
        fn key(&self, _: &Request) -> String {
            "GET /".into()
        }
        fn handle(&self, _: &Request) -> Response {
            Response::text(200, "ok")
        }
    }

    /// Waits (at most 10 s, a hang guard) until `f` holds.
    fn eventually(mut f: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        f()
    }

    /// A lent port's requests reach its thread with the bytes read; the listener comes back when asked, and
    /// one whose thread ended without asking is closed.
    #[test]
    fn a_lent_listener_delivers_comes_back_and_is_closed_when_abandoned() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let service: Arc<dyn Service> = Arc::new(Plain);
        let net = Arc::new(NetControl::new());
        let lend = |l| {
            let poller = ws_poller::shared().unwrap();
            poller
                .lend(l, Arc::clone(&service), Arc::clone(&net))
                .unwrap_or_else(|_| panic!("not lent"))
        };
        let lent = lend(l);
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut got = Vec::new();
        assert!(eventually(|| {
            got.extend(net.take_delivered());
            !got.is_empty()
        }));
        assert_eq!(got[0].read, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let back = lent.reclaim().expect("the listener came back");
        assert_eq!(back.local_addr().unwrap(), addr);
        // Lent again and abandoned: nothing listens at the address any more.
        drop(lend(back));
        assert!(
            eventually(|| TcpStream::connect(addr).is_err()),
            "the abandoned listener still accepts"
        );
    }

    /// An HTTPS port's service.
    struct Https(Arc<rustls::ServerConfig>);

    impl Service for Https {
        fn key(&self, _: &Request) -> String {
            "GET /".into()
        }
        fn handle(&self, _: &Request) -> Response {
            Response::text(200, "ok")
        }
        fn tls(&self) -> Option<Arc<rustls::ServerConfig>> {
            Some(Arc::clone(&self.0))
        }
    }

    /// A lent HTTPS port: the poller does the handshake and delivers the decrypted head with the TLS state,
    /// through which the port's thread answers; a client that does not speak TLS is closed, nothing delivered.
    #[test]
    fn a_lent_https_port_does_the_handshake_and_delivers_the_decrypted_head() {
        use std::io::Read;
        let ca = Arc::new(CertAuthority::new("smartdev test CA"));
        let spec = CertSpec {
            issuer: Some(Arc::clone(&ca)),
            names: vec!["127.0.0.1".into()],
            expired: false,
        };
        let service: Arc<dyn Service> = Arc::new(Https(DeviceTls::new(&spec).unwrap().config()));
        let net = Arc::new(NetControl::new());
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let lent = ws_poller::shared()
            .unwrap()
            .lend(l, Arc::clone(&service), Arc::clone(&net))
            .unwrap_or_else(|_| panic!("not lent"));

        let mut junk = TcpStream::connect(addr).unwrap();
        junk.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        junk.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        // The poller answers with an alert (content type 21) saying why, then closes.
        let mut rest = Vec::new();
        assert!(junk.read_to_end(&mut rest).is_ok(), "not closed");
        assert_eq!(rest.first(), Some(&21), "{rest:?}");
        assert!(net.take_delivered().is_empty());

        let client = std::thread::spawn(move || {
            use rustls::pki_types::pem::PemObject as _;
            let mut roots = rustls::RootCertStore::empty();
            for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca.pem().as_bytes()) {
                roots.add(c.unwrap()).unwrap();
            }
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
            let conn =
                rustls::ClientConnection::new(Arc::new(config), "127.0.0.1".try_into().unwrap())
                    .unwrap();
            let sock = TcpStream::connect(addr).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut tls = rustls::StreamOwned::new(conn, sock);
            tls.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut answer = Vec::new();
            let _ = tls.read_to_end(&mut answer);
            answer
        });
        let mut got = Vec::new();
        assert!(eventually(|| {
            got.extend(net.take_delivered());
            !got.is_empty()
        }));
        let conn = got.remove(0);
        assert_eq!(conn.read, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let tls = conn.tls.expect("delivered with its TLS state");
        conn.tcp.set_nonblocking(false).unwrap();
        let mut stream = rustls::StreamOwned::new(tls, conn.tcp);
        stream.write_all(b"answered over TLS").unwrap();
        stream.conn.send_close_notify();
        stream.flush().unwrap();
        drop(stream);
        assert_eq!(client.join().unwrap(), b"answered over TLS");
        assert!(lent.reclaim().is_some());
    }
}
