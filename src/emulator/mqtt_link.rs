//! A device's MQTT link (`DeviceSpec::mqtt`): the broker it is a client of, its identity there (client id,
//! topic prefix), whether it is connected, the test controls (drop, pause), the queue of packets for the
//! connection's writer, and the Tasmota telemetry schedule. Held by the device (`device.rs`); the client that
//! connects and speaks each family's topics is `mqtt_client.rs` and above, so the device stays below them.

use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError};
use serde_json::{Map, Value};

use super::lock::lock;
use crate::mqtt::packet::{self, Packet, Publish};

/// Tasmota's default `TelePeriod`, seconds.
pub(crate) const DEFAULT_TELE_PERIOD: u64 = 300;
/// Shelly Gen1's `update_period`, seconds.
pub(crate) const GEN1_UPDATE_PERIOD: u64 = 30;

/// An emulated device as the MQTT client of a broker, as the firmware is (see [`super::DeviceSpec::mqtt`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MqttSpec {
    /// The broker, `host:port` (`host` alone: port 1883, or 8883 with `ca_file`).
    pub server: String,
    /// Shelly Gen2+: the `topic_prefix` (default the device id, e.g. `shellyplus1pm-a8032ab12345`); Gen1: the
    /// `<id>` of `shellies/<id>/…` (default the device id, e.g. `shelly1-34945472A643`); Tasmota: the `%topic%`
    /// (default `tasmota_XXXXXX`, the last 6 hex digits of the MAC).
    pub topic: Option<String>,
    /// Broker user name.
    pub user: Option<String>,
    /// Broker password (sent only with a user).
    pub password: Option<String>,
    /// Connect over TLS and check the broker's certificate against the CA certificates in this PEM file.
    pub ca_file: Option<PathBuf>,
    /// The MQTT keep-alive: a PINGREQ after this long without sending; the broker is given up after 1.5
    /// times it without a packet. Default 60 s (Shelly's `keep_alive`).
    pub keep_alive: Duration,
}

impl MqttSpec {
    /// A plain, anonymous connection to `server` (`host:port`) with the default topic.
    pub fn new(server: &str) -> MqttSpec {
        MqttSpec {
            server: server.to_string(),
            topic: None,
            user: None,
            password: None,
            ca_file: None,
            keep_alive: Duration::from_secs(60),
        }
    }

    /// `host` and `port` of [`MqttSpec::server`]; an error says what is wrong.
    pub(crate) fn host_port(&self) -> Result<(String, u16), String> {
        let default = if self.ca_file.is_some() { 8883 } else { 1883 };
        let s = self.server.trim();
        let wrong = || format!("mqtt server '{s}' is not HOST:PORT (e.g. 127.0.0.1:1883)");
        let port = |p: &str| {
            p.parse::<u16>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("mqtt server '{s}': the port '{p}' is not a port number"))
        };
        // `[::1]:1883`, `host:1883`, or a host alone.
        let (host, port) = match s.strip_prefix('[') {
            Some(rest) => match rest.split_once(']').ok_or_else(wrong)? {
                (h, "") => (h, default),
                (h, p) => (h, port(p.strip_prefix(':').ok_or_else(wrong)?)?),
            },
            None => match s.rsplit_once(':') {
                Some((h, _)) if h.contains(':') => return Err(wrong()),
                Some((h, p)) => (h, port(p)?),
                None => (s, default),
            },
        };
        if host.is_empty() {
            return Err(wrong());
        }
        Ok((host.to_string(), port))
    }
}

/// The connection now: where the writer's packets go, and the socket to cut.
struct Live {
    tx: Sender<Vec<u8>>,
    cut: TcpStream,
}

#[derive(Default)]
struct Control {
    paused: bool,
    stopping: bool,
}

/// When Tasmota telemetry goes out (emulator clock).
struct Tele {
    period: u64,
    next: Option<Instant>,
}

/// A device's last will as every family's firmware sets it: retained, QoS 1, so a client that subscribes later
/// still learns the device is gone.
pub(crate) fn retained_will(topic: String, payload: &[u8]) -> crate::mqtt::packet::Will {
    crate::mqtt::packet::Will {
        topic,
        payload: payload.to_vec(),
        qos: 1,
        retain: true,
    }
}

/// One device's MQTT side.
pub(crate) struct MqttLink {
    pub spec: Option<MqttSpec>,
    /// Gen2+ `topic_prefix`, Tasmota `%topic%`.
    pub prefix: String,
    pub client_id: String,
    connected: AtomicBool,
    /// The broker confirmed the subscriptions of this connection.
    subscribed: AtomicBool,
    /// Connections accepted by the broker so far.
    connects: AtomicU64,
    control: Mutex<Control>,
    changed: Condvar,
    live: Mutex<Option<Live>>,
    next_id: Mutex<u16>,
    /// What the state hook measures changes against (Gen2+: the comparable status; Tasmota: `POWER` texts).
    pub last: Mutex<Option<Map<String, Value>>>,
    tele: Mutex<Tele>,
    /// The client's thread.
    pub thread: Mutex<Option<JoinHandle<()>>>,
}

impl MqttLink {
    /// A link for `spec` (`None`: the device speaks no MQTT) with its prefix and client id resolved, publishing
    /// its periodic values every `period` seconds (Tasmota `TelePeriod`, Gen1 `update_period`).
    pub(crate) fn new(
        spec: Option<MqttSpec>,
        default_prefix: &str,
        client_id: &str,
        period: u64,
    ) -> MqttLink {
        let prefix = spec
            .as_ref()
            .and_then(|s| s.topic.clone())
            .unwrap_or_else(|| default_prefix.to_string());
        MqttLink {
            spec,
            prefix,
            client_id: client_id.to_string(),
            connected: AtomicBool::new(false),
            subscribed: AtomicBool::new(false),
            connects: AtomicU64::new(0),
            control: Mutex::new(Control::default()),
            changed: Condvar::new(),
            live: Mutex::new(None),
            next_id: Mutex::new(0),
            last: Mutex::new(None),
            tele: Mutex::new(Tele { period, next: None }),
            thread: Mutex::new(None),
        }
    }

    /// Whether the device is an MQTT client at all.
    pub(crate) fn enabled(&self) -> bool {
        self.spec.is_some()
    }

    /// Whether the broker accepted the connection and it is up.
    pub(crate) fn connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// Whether the connection is up and the broker confirmed its subscriptions (SUBACK): a request published
    /// from now on reaches the device.
    pub(crate) fn subscribed(&self) -> bool {
        self.connected() && self.subscribed.load(Ordering::SeqCst)
    }

    /// The SUBACK came.
    pub(crate) fn set_subscribed(&self) {
        self.subscribed.store(true, Ordering::SeqCst);
    }

    /// Connections the broker accepted so far.
    pub(crate) fn connects(&self) -> u64 {
        self.connects.load(Ordering::SeqCst)
    }

    /// The connection is up (CONNACK accepted): packets go to `tx`, `cut` ends it.
    pub(crate) fn attach(&self, tx: Sender<Vec<u8>>, cut: TcpStream) {
        *lock(&self.live) = Some(Live { tx, cut });
        self.connects.fetch_add(1, Ordering::SeqCst);
    }

    /// Marks the link connected (after what must go first went out) or not.
    pub(crate) fn set_connected(&self, on: bool) {
        self.connected.store(on, Ordering::SeqCst);
    }

    /// The connection ended: nothing is queued any more.
    pub(crate) fn detach(&self) {
        self.connected.store(false, Ordering::SeqCst);
        self.subscribed.store(false, Ordering::SeqCst);
        *lock(&self.live) = None;
    }

    /// Queues a packet's bytes for the writer; false when not connected or the queue is full (a broker
    /// that does not read loses messages, never blocks the device).
    pub(crate) fn send(&self, bytes: Vec<u8>) -> bool {
        let live = lock(&self.live);
        let Some(l) = live.as_ref() else {
            return false;
        };
        match l.tx.try_send(bytes) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                log::debug!(
                    "emulator: MQTT client {}: queue full; message dropped",
                    self.client_id
                );
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }

    /// A fresh packet id (1–65535).
    pub(crate) fn packet_id(&self) -> u16 {
        let mut g = lock(&self.next_id);
        *g = g.wrapping_add(1).max(1);
        *g
    }

    /// Publishes at QoS 1, as the firmware does; false when it could not be queued.
    pub(crate) fn publish(&self, topic: &str, payload: &[u8], retain: bool) -> bool {
        if !self.connected() {
            return false;
        }
        let p = Publish {
            topic: topic.to_string(),
            payload: payload.to_vec(),
            qos: 1,
            retain,
            dup: false,
            id: Some(self.packet_id()),
        };
        self.send(packet::to_bytes(&Packet::Publish(p)))
    }

    /// Closes the socket without DISCONNECT (the broker publishes the will); the client connects again after
    /// its back-off unless paused.
    pub(crate) fn drop_connection(&self) {
        if let Some(l) = lock(&self.live).as_ref() {
            let _ = l.cut.shutdown(Shutdown::Both);
        }
    }

    /// Pauses (drops the connection and stays away) or resumes the client.
    pub(crate) fn set_paused(&self, paused: bool) {
        lock(&self.control).paused = paused;
        self.changed.notify_all();
        if paused {
            self.drop_connection();
        }
    }

    /// Whether the client is paused.
    pub(crate) fn paused(&self) -> bool {
        lock(&self.control).paused
    }

    /// Whether the emulator stops.
    pub(crate) fn stopping(&self) -> bool {
        lock(&self.control).stopping
    }

    /// Waits `d` (real time: a back-off), or less when paused, resumed or stopped; true while not stopping.
    pub(crate) fn wait(&self, d: Duration) -> bool {
        let g = lock(&self.control);
        let (g, _) = self
            .changed
            .wait_timeout(g, d)
            .unwrap_or_else(|e| e.into_inner());
        !g.stopping
    }

    /// Waits while paused; true while not stopping.
    pub(crate) fn wait_unpaused(&self) -> bool {
        let mut g = lock(&self.control);
        while g.paused && !g.stopping {
            g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        !g.stopping
    }

    /// Tells the client to stop: a live connection ends with DISCONNECT.
    pub(crate) fn begin_stop(&self) {
        lock(&self.control).stopping = true;
        self.changed.notify_all();
        // An empty message wakes the writer, which then says goodbye.
        if let Some(l) = lock(&self.live).as_ref() {
            let _ = l.tx.try_send(Vec::new());
        }
    }

    /// Waits for the client's thread after [`MqttLink::begin_stop`].
    pub(crate) fn join(&self) {
        let thread = lock(&self.thread).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }

    /// Tasmota `TelePeriod` in seconds (0: off).
    pub(crate) fn tele_period(&self) -> u64 {
        lock(&self.tele).period
    }

    /// Sets `TelePeriod` as the firmware reads it (`1`: the default; others within 10–3600, 0 off) and makes
    /// the next telemetry due at once; returns the period now.
    pub(crate) fn set_tele_period(&self, secs: u64, now: Instant) -> u64 {
        let mut t = lock(&self.tele);
        t.period = match secs {
            0 => 0,
            1 => DEFAULT_TELE_PERIOD,
            s => s.clamp(10, 3600),
        };
        t.next = Some(now);
        t.period
    }

    /// Telemetry due from `now` + one period (after connecting: one now, the next a period later).
    pub(crate) fn schedule_tele(&self, now: Instant) {
        lock(&self.tele).next = Some(now);
    }

    /// Whether telemetry is due at `now`; if so, the next one is a period later.
    pub(crate) fn tele_due(&self, now: Instant) -> bool {
        let mut t = lock(&self.tele);
        match t.next {
            Some(at) if at <= now && t.period > 0 => {
                t.next = Some(now + Duration::from_secs(t.period));
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_parse_with_default_ports() {
        let mut s = MqttSpec::new("127.0.0.1:1884");
        assert_eq!(s.host_port().unwrap(), ("127.0.0.1".into(), 1884));
        s.server = "broker.lan".into();
        assert_eq!(s.host_port().unwrap(), ("broker.lan".into(), 1883));
        s.ca_file = Some("ca.pem".into());
        assert_eq!(s.host_port().unwrap(), ("broker.lan".into(), 8883));
        s.server = "[::1]:1885".into();
        assert_eq!(s.host_port().unwrap(), ("::1".into(), 1885));
        s.server = "host:x".into();
        assert!(
            s.host_port()
                .unwrap_err()
                .contains("'x' is not a port number")
        );
        s.server = ":1883".into();
        assert!(s.host_port().is_err());
    }

    #[test]
    fn tele_period_follows_the_firmware_rules() {
        let l = MqttLink::new(None, "tasmota_A1B2C3", "DVES_A1B2C3", DEFAULT_TELE_PERIOD);
        let now = Instant::now();
        assert_eq!(l.tele_period(), 300);
        assert!(!l.tele_due(now), "nothing scheduled before a connection");
        assert_eq!(l.set_tele_period(5, now), 10);
        assert_eq!(l.set_tele_period(1, now), 300);
        assert!(l.tele_due(now), "setting it forces one publish");
        assert!(!l.tele_due(now + Duration::from_secs(299)));
        assert!(l.tele_due(now + Duration::from_secs(300)));
        assert_eq!(l.set_tele_period(0, now), 0);
        assert!(!l.tele_due(now + Duration::from_secs(10_000)), "0 is off");
    }

    #[test]
    fn publishing_needs_a_connection() {
        let l = MqttLink::new(Some(MqttSpec::new("127.0.0.1:1")), "p", "c", 300);
        assert!(!l.publish("p/online", b"true", true));
        let (tx, rx) = crossbeam_channel::bounded(2);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sock = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        l.attach(tx, sock);
        l.set_connected(true);
        assert!(l.publish("p/online", b"true", true));
        let bytes = rx.try_recv().unwrap();
        let (Packet::Publish(p), _) = packet::decode(&bytes, 1024).unwrap().unwrap() else {
            panic!("not a publish");
        };
        assert_eq!((p.topic.as_str(), p.qos, p.retain), ("p/online", 1, true));
        assert_eq!(p.id, Some(1));
        l.detach();
        assert!(!l.publish("p/online", b"true", true));
        assert_eq!(l.connects(), 1);
    }
}
