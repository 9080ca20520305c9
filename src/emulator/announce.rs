//! Announcing emulated devices over mDNS the way real ones do, so `discover` can find them (off unless asked:
//! [`Emulator::start_announcing`](super::Emulator::start_announcing), `sdctl emulate --announce`). Tests on the
//! host never turn it on; the real path is exercised inside network namespaces.
//!
//! - Gen2+: `_shelly._tcp` and `_http._tcp`, instance and host `Shelly<app>-<MAC>` (`ShellyPlus1PM-A8032AB12345`),
//!   TXT `gen` (the model's generation), `app`, `ver`.
//! - Gen1: `_http._tcp` only, instance and host the device id (`shelly1pm-<MAC>`), TXT `id`, `fw_id`, `arch`
//!   (as captured from a Shelly 1).
//! - Tasmota: `_http._tcp`, host the device id, TXT `devicetype=tasmota` (`WEBSERVER_ADVERTISE` builds).
//!
//! One mdns-sd daemon (its own thread) serves every device while announcing is on; a device's announcement can
//! be withdrawn and restored (`set_announced`, admin `POST /devices/<i>/announce?on=false`), which sends
//! mDNS goodbyes and new announcements like a device leaving and joining the network.

use super::device::Device;
use super::family::Family;
use crate::discovery::{Announcement, HTTP_SERVICE, Interfaces, SHELLY_SERVICE};
use mdns_sd::{ServiceDaemon, ServiceInfo};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a device announces: one [`Announcement`] per service, with `address` as its address.
pub(crate) fn records(dev: &Device, address: IpAddr) -> Vec<Announcement> {
    let id = &dev.ident;
    let (services, label, txt): (&[&str], String, Vec<(&str, String)>) = match id.family {
        Family::Rpc => (
            &[SHELLY_SERVICE, HTTP_SERVICE],
            format!("Shelly{}-{}", id.app(), id.mac),
            vec![
                ("gen", id.info.generation.to_string()),
                ("app", id.app().to_string()),
                ("ver", dev.firmware().version.clone()),
            ],
        ),
        Family::Gen1 => (
            &[HTTP_SERVICE],
            id.id.clone(),
            vec![
                ("id", id.id.clone()),
                ("fw_id", super::gen1::fw(dev)),
                ("arch", "esp8266".to_string()),
            ],
        ),
        Family::Tasmota => (
            &[HTTP_SERVICE],
            id.id.clone(),
            vec![("devicetype", "tasmota".to_string())],
        ),
    };
    services
        .iter()
        .map(|service| Announcement {
            service: service.to_string(),
            instance: format!("{label}.{service}"),
            host: format!("{label}.local."),
            addresses: vec![address],
            port: dev.port(),
            txt: txt
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.as_bytes().to_vec())))
                .collect(),
        })
        .collect()
}

struct State {
    daemon: Option<ServiceDaemon>,
    /// Per device: whether it is announced (while the daemon runs) or will be (once it starts).
    on: Vec<bool>,
}

/// The emulator's announcements: the daemon (while announcing) and which devices are announced.
pub(crate) struct Announcer {
    devices: Arc<Vec<Arc<Device>>>,
    address: IpAddr,
    state: Mutex<State>,
}

impl Announcer {
    pub(crate) fn new(devices: Arc<Vec<Arc<Device>>>, address: IpAddr) -> Self {
        let on = vec![true; devices.len()];
        Announcer {
            devices,
            address,
            state: Mutex::new(State { daemon: None, on }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A device's records (also when not announcing).
    pub(crate) fn records(&self, device: usize) -> Vec<Announcement> {
        let dev = &self.devices[device];
        // A device moved to an address of its own announces that one.
        let local = dev.net.local().ip();
        records(
            dev,
            if local.is_unspecified() {
                self.address
            } else {
                local
            },
        )
    }

    /// Starts the daemon on `interfaces` and announces every device that is on. Idempotent.
    pub(crate) fn start(&self, interfaces: &Interfaces) -> Result<(), String> {
        let mut st = self.lock();
        if st.daemon.is_some() {
            return Ok(());
        }
        let daemon = ServiceDaemon::new().map_err(|e| format!("cannot start mDNS: {e}"))?;
        crate::discovery::apply_interfaces(&daemon, interfaces)
            .map_err(|e| format!("cannot choose the interfaces for mDNS: {e}"))?;
        for (i, on) in st.on.iter().enumerate() {
            if *on {
                self.register(&daemon, i)?;
            }
        }
        st.daemon = Some(daemon);
        Ok(())
    }

    /// Whether the daemon runs.
    pub(crate) fn running(&self) -> bool {
        self.lock().daemon.is_some()
    }

    /// Whether `device` is announced (or will be when announcing starts).
    pub(crate) fn announced(&self, device: usize) -> bool {
        self.lock().on[device]
    }

    /// Withdraws (goodbye packets) or restores a device's announcement.
    pub(crate) fn set(&self, device: usize, on: bool) -> Result<(), String> {
        let mut st = self.lock();
        if st.on[device] == on {
            return Ok(());
        }
        st.on[device] = on;
        let Some(daemon) = &st.daemon else {
            return Ok(());
        };
        if on {
            self.register(daemon, device)
        } else {
            for r in self.records(device) {
                daemon
                    .unregister(&r.instance)
                    .map_err(|e| format!("cannot withdraw {}: {e}", r.instance))?;
            }
            Ok(())
        }
    }

    /// Announces a device again after it moved (a registration under the same name replaces the old one).
    pub(crate) fn refresh(&self, device: usize) -> Result<(), String> {
        let st = self.lock();
        match &st.daemon {
            Some(daemon) if st.on[device] => self.register(daemon, device),
            _ => Ok(()),
        }
    }

    fn register(&self, daemon: &ServiceDaemon, device: usize) -> Result<(), String> {
        for r in self.records(device) {
            let label = r
                .instance
                .strip_suffix(&format!(".{}", r.service))
                .unwrap_or(&r.instance);
            let txt: Vec<(String, String)> = r
                .txt
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        String::from_utf8_lossy(v.as_deref().unwrap_or_default()).into_owned(),
                    )
                })
                .collect();
            let info = ServiceInfo::new(&r.service, label, &r.host, (), r.port, &txt[..])
                .map_err(|e| format!("cannot describe {}: {e}", r.instance))?
                .enable_addr_auto();
            daemon
                .register(info)
                .map_err(|e| format!("cannot announce {}: {e}", r.instance))?;
        }
        Ok(())
    }

    /// Withdraws every announcement and stops the daemon.
    pub(crate) fn stop(&self) {
        if let Some(daemon) = self.lock().daemon.take() {
            let _ = daemon.shutdown();
        }
    }
}
