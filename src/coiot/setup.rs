//! What opening a controller sets up for CoIoT: which devices take part (Gen1 network devices, unless
//! `CoIoT: false`), the socket, each device's [`Link`], and the peer address a driver points its device at.

use std::net::{IpAddr, ToSocketAddrs, UdpSocket};
use std::sync::Arc;

use super::Link;
use crate::config::Settings;
use crate::objects::Device;

/// The CoIoT side of an opening controller.
pub(crate) struct Setup {
    /// Bound (and joined to the group) when some Gen1 device is configured and the port was free; taken by
    /// the listener.
    pub(crate) socket: Option<UdpSocket>,
    /// Its port (0 when none).
    port: u16,
    /// Per device (configuration order): its link, when it takes part.
    pub(crate) links: Vec<Option<Arc<Link>>>,
    /// Per device: the addresses of its configured host name (a name is resolved once, here).
    resolved: Vec<Vec<IpAddr>>,
}

/// Gen1 (REST) devices with an address, not simulated.
fn is_gen1(d: &Device, settings: &Settings) -> bool {
    use crate::models::{ModelRef, Protocol};
    !d.simulate
        && matches!(settings.models.resolve(&d.model), Some(ModelRef::Vendor(m)) if m.protocol == Protocol::Rest)
}

impl Setup {
    pub(crate) fn new(devices: &[Device], settings: &Settings) -> Setup {
        let n = devices.len();
        let gen1: Vec<bool> = devices.iter().map(|d| is_gen1(d, settings)).collect();
        let none = || Setup {
            socket: None,
            port: 0,
            links: vec![None; n],
            resolved: vec![Vec::new(); n],
        };
        if !settings.coiot.enabled || !gen1.contains(&true) {
            return none();
        }
        let resolved: Vec<Vec<IpAddr>> = devices
            .iter()
            .zip(&gen1)
            .map(|(d, g)| match (g, d.hostname.as_deref()) {
                (true, Some(h)) => (h.trim_matches(['[', ']']), d.port)
                    .to_socket_addrs()
                    .map(|a| a.map(|a| a.ip()).take(8).collect())
                    .unwrap_or_default(),
                _ => Vec::new(),
            })
            .collect();
        let towards: Vec<IpAddr> = devices
            .iter()
            .zip(&resolved)
            .filter_map(|(d, r)| {
                let ip = r.first()?;
                crate::webhook::install::local_address_towards(&ip.to_string(), d.port)
            })
            .collect();
        let Some(socket) = super::listener::bind(settings.coiot.port, &towards) else {
            return none();
        };
        Setup {
            port: socket.local_addr().map_or(0, |a| a.port()),
            socket: Some(socket),
            links: gen1
                .iter()
                .map(|g| g.then(|| Arc::new(Link::default())))
                .collect(),
            resolved,
        }
    }

    /// The listener's port (0 when none).
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// The driver's part for device `di` at `host:port`: its link and, with `CoIoTPeer: true`, the peer
    /// (`ip:port` of our listener as the device reaches it).
    pub(crate) fn driver_part(
        &self,
        di: usize,
        host: Option<&str>,
        port: u16,
        settings: &Settings,
    ) -> Option<(Arc<Link>, Option<String>)> {
        let link = self.links.get(di)?.clone()?;
        let peer = settings
            .coiot
            .set_peer
            .then(|| crate::webhook::install::local_address_towards(host?, port))
            .flatten()
            .map(|ip| format!("{ip}:{}", self.port()));
        Some((link, peer))
    }

    /// The listener's targets, once the workers run; `ids` are the devices' configured IDs.
    pub(crate) fn targets(&self, ids: &[i64]) -> Vec<super::listener::Target> {
        self.links
            .iter()
            .enumerate()
            .filter_map(|(di, l)| {
                Some(super::listener::Target {
                    di,
                    id: *ids.get(di)?,
                    link: l.clone()?,
                    resolved: self.resolved[di].clone(),
                })
            })
            .collect()
    }
}
