//! The push poller's TLS helpers: threads that run the public-key crypto of WSS handshakes (certificate check,
//! key exchange: about 150 µs a device), so that the one poller thread never spends it. Opening 1,000 HTTPS
//! devices then uses more than one core, and a reconnecting device's handshake no longer holds the poller
//! (and every other device's frames) for its crypto. Started at the first handshake (a plain-WebSocket installation has
//! none), one fewer than the cores (at least one, at most four), joined when the poller ends.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use mio::Waker;

use crate::driver::ws::secure::{self, Shared};

/// Most helper threads, whatever the cores.
const MAX_HELPERS: usize = 4;

/// A handshake's records, processed: the target's index, its connection (to tell a later dial from this
/// one) and the outcome.
pub(crate) type Processed = (usize, Shared, Result<(), rustls::Error>);

/// The helpers and their queues.
pub(crate) struct Handshakes {
    jobs: Option<Sender<(usize, Shared)>>,
    /// The helpers' side of `jobs` too: what they have not taken is dropped when the poller ends.
    waiting: Option<Receiver<(usize, Shared)>>,
    done_tx: Sender<Processed>,
    done_rx: Receiver<Processed>,
    waker: Arc<Waker>,
    helpers: Vec<JoinHandle<()>>,
    /// Jobs the helpers ran.
    #[cfg(test)]
    ran: Arc<std::sync::atomic::AtomicUsize>,
}

impl Handshakes {
    /// No helper runs until the first [`Handshakes::post`]; `waker` wakes the poller when one finished.
    pub(crate) fn new(waker: Arc<Waker>) -> Handshakes {
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        Handshakes {
            jobs: None,
            waiting: None,
            done_tx,
            done_rx,
            waker,
            helpers: Vec::new(),
            #[cfg(test)]
            ran: Arc::default(),
        }
    }

    /// Has target `ti`'s received handshake records processed by a helper. When no helper can be started,
    /// they are processed here (a dial never waits for a thread that does not exist).
    pub(crate) fn post(&mut self, ti: usize, conn: Shared) {
        if self.jobs.is_none() {
            self.start();
        }
        match &self.jobs {
            Some(jobs) => {
                // The helpers live as long as `jobs`: a send cannot fail while it is held.
                let _ = jobs.send((ti, conn));
            }
            None => {
                let r = run(&conn);
                let _ = self.done_tx.send((ti, conn, r));
                // Taken at the poller's next turn, which must not wait for a socket first.
                let _ = self.waker.wake();
            }
        }
    }

    /// What the helpers finished since the last call.
    pub(crate) fn finished(&self) -> impl Iterator<Item = Processed> + '_ {
        self.done_rx.try_iter()
    }

    fn start(&mut self) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (tx, rx) = crossbeam_channel::unbounded::<(usize, Shared)>();
        for i in 0..cores.saturating_sub(1).clamp(1, MAX_HELPERS) {
            let (rx, done, waker) = (rx.clone(), self.done_tx.clone(), self.waker.clone());
            #[cfg(test)]
            let ran = self.ran.clone();
            let builder = std::thread::Builder::new()
                .name(format!("sd-tls-{i}"))
                .stack_size(256 * 1024);
            let spawned = crate::log_scope::spawn(builder, move || {
                for (ti, conn) in rx {
                    let r = run(&conn);
                    #[cfg(test)]
                    ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if done.send((ti, conn, r)).is_err() {
                        break;
                    }
                    let _ = waker.wake();
                }
            });
            match spawned {
                Ok(h) => self.helpers.push(h),
                Err(e) => log::warn!(
                    "push channel: cannot start a TLS helper thread ({e}); handshakes run on the poller"
                ),
            }
        }
        if !self.helpers.is_empty() {
            self.jobs = Some(tx);
            self.waiting = Some(rx);
        }
    }
}

/// One job; a panic in the TLS stack fails that handshake alone.
fn run(conn: &Shared) -> Result<(), rustls::Error> {
    catch_unwind(AssertUnwindSafe(|| secure::process(conn))).unwrap_or_else(|_| {
        Err(rustls::Error::General(
            "the TLS handshake's processing panicked".into(),
        ))
    })
}

impl Drop for Handshakes {
    /// Ends the helpers and joins them: each finishes the job in hand, the rest are dropped (closing 1,000
    /// devices mid-handshake waits for none of their crypto).
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(waiting) = self.waiting.take() {
            while waiting.try_recv().is_ok() {}
        }
        for h in self.helpers.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection() -> Shared {
        let tls =
            crate::driver::tls::client_config(crate::driver::tls::Trust::Pin("00".repeat(32)))
                .unwrap();
        let conn = rustls::ClientConnection::new(tls.config(), "device.local".try_into().unwrap());
        Arc::new(std::sync::Mutex::new(conn.unwrap()))
    }

    #[test]
    fn helpers_process_off_the_poller_wake_it_and_carry_each_outcome_back() {
        let mut poll = mio::Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), mio::Token(7)).unwrap());
        let mut hs = Handshakes::new(waker);
        let quiet = connection();
        // The device's fatal alert (handshake failure): the handshake fails.
        let broken = connection();
        let record: &[u8] = &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28];
        broken.lock().unwrap().read_tls(&mut &record[..]).unwrap();
        hs.post(3, quiet.clone());
        hs.post(5, broken.clone());
        let mut got = Vec::new();
        let mut events = mio::Events::with_capacity(4);
        while got.len() < 2 {
            poll.poll(&mut events, None).unwrap();
            got.extend(hs.finished());
        }
        got.sort_by_key(|d| d.0);
        assert_eq!((got[0].0, got[1].0), (3, 5));
        assert!(Arc::ptr_eq(&got[0].1, &quiet) && Arc::ptr_eq(&got[1].1, &broken));
        assert!(got[0].2.is_ok(), "{:?}", got[0].2);
        assert!(
            matches!(got[1].2, Err(rustls::Error::AlertReceived(_))),
            "{:?}",
            got[1].2
        );
        assert!(!hs.helpers.is_empty());
        let me = std::thread::current().id();
        assert!(hs.helpers.iter().all(|h| h.thread().id() != me
            && h.thread().name().unwrap().starts_with("sd-tls-")));
        drop(hs);
    }

    #[test]
    fn ending_drops_the_handshakes_no_helper_took_yet() {
        let poll = mio::Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), mio::Token(7)).unwrap());
        let mut hs = Handshakes::new(waker);
        let ran = hs.ran.clone();
        let conns: Vec<Shared> = (0..200).map(|_| connection()).collect();
        // Every connection locked: a helper that takes a job waits on it, the rest stay queued.
        let held: Vec<_> = conns.iter().map(|c| c.lock().unwrap()).collect();
        for (i, c) in conns.iter().enumerate() {
            hs.post(i, c.clone());
        }
        let ending = std::thread::spawn(move || drop(hs));
        // A queued job holds its connection: once ending dropped them, only the helpers' jobs in hand do.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while conns.iter().filter(|c| Arc::strong_count(c) > 1).count() > MAX_HELPERS {
            assert!(
                std::time::Instant::now() < deadline,
                "the queued handshakes were kept"
            );
            std::thread::yield_now();
        }
        drop(held);
        ending.join().unwrap();
        let ran = ran.load(std::sync::atomic::Ordering::SeqCst);
        assert!(ran <= MAX_HELPERS, "{ran}");
    }
}
