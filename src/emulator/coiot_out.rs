//! One emulated Gen1 device's CoIoT sender state (a leaf below `device.rs`; `coiot.rs` renders what is sent):
//! the peer, what the last status said and when, its serial, and the socket it leaves from.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The CoIoT port and the group devices multicast to.
pub(crate) const PORT: u16 = 5683;
const GROUP: Ipv4Addr = Ipv4Addr::new(224, 0, 1, 187);

/// One device's CoIoT sender.
#[derive(Default)]
pub(crate) struct CoiotOut {
    /// Multicast when no peer is set ([`super::DeviceSpec::coiot_multicast`]).
    multicast: bool,
    inner: Mutex<Sending>,
    message_id: AtomicU16,
    socket: OnceLock<Option<UdpSocket>>,
}

#[derive(Default)]
struct Sending {
    /// `/settings?coiot_peer=`: `None` when empty (or `mcast`).
    peer: Option<SocketAddr>,
    /// What the last status said (energy left out: it grows with time alone), when (emulator clock), and
    /// its serial.
    said: Option<String>,
    sent: Option<Instant>,
    serial: u16,
}

impl CoiotOut {
    /// `multicast`: [`super::DeviceSpec::coiot_multicast`].
    pub(crate) fn new(multicast: bool) -> CoiotOut {
        CoiotOut {
            multicast,
            ..CoiotOut::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sending> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where statuses go now: the peer, else the group when asked.
    pub(crate) fn destination(&self) -> Option<SocketAddr> {
        self.lock()
            .peer
            .or(self.multicast.then_some(SocketAddr::from((GROUP, PORT))))
    }

    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        self.lock().peer
    }

    /// A new peer hears the current status at once.
    pub(crate) fn set_peer(&self, peer: Option<SocketAddr>) {
        let mut w = self.lock();
        w.peer = peer;
        w.sent = None;
    }

    /// Whether `said` differs from the last status sent.
    pub(crate) fn changed(&self, said: &str) -> bool {
        self.lock().said.as_deref() != Some(said)
    }

    /// Whether `period` passed since the last status (or none was sent).
    pub(crate) fn due(&self, now: Instant, period: Duration) -> bool {
        self.lock()
            .sent
            .is_none_or(|at| now.saturating_duration_since(at) >= period)
    }

    /// Records a status about to leave; returns its message id and serial (a new serial when it says
    /// something new).
    pub(crate) fn record(&self, said: String, now: Instant) -> (u16, u16) {
        let mut w = self.lock();
        if w.said.as_deref() != Some(said.as_str()) {
            w.serial = w.serial.wrapping_add(1);
        }
        w.said = Some(said);
        w.sent = Some(now);
        (self.message_id.fetch_add(1, Ordering::Relaxed), w.serial)
    }

    /// Sends from `local` (the device's own address, so datagrams come from where its HTTP is); an emulator
    /// on loopback multicasts through loopback only.
    pub(crate) fn send(&self, local: IpAddr, datagram: &[u8], to: SocketAddr) {
        let socket = self.socket.get_or_init(|| {
            let ip = match local {
                IpAddr::V4(v4) => v4,
                IpAddr::V6(_) => Ipv4Addr::LOCALHOST,
            };
            let s = UdpSocket::bind((ip, 0)).ok()?;
            if ip.is_loopback() {
                socket2::SockRef::from(&s).set_multicast_if_v4(&ip).ok()?;
            }
            let _ = s.set_multicast_loop_v4(true);
            Some(s)
        });
        if let Some(s) = socket {
            let _ = s.send_to(datagram, to);
        }
    }
}
