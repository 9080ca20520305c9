//! The network side of one emulated port: its fault, latency, held (blackholed) sockets, request counts and
//! the stop signal, shared between the API, the port's accept thread and the poller while it holds the
//! port's listener.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Fault;

/// What the accept thread should do now; the instant is when that changes by itself (flapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Listen and answer.
    Serve(Option<Instant>),
    /// Do not listen.
    Refuse(Option<Instant>),
    /// Leave the accept loop.
    Stop,
}

struct Inner {
    fault: Fault,
    since: Instant,
    generation: u64,
    latency: Duration,
    /// When set, the fault (Blackhole, Http500, MalformedJson, TruncatedBody) and the latency apply only to
    /// requests whose count key starts with it.
    scope: Option<String>,
    held: Vec<TcpStream>,
    listening: bool,
    stopping: bool,
    /// Where the port listens now (`0.0.0.0` or a specific address; the port is never 0).
    local: SocketAddr,
    /// A listener at another address the accept thread takes over (the device moved).
    handover: Option<TcpListener>,
    /// Connections the poller accepted while it held the listener, with the bytes it read of their request,
    /// for the port's thread to answer (`server::serve_delivered`).
    delivered: Vec<Delivered>,
}

/// A connection the poller accepted and read the request head of, for the port's thread.
pub(crate) struct Delivered {
    pub(crate) tcp: TcpStream,
    /// Its TLS state, the handshake done (HTTPS).
    pub(crate) tls: Option<rustls::ServerConnection>,
    /// What was read of the request (decrypted, over TLS).
    pub(crate) read: Vec<u8>,
}

/// Shared by the API (writer), the accept thread (reader) and the poller (delivering connections while it holds
/// the listener); one condvar signals every change.
pub(crate) struct NetControl {
    inner: Mutex<Inner>,
    changed: Condvar,
    counts: Mutex<BTreeMap<String, u64>>,
}

impl NetControl {
    pub(crate) fn new() -> Self {
        NetControl {
            inner: Mutex::new(Inner {
                fault: Fault::None,
                since: Instant::now(),
                generation: 0,
                latency: Duration::ZERO,
                scope: None,
                held: Vec::new(),
                listening: true,
                stopping: false,
                local: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                handover: None,
                delivered: Vec::new(),
            }),
            changed: Condvar::new(),
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    // A panic elsewhere must not make the emulator unusable: the state stays consistent between statements.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait_timeout<'a>(&self, g: MutexGuard<'a, Inner>, d: Duration) -> MutexGuard<'a, Inner> {
        match self.changed.wait_timeout(g, d) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        }
    }

    /// Sets the fault and releases blackholed sockets. True when the accept thread must be woken (it may be
    /// blocked in `accept` and now has to close its listener).
    pub(crate) fn set_fault(&self, fault: Fault) -> bool {
        let held = {
            let mut g = self.lock();
            g.fault = fault;
            g.since = Instant::now();
            g.generation += 1;
            self.changed.notify_all();
            std::mem::take(&mut g.held)
        };
        drop(held);
        matches!(fault, Fault::Refuse | Fault::Flapping(_))
    }

    pub(crate) fn set_scope(&self, scope: Option<String>) {
        self.lock().scope = scope;
    }

    /// The fault and latency for a request with count key `key` (none outside the scope).
    pub(crate) fn for_request(&self, key: &str) -> (Fault, Duration) {
        let g = self.lock();
        if g.scope.as_deref().is_some_and(|s| !key.starts_with(s)) {
            return (Fault::None, Duration::ZERO);
        }
        (g.fault, g.latency)
    }

    pub(crate) fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    pub(crate) fn phase(&self, now: Instant) -> Phase {
        self.phase_and_generation(now).0
    }

    /// The phase and the fault generation it was computed from (for [`NetControl::wait_change`]).
    pub(crate) fn phase_and_generation(&self, now: Instant) -> (Phase, u64) {
        let g = self.lock();
        let phase = if g.stopping {
            Phase::Stop
        } else {
            match g.fault {
                Fault::Refuse => Phase::Refuse(None),
                Fault::Flapping(period) => flap(g.since, period, now),
                _ => Phase::Serve(None),
            }
        };
        (phase, g.generation)
    }

    /// Waits until the fault changes from generation `seen`, the port stops, `until` passes or a connection is
    /// delivered. A change made after `seen` was read but before this call returns at once (it is not missed).
    pub(crate) fn wait_change(&self, until: Option<Instant>, seen: u64) {
        let mut g = self.lock();
        while !g.stopping && g.generation == seen && g.delivered.is_empty() {
            match until {
                None => g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    let now = Instant::now();
                    if now >= t {
                        break;
                    }
                    g = self.wait_timeout(g, t - now);
                }
            }
        }
    }

    /// Waits until the fault changes from generation `seen` or the port stops (`true`), or a connection is
    /// delivered (`false`).
    pub(crate) fn wait_delivery(&self, seen: u64) -> bool {
        let mut g = self.lock();
        loop {
            if g.stopping || g.generation != seen {
                return true;
            }
            if !g.delivered.is_empty() {
                return false;
            }
            g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Gives the port's thread a connection the poller accepted, with what it read of its request (dropped
    /// when the port stops).
    pub(crate) fn deliver(&self, conn: Delivered) {
        let mut g = self.lock();
        if !g.stopping {
            g.delivered.push(conn);
            self.changed.notify_all();
        }
    }

    /// The connections delivered and not yet taken, oldest first.
    pub(crate) fn take_delivered(&self) -> Vec<Delivered> {
        std::mem::take(&mut self.lock().delivered)
    }

    /// How many delivered connections wait for the port's thread.
    pub(crate) fn delivered(&self) -> usize {
        self.lock().delivered.len()
    }

    /// Sleeps, cut short by `stop`.
    pub(crate) fn sleep(&self, d: Duration) {
        let deadline = Instant::now() + d;
        let mut g = self.lock();
        while !g.stopping {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            g = self.wait_timeout(g, deadline - now);
        }
    }

    /// Called by the accept thread when it opens or closes its listener.
    pub(crate) fn set_listening(&self, listening: bool) {
        self.lock().listening = listening;
        self.changed.notify_all();
    }

    /// Waits (at most `timeout`) until the accept thread has opened or closed its listener, so that a caller
    /// who sets `Refuse` sees refused connections right away.
    pub(crate) fn await_listening(&self, listening: bool, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.lock();
        while g.listening != listening && !g.stopping {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self.wait_timeout(g, deadline - now);
        }
        g.listening == listening
    }

    /// Where the port listens now.
    pub(crate) fn local(&self) -> SocketAddr {
        self.lock().local
    }

    /// Set by the accept thread when it starts or takes over another listener.
    pub(crate) fn set_local(&self, local: SocketAddr) {
        self.lock().local = local;
        self.changed.notify_all();
    }

    /// Gives the accept thread a listener at another address; it drops the current one when it next looks
    /// (wake it). Blackholed connections end: the device left the address they were made to.
    pub(crate) fn hand_over(&self, listener: TcpListener) {
        let held = {
            let mut g = self.lock();
            g.handover = Some(listener);
            g.generation += 1;
            self.changed.notify_all();
            std::mem::take(&mut g.held)
        };
        drop(held);
    }

    /// The listener handed over, if any (taken by the accept thread).
    pub(crate) fn take_handover(&self) -> Option<TcpListener> {
        self.lock().handover.take()
    }

    /// Waits (at most `timeout`) until the accept thread listens at `local`.
    pub(crate) fn await_local(&self, local: SocketAddr, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.lock();
        while g.local != local && !g.stopping {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self.wait_timeout(g, deadline - now);
        }
        g.local == local
    }

    /// Keeps a blackholed connection open until the fault changes or the port stops.
    pub(crate) fn hold(&self, stream: TcpStream) {
        let mut g = self.lock();
        if !g.stopping && g.fault == Fault::Blackhole {
            g.held.push(stream);
        }
    }

    pub(crate) fn stop(&self) {
        let (held, delivered) = {
            let mut g = self.lock();
            g.stopping = true;
            self.changed.notify_all();
            (
                std::mem::take(&mut g.held),
                std::mem::take(&mut g.delivered),
            )
        };
        drop((held, delivered));
    }

    pub(crate) fn count(&self, key: String) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *c.entry(key).or_insert(0) += 1;
    }

    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn reset_counts(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// Flapping starts refusing; phases alternate every `period`, counted from when the fault was set.
fn flap(since: Instant, period: Duration, now: Instant) -> Phase {
    let p = period.max(Duration::from_millis(1)).as_nanos();
    let k = now.saturating_duration_since(since).as_nanos() / p;
    let end = since + Duration::from_nanos(u64::try_from((k + 1) * p).unwrap_or(u64::MAX));
    if k.is_multiple_of(2) {
        Phase::Refuse(Some(end))
    } else {
        Phase::Serve(Some(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flapping_alternates_from_refuse() {
        let t0 = Instant::now();
        let p = Duration::from_millis(100);
        assert_eq!(flap(t0, p, t0), Phase::Refuse(Some(t0 + p)));
        assert_eq!(
            flap(t0, p, t0 + Duration::from_millis(150)),
            Phase::Serve(Some(t0 + 2 * p))
        );
        assert_eq!(
            flap(t0, p, t0 + Duration::from_millis(250)),
            Phase::Refuse(Some(t0 + 3 * p))
        );
    }

    #[test]
    fn phases_follow_fault_and_stop() {
        let n = NetControl::new();
        assert_eq!(n.phase(Instant::now()), Phase::Serve(None));
        assert!(n.set_fault(Fault::Refuse));
        assert_eq!(n.phase(Instant::now()), Phase::Refuse(None));
        assert!(!n.set_fault(Fault::Http500));
        assert_eq!(n.phase(Instant::now()), Phase::Serve(None));
        // A change between reading the phase and waiting is not missed.
        let (_, seen) = n.phase_and_generation(Instant::now());
        n.set_fault(Fault::None);
        let t = Instant::now();
        n.wait_change(None, seen);
        assert!(t.elapsed() < Duration::from_secs(1));
        n.stop();
        assert_eq!(n.phase(Instant::now()), Phase::Stop);
        n.count("a".into());
        n.count("a".into());
        assert_eq!(n.counts()["a"], 2);
        n.reset_counts();
        assert!(n.counts().is_empty());
    }
}
