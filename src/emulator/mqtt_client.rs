//! A device's MQTT client (`DeviceSpec::mqtt`), as the firmware runs it: connect (TCP, TLS against the given
//! CA, CONNECT with the family's last will, CONNACK), subscribe to the family's topics, announce itself, then
//! keep the connection: PINGREQ when idle, PUBACK for what the broker delivers at QoS 1, the broker given up
//! when it stays silent, and a reconnect after a back-off (1 s doubling to 30 s, plus up to 25 % jitter) when
//! the connection ends. What each family publishes and answers is `mqtt_rpc.rs` (Shelly Gen2+),
//! `mqtt_gen1.rs` and `mqtt_tasmota.rs`.
//!
//! Threads, per device with MQTT: `sd-emu-mqtt-<port>` (connects, then writes: the link's bounded queue and
//! the pings) and, while connected, `sd-emu-mqttr-<port>` (reads and decodes packets of at most 64 KiB; a
//! larger or malformed one ends the connection; answers requests). Both with small stacks, as every emulator
//! thread: 1,000 devices are 2,000 threads and about 2,000 × 128 KiB of reserved (not resident) stack.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::device::{Device, Family};
use super::duplex::Duplex;
use super::state::DeviceState;
use super::{mqtt_gen1, mqtt_rpc, mqtt_tasmota};
use crate::mqtt::packet::{self, Connect, Packet, Will};

/// The largest packet taken from the broker.
pub(crate) const LIMIT: usize = 64 * 1024;
/// Packets waiting for the writer; publishes beyond it are dropped.
const QUEUE: usize = 256;
/// Connecting, the TLS handshake and the CONNACK each, and one blocked write.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Both threads only parse and build small JSON.
const STACK: usize = 128 * 1024;
const READER_STACK: usize = 256 * 1024;

/// Starts the client of a device with MQTT (nothing for the others).
pub(crate) fn start(dev: &Arc<Device>) -> io::Result<()> {
    if !dev.mqtt.enabled() {
        return Ok(());
    }
    let d = Arc::clone(dev);
    let t = std::thread::Builder::new()
        .name(format!("sd-emu-mqtt-{}", dev.port()))
        .stack_size(STACK)
        .spawn(move || run(&d))?;
    *dev.mqtt.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
    Ok(())
}

/// The state hook: the family's publications of a change (with the state lock held; never blocks). A Gen2+
/// status is measured only when it may have changed (`changed`, as over the WebSocket); the others compare
/// their few values every time.
pub(crate) fn on_state(dev: &Device, s: &DeviceState, changed: bool) {
    if !dev.mqtt.connected() {
        return;
    }
    match dev.ident.family {
        Family::Rpc if changed => mqtt_rpc::on_state(dev, s),
        Family::Rpc => {}
        Family::Tasmota => mqtt_tasmota::on_state(dev, s),
        Family::Gen1 => mqtt_gen1::on_state(dev, s),
    }
}

/// A fired event (webhook form `input.button_push`, component id).
pub(crate) fn on_event(dev: &Device, event: &str, cid: usize) {
    if dev.mqtt.connected() && dev.ident.family == Family::Rpc {
        mqtt_rpc::on_event(dev, event, cid);
    }
}

/// A `NotifyEvent` of the device itself (Gen2+).
pub(crate) fn on_sys(dev: &Device, params: &serde_json::Value) {
    if dev.mqtt.connected() && dev.ident.family == Family::Rpc {
        mqtt_rpc::notification(dev, "NotifyEvent", params);
    }
}

fn will(dev: &Device) -> Will {
    match dev.ident.family {
        Family::Tasmota => mqtt_tasmota::will(dev),
        Family::Gen1 => mqtt_gen1::will(dev),
        Family::Rpc => mqtt_rpc::will(dev),
    }
}

fn subscriptions(dev: &Device) -> Vec<String> {
    match dev.ident.family {
        Family::Tasmota => mqtt_tasmota::subscriptions(dev),
        Family::Gen1 => mqtt_gen1::subscriptions(dev),
        Family::Rpc => mqtt_rpc::subscriptions(dev),
    }
}

fn announce(dev: &Device) {
    match dev.ident.family {
        Family::Tasmota => mqtt_tasmota::on_connect(dev),
        Family::Gen1 => mqtt_gen1::on_connect(dev),
        Family::Rpc => mqtt_rpc::on_connect(dev),
    }
}

fn deliver(dev: &Device, topic: &str, payload: &[u8]) {
    match dev.ident.family {
        Family::Tasmota => mqtt_tasmota::on_message(dev, topic, payload),
        Family::Gen1 => mqtt_gen1::on_message(dev, topic, payload),
        Family::Rpc => mqtt_rpc::on_message(dev, topic, payload),
    }
}

/// Up to a quarter of `d` more, so devices that lost one broker do not all come back at once.
fn jitter(d: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    d + d.mul_f64((h.finish() % 1000) as f64 / 4000.0)
}

/// Connect, serve, wait, again, until the emulator stops.
fn run(dev: &Device) {
    let mut backoff = BACKOFF_MIN;
    loop {
        if !dev.mqtt.wait_unpaused() {
            return;
        }
        match connect(dev) {
            Ok((stream, rest)) => {
                backoff = BACKOFF_MIN;
                serve(dev, stream, rest);
            }
            Err(e) => log::debug!("emulator: device {} MQTT: {e}", dev.ident.id),
        }
        if dev.mqtt.stopping() || !dev.mqtt.wait(jitter(backoff)) {
            return;
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// TCP (and TLS), CONNECT, CONNACK; returns the stream and any bytes read after the CONNACK.
fn connect(dev: &Device) -> Result<(Duplex, Vec<u8>), String> {
    let spec = dev.mqtt.spec.as_ref().ok_or("no broker")?;
    let (host, port) = spec.host_port()?;
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    let tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("{addr}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let _ = tcp.set_read_timeout(Some(IO_TIMEOUT));
    let _ = tcp.set_write_timeout(Some(IO_TIMEOUT));
    let mut stream = match &spec.ca_file {
        None => Duplex::plain(tcp),
        Some(ca) => {
            let roots = crate::driver::tls::load_ca(ca)?;
            let config =
                rustls::ClientConfig::builder_with_provider(crate::driver::tls::provider())
                    .with_safe_default_protocol_versions()
                    .map_err(|e| e.to_string())?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|e| format!("{host}: {e}"))?;
            let mut conn =
                rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
            let mut io = &tcp;
            while conn.is_handshaking() {
                conn.complete_io(&mut io)
                    .map_err(|e| format!("{addr}: TLS: {e}"))?;
            }
            Duplex::tls(tcp, conn)
        }
    };
    let connect = Connect {
        client_id: dev.mqtt.client_id.clone(),
        keep_alive: u16::try_from(spec.keep_alive.as_secs()).unwrap_or(u16::MAX),
        clean_session: true,
        will: Some(will(dev)),
        username: spec.user.clone(),
        password: spec
            .user
            .as_ref()
            .and(spec.password.as_ref())
            .map(|p| p.as_bytes().to_vec()),
    };
    stream
        .write_all(&packet::to_bytes(&Packet::Connect(connect)))
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (answer, used) = loop {
        match packet::decode(&buf, LIMIT).map_err(|e| format!("{addr}: {e}"))? {
            Some(p) => break p,
            None => match stream.read(&mut chunk) {
                Ok(0) => return Err(format!("{addr}: the broker closed the connection")),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("{addr}: no CONNACK: {e}")),
            },
        }
    };
    buf.drain(..used);
    match answer {
        Packet::ConnAck { code: 0, .. } => Ok((stream, buf)),
        Packet::ConnAck { code, .. } => Err(format!(
            "{addr} refused the connection: {}",
            packet::connack_reason(code)
        )),
        _ => Err(format!(
            "{addr}: the broker's first packet is not a CONNACK"
        )),
    }
}

/// Milliseconds since `base`, for a time shared between threads.
fn millis(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One accepted connection until it ends: the reader thread, the announcements, then the writer loop here.
fn serve(dev: &Device, stream: Duplex, rest: Vec<u8>) {
    let (Ok(reader), Ok(cut)) = (stream.try_clone(), stream.tcp.try_clone()) else {
        return;
    };
    let _ = stream.tcp.set_read_timeout(None);
    let (tx, rx) = crossbeam_channel::bounded(QUEUE);
    let base = Instant::now();
    let heard = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(AtomicBool::new(false));
    let Some(dev_arc) = dev.arc() else {
        return;
    };
    let (h, e, t) = (Arc::clone(&heard), Arc::clone(&ended), tx.clone());
    let reader = std::thread::Builder::new()
        .name(format!("sd-emu-mqttr-{}", dev.port()))
        .stack_size(READER_STACK)
        .spawn(move || {
            read_loop(&dev_arc, reader, rest, &t, base, &h);
            e.store(true, Ordering::SeqCst);
            // Wakes the writer (which may be gone: then nobody needs waking).
            let _ = t.send(Vec::new());
        });
    let Ok(reader) = reader else {
        return;
    };
    dev.mqtt.attach(tx, cut);
    let filters = subscriptions(dev).into_iter().map(|f| (f, 1)).collect();
    dev.mqtt.send(packet::to_bytes(&Packet::Subscribe {
        id: dev.mqtt.packet_id(),
        filters,
    }));
    dev.mqtt.set_connected(true);
    announce(dev);
    write_loop(dev, stream, &rx, base, &heard, &ended);
    dev.mqtt.detach();
    let _ = reader.join();
}

fn write_loop(
    dev: &Device,
    mut stream: Duplex,
    rx: &Receiver<Vec<u8>>,
    base: Instant,
    heard: &AtomicU64,
    ended: &AtomicBool,
) {
    let keep = dev
        .mqtt
        .spec
        .as_ref()
        .map_or(Duration::from_secs(60), |s| s.keep_alive);
    let mut sent = Instant::now();
    loop {
        // A stop that came while connecting found no queue to wake: seen here.
        if dev.mqtt.stopping() {
            let _ = stream.write_all(&packet::to_bytes(&Packet::Disconnect));
            break;
        }
        let idle = (sent + keep.mul_f64(0.75)).saturating_duration_since(Instant::now());
        let bytes = match rx.recv_timeout(idle) {
            Ok(b) => b,
            Err(RecvTimeoutError::Timeout) => {
                let silent = Duration::from_millis(
                    millis(base).saturating_sub(heard.load(Ordering::SeqCst)),
                );
                if silent > keep.mul_f64(1.5) {
                    log::info!(
                        "emulator: device {} MQTT: the broker said nothing for {} s; connecting again",
                        dev.ident.id,
                        silent.as_secs()
                    );
                    break;
                }
                packet::to_bytes(&Packet::PingReq)
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if bytes.is_empty() {
            // The reader ended, or the emulator stops (seen at the top).
            if ended.load(Ordering::SeqCst) {
                break;
            }
            continue;
        }
        if stream.write_all(&bytes).is_err() {
            break;
        }
        sent = Instant::now();
    }
    let _ = stream.shutdown();
}

/// Reads and handles packets until the connection ends or the broker sends something it must not.
fn read_loop(
    dev: &Device,
    mut stream: Duplex,
    mut buf: Vec<u8>,
    tx: &Sender<Vec<u8>>,
    base: Instant,
    heard: &AtomicU64,
) {
    let mut chunk = [0u8; 8192];
    loop {
        loop {
            match packet::decode(&buf, LIMIT) {
                Ok(Some((p, used))) => {
                    buf.drain(..used);
                    heard.store(millis(base), Ordering::SeqCst);
                    if let Err(why) = handle(dev, p, tx) {
                        log::info!(
                            "emulator: device {} MQTT: {why}; connection closed",
                            dev.ident.id
                        );
                        let _ = stream.shutdown();
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log::info!(
                        "emulator: device {} MQTT: the broker sent {e}; connection closed",
                        dev.ident.id
                    );
                    let _ = stream.shutdown();
                    return;
                }
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// One packet from the broker.
fn handle(dev: &Device, p: Packet, tx: &Sender<Vec<u8>>) -> Result<(), String> {
    match p {
        Packet::Publish(p) => {
            match (p.qos, p.id) {
                (0, _) => {}
                (1, Some(id)) => {
                    let _ = tx.send(packet::to_bytes(&Packet::PubAck(id)));
                }
                // We subscribe at QoS 1: a broker delivers at most that.
                _ => return Err(format!("a PUBLISH at QoS {} (subscribed at 1)", p.qos)),
            }
            deliver(dev, &p.topic, &p.payload);
            Ok(())
        }
        Packet::SubAck { codes, .. } => {
            if codes.contains(&0x80) {
                log::warn!(
                    "emulator: device {} MQTT: the broker refused a subscription (its ACL?)",
                    dev.ident.id
                );
            }
            dev.mqtt.set_subscribed();
            Ok(())
        }
        Packet::PubAck(_) | Packet::PingResp | Packet::UnsubAck(_) => Ok(()),
        other => Err(format!("a {} from the broker", kind(&other))),
    }
}

fn kind(p: &Packet) -> &'static str {
    match p {
        Packet::Connect(_) => "CONNECT",
        Packet::ConnAck { .. } => "second CONNACK",
        Packet::PubRec(_) | Packet::PubRel(_) | Packet::PubComp(_) => "QoS 2 packet",
        Packet::Subscribe { .. } | Packet::Unsubscribe { .. } => "subscription request",
        Packet::PingReq => "PINGREQ",
        Packet::Disconnect => "DISCONNECT",
        _ => "packet",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelLibrary;
    use crate::emulator::{DeviceSpec, Emulator, MqttSpec};
    use std::net::TcpListener;

    const GUARD: Duration = Duration::from_secs(10);

    #[test]
    fn jitter_adds_at_most_a_quarter() {
        for _ in 0..100 {
            let j = jitter(Duration::from_secs(4));
            assert!(
                j >= Duration::from_secs(4) && j <= Duration::from_secs(5),
                "{j:?}"
            );
        }
    }

    /// The broker's side of one connection, played by the test.
    struct Peer {
        s: TcpStream,
        buf: Vec<u8>,
    }

    impl Peer {
        fn accept(l: &TcpListener) -> Peer {
            let (s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(GUARD)).unwrap();
            Peer { s, buf: Vec::new() }
        }

        /// The next packet; `None` when the device closed the connection.
        fn next(&mut self) -> Option<Packet> {
            let mut chunk = [0u8; 4096];
            loop {
                if let Some((p, used)) = packet::decode(&self.buf, LIMIT).unwrap() {
                    self.buf.drain(..used);
                    return Some(p);
                }
                match self.s.read(&mut chunk) {
                    Ok(0) | Err(_) => return None,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        }

        fn send(&mut self, p: &Packet) {
            self.s.write_all(&packet::to_bytes(p)).unwrap();
        }

        fn publish(&mut self) -> packet::Publish {
            match self.next() {
                Some(Packet::Publish(p)) => p,
                other => panic!("expected a PUBLISH, got {other:?}"),
            }
        }
    }

    fn device(port: u16) -> (Emulator, String) {
        let mut spec = MqttSpec::new(&format!("127.0.0.1:{port}"));
        spec.keep_alive = Duration::from_secs(1);
        spec.user = Some("u".into());
        spec.password = Some("p".into());
        let mut d = DeviceSpec::new("ShellyPlus1PM");
        d.mqtt = Some(spec);
        let emu = Emulator::start(vec![d], &ModelLibrary::embedded()).unwrap();
        let id = emu.device_id(0).to_string();
        (emu, id)
    }

    #[test]
    fn the_client_speaks_mqtt_as_the_firmware_and_gives_up_a_silent_broker() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (emu, id) = device(l.local_addr().unwrap().port());
        let mut b = Peer::accept(&l);
        let Some(Packet::Connect(c)) = b.next() else {
            panic!("no CONNECT");
        };
        assert_eq!(c.client_id, id);
        assert_eq!((c.keep_alive, c.clean_session), (1, true));
        assert_eq!(c.username.as_deref(), Some("u"));
        assert_eq!(c.password.as_deref(), Some(&b"p"[..]));
        let will = c.will.unwrap();
        assert_eq!(will.topic, format!("{id}/online"));
        assert_eq!(
            (will.payload.as_slice(), will.qos, will.retain),
            (&b"false"[..], 1, true)
        );
        b.send(&Packet::ConnAck {
            session_present: false,
            code: 0,
        });
        let Some(Packet::Subscribe { id: sub, filters }) = b.next() else {
            panic!("no SUBSCRIBE");
        };
        let topics: Vec<&str> = filters.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            topics,
            [
                format!("{id}/rpc"),
                format!("{id}/command"),
                format!("{id}/command/+")
            ]
        );
        assert!(filters.iter().all(|(_, q)| *q == 1));
        let online = b.publish();
        assert_eq!(
            (online.topic.as_str(), online.payload.as_slice()),
            (&*format!("{id}/online"), &b"true"[..])
        );
        assert!(online.retain && online.qos == 1 && online.id.is_some());
        let full = b.publish();
        assert_eq!(full.topic, format!("{id}/events/rpc"));
        let frame: serde_json::Value = serde_json::from_slice(&full.payload).unwrap();
        assert_eq!(frame["method"], "NotifyFullStatus");
        assert_eq!(frame["params"]["mqtt"]["connected"], true);
        assert!(!emu.mqtt_connected(0), "not before the SUBACK");
        b.send(&Packet::SubAck {
            id: sub,
            codes: vec![1, 1, 1],
        });
        b.send(&Packet::PubAck(online.id.unwrap()));

        // A request at QoS 1: acknowledged, then answered at QoS 1.
        let req = br#"{"id":5,"src":"ctl","method":"Switch.Set","params":{"id":0,"on":true}}"#;
        b.send(&Packet::Publish(packet::Publish {
            topic: format!("{id}/rpc"),
            payload: req.to_vec(),
            qos: 1,
            retain: false,
            dup: false,
            id: Some(77),
        }));
        let mut answered = false;
        let mut acked = false;
        while !(answered && acked) {
            match b.next() {
                Some(Packet::PubAck(77)) => acked = true,
                Some(Packet::Publish(p)) if p.topic == "ctl/rpc" => {
                    let v: serde_json::Value = serde_json::from_slice(&p.payload).unwrap();
                    assert_eq!(v["result"]["was_on"], false);
                    assert_eq!(p.qos, 1);
                    answered = true;
                }
                // The switch's NotifyStatus, or a ping.
                Some(Packet::Publish(_)) | Some(Packet::PingReq) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(emu.output(0, 0));
        assert!(emu.mqtt_connected(0));

        // Idle: a PINGREQ within the keep-alive; answered, the connection stays.
        loop {
            match b.next() {
                Some(Packet::PingReq) => break,
                Some(Packet::Publish(_)) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        b.send(&Packet::PingResp);
        // Not answered any more: the device gives the broker up and connects again.
        loop {
            match b.next() {
                None => break,
                Some(Packet::PingReq | Packet::Publish(_)) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        let mut again = Peer::accept(&l);
        assert!(matches!(again.next(), Some(Packet::Connect(_))));
        // A broker that answers with something else than a CONNACK is left at once.
        again.send(&Packet::PingResp);
        assert!(again.next().is_none());
        assert_eq!(emu.mqtt_connects(0), 1);
    }

    #[test]
    fn a_refused_login_is_retried_after_a_back_off() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (emu, _) = device(l.local_addr().unwrap().port());
        let mut b = Peer::accept(&l);
        assert!(matches!(b.next(), Some(Packet::Connect(_))));
        b.send(&Packet::ConnAck {
            session_present: false,
            code: 5,
        });
        assert!(b.next().is_none(), "closed after the refusal");
        let mut again = Peer::accept(&l);
        assert!(matches!(again.next(), Some(Packet::Connect(_))));
        assert_eq!(emu.mqtt_connects(0), 0);
        assert!(!emu.mqtt_connected(0));
    }
}
