//! An emulated Gen1 device answering CoAP requests on UDP 5683 at its own address, as firmware does
//! ([`super::DeviceSpec::coap`]): `GET cit/d` (the description) and `GET cit/s` (the status), each answered
//! with 2.05 Content, the device tag (option 3332) and the JSON, from the same socket (so the answer comes from
//! the device's address, which is how clients such as aioshelly's block device match it).
//!
//! Off by default: 5683 is one port per address, so each device that answers needs an address of its own
//! (`sdctl emulate --listen-on 127.0.0.2 'Shelly1:80,coap'`). The socket is bound with `SO_REUSEADDR`, so a
//! client on the same host may hold `0.0.0.0:5683` for its own listening at the same time. Requests are
//! hostile input: the CoIoT parser's bounds apply and anything else is ignored.

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

use super::coiot;
use super::coiot_out::PORT;
use super::device::Device;
use crate::coiot::message::{CODE_GET, MAX_DATAGRAM, encode_reply, parse};

/// How often the thread looks at its stop flag.
const LOOK: Duration = Duration::from_millis(100);

/// Addresses whose 5683 a device of this process answers on. `SO_REUSEADDR` (needed beside a client's
/// wildcard socket) would let a second device bind the same address silently, and only one would get the
/// requests: refused here instead.
static TAKEN: Mutex<BTreeSet<SocketAddr>> = Mutex::new(BTreeSet::new());

/// `sd-emu-coap-<port>`: one device's CoAP answers.
pub(crate) struct CoapServer {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    at: SocketAddr,
}

impl CoapServer {
    /// Binds UDP 5683 at the device's address and answers there until stopped.
    pub(crate) fn start(dev: Arc<Device>) -> Result<CoapServer, String> {
        let at = SocketAddr::new(dev.net.local().ip(), PORT);
        let refuse = |why: String| {
            format!(
                "emulator: device {} cannot answer CoAP at {at}: {why} (5683 is one port per address: give each \
                 such device an address of its own, e.g. sdctl emulate --listen-on 127.0.0.2)",
                dev.index
            )
        };
        if !TAKEN.lock().unwrap_or_else(|e| e.into_inner()).insert(at) {
            return Err(refuse("another emulated device answers there".into()));
        }
        let socket = bind(at).map_err(|e| {
            TAKEN.lock().unwrap_or_else(|e| e.into_inner()).remove(&at);
            if e.kind() == std::io::ErrorKind::AddrInUse {
                // Another device of this process would be in TAKEN: another program has it, maybe on every address.
                format!(
                    "emulator: device {} cannot answer CoAP at {at}: another program holds UDP 5683 there, perhaps                      on every address (Home Assistant, or a smartdev application listening for CoIoT): stop it, or                      move it to another port (smartdev: CoIoTPort)",
                    dev.index
                )
            } else {
                refuse(e.to_string())
            }
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("sd-emu-coap-{}", dev.port()))
            .stack_size(128 * 1024)
            .spawn(move || serve(&dev, &socket, &flag))
            .map_err(|e| {
                TAKEN.lock().unwrap_or_else(|e| e.into_inner()).remove(&at);
                format!("emulator: starting the CoAP thread: {e}")
            })?;
        Ok(CoapServer { stop, thread, at })
    }

    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
        TAKEN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.at);
    }
}

fn bind(at: SocketAddr) -> std::io::Result<UdpSocket> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(at),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    s.set_reuse_address(true)?;
    s.bind(&at.into())?;
    let s: UdpSocket = s.into();
    s.set_read_timeout(Some(LOOK))?;
    Ok(s)
}

fn serve(dev: &Device, socket: &UdpSocket, stop: &AtomicBool) {
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    while !stop.load(Ordering::SeqCst) {
        let Ok((n, from)) = socket.recv_from(&mut buf) else {
            continue;
        };
        if let Some(answer) = answer(dev, &buf[..n]) {
            let _ = socket.send_to(&answer, from);
        }
    }
}

/// The answer to one datagram: `GET cit/d` or `GET cit/s`; anything else gets none.
fn answer(dev: &Device, datagram: &[u8]) -> Option<Vec<u8>> {
    let m = parse(datagram).ok()?;
    if m.code != CODE_GET || m.path.first() != Some(&"cit") || m.path.len() != 2 {
        return None;
    }
    let payload = match m.path[1] {
        "d" => coiot::description(dev),
        "s" => json!({ "G": coiot::values(dev, &dev.state()).0 }),
        _ => return None,
    };
    let tag = format!("{}#{}#2", dev.ident.reported, dev.mac());
    Some(encode_reply(
        m.message_id,
        &tag,
        payload.to_string().as_bytes(),
    ))
}
