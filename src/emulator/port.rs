//! A port's thread: it owns the port's listener and its faults. While the port serves without a fault that
//! changes how it accepts (no refusing, no flapping, no move under way), it lends the listener to the
//! emulator's poller (`ws_poller.rs`, `accepting.rs`), which accepts, does the TLS handshakes and reads the
//! requests; the thread then sleeps until the port's state changes, and answers the requests (other than
//! WebSocket upgrades) the poller delivers. A thread blocked in `accept` per device was woken twice per
//! connection (the connection, its request), and those wake-ups were most of what the emulator's ports cost
//! (BENCHMARKS.md, step 38); over HTTPS once more per handshake flight. Otherwise (faults) the thread accepts
//! and serves one connection after another itself.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::faults::{NetControl, Phase};
use super::server::{Service, serve, serve_delivered, wake};
use super::ws_poller;

/// Handlers build small JSON documents; a small stack keeps many emulated devices cheap.
const STACK: usize = 256 * 1024;
/// How often a flapping port polls `accept`: a timer cannot wake a blocking `accept`.
const POLL: Duration = Duration::from_millis(2);

/// A running port.
pub(crate) struct Server {
    net: Arc<NetControl>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts the accept thread on an already bound listener.
    pub(crate) fn spawn(
        name: String,
        listener: TcpListener,
        service: Arc<dyn Service>,
        net: Arc<NetControl>,
    ) -> io::Result<Server> {
        net.set_local(listener.local_addr()?);
        let n = Arc::clone(&net);
        let thread = std::thread::Builder::new()
            .name(name)
            .stack_size(STACK)
            .spawn(move || accept_loop(listener, &service, &n))?;
        Ok(Server {
            net,
            thread: Some(thread),
        })
    }

    /// The port it listens on now.
    pub(crate) fn port(&self) -> u16 {
        self.net.local().port()
    }

    /// Signals the thread to end; `join` waits for it.
    pub(crate) fn begin_stop(&self) {
        self.net.stop();
        wake(self.net.local());
    }

    pub(crate) fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves `first`; after a fault that closed it, listens at the same address again (`NetControl::local`);
/// takes over a listener handed over when the device moves.
fn accept_loop(first: TcpListener, service: &Arc<dyn Service>, net: &Arc<NetControl>) {
    let mut listener = Some(first);
    loop {
        // What the poller accepted before the listener came back is answered whatever the phase now.
        for conn in net.take_delivered() {
            serve_delivered(conn, service, net);
        }
        if let Some(moved) = net.take_handover() {
            // The old listener closes here: the old address refuses from now on.
            let local = moved.local_addr();
            listener = Some(moved);
            if let Ok(local) = local {
                net.set_local(local);
            }
            net.set_listening(true);
        }
        // The generation read with the phase: a fault set while we close the listener must not be missed.
        let (phase, seen) = net.phase_and_generation(Instant::now());
        let until = match phase {
            Phase::Stop => return,
            Phase::Refuse(until) => {
                if listener.take().is_some() {
                    net.set_listening(false);
                }
                net.wait_change(until, seen);
                continue;
            }
            Phase::Serve(until) => until,
        };
        let local = net.local();
        let l = match listener.take() {
            Some(l) => l,
            // std sets SO_REUSEADDR on Unix, so the same port can be bound again at once.
            None => match TcpListener::bind(local) {
                Ok(l) => {
                    net.set_listening(true);
                    l
                }
                Err(e) => {
                    log::debug!("emulator: cannot listen again on {local}: {e}");
                    net.sleep(Duration::from_millis(20));
                    continue;
                }
            },
        };
        let l = if until.is_none() {
            match lend(l, service, net, seen) {
                Ok(back) => {
                    listener = back;
                    continue;
                }
                Err(l) => l,
            }
        } else {
            l
        };
        let accepted = accept(&l, until, net);
        listener = Some(l);
        match accepted {
            Ok(Some(stream)) => serve(stream, service, net),
            Ok(None) => {}
            Err(e) => {
                // E.g. out of file descriptors: do not spin.
                log::debug!("emulator: accept on {local} failed: {e}");
                net.sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Lends the listener to the poller until the fault changes from generation `seen` or the port stops, and
/// answers the requests it delivers meanwhile; the listener back (`None` if the poller lost it: the port
/// listens again). `Err` with the listener when the poller cannot take it.
fn lend(
    l: TcpListener,
    service: &Arc<dyn Service>,
    net: &Arc<NetControl>,
    seen: u64,
) -> Result<Option<TcpListener>, TcpListener> {
    let poller = match ws_poller::shared() {
        Ok(p) => p,
        Err(e) => {
            log::debug!("emulator: {e}; the port's thread accepts itself");
            return Err(l);
        }
    };
    let lent = poller.lend(l, Arc::clone(service), Arc::clone(net))?;
    while !net.wait_delivery(seen) {
        for conn in net.take_delivered() {
            serve_delivered(conn, service, net);
        }
    }
    Ok(lent.reclaim())
}

fn accept(
    l: &TcpListener,
    until: Option<Instant>,
    net: &NetControl,
) -> io::Result<Option<TcpStream>> {
    let Some(end) = until else {
        l.set_nonblocking(false)?;
        return l.accept().map(|(s, _)| Some(s));
    };
    l.set_nonblocking(true)?;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(Some(s));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // A connection the poller accepted before the listener came back waits too.
                if net.phase(Instant::now()) != Phase::Serve(Some(end)) || net.delivered() > 0 {
                    return Ok(None);
                }
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(e),
        }
    }
}
