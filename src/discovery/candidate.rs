//! From a resolved mDNS service (an [`Announcement`]) to a [`Candidate`]: what the announcement suggests the
//! device is, and where to ask it. Pure: no network. Every field comes from the network, so everything is
//! bounded and a malformed entry is skipped, never trusted.

use std::net::IpAddr;

/// Gen2+ devices announce this service (TXT `gen`, `app`, `ver`).
pub const SHELLY_SERVICE: &str = "_shelly._tcp.local.";
/// Gen1, Gen2+ and Tasmota (with `SetOption55 1` and a build with mDNS) announce their web server here.
pub const HTTP_SERVICE: &str = "_http._tcp.local.";

/// Longest instance or host name kept (DNS names are at most 255 bytes).
const MAX_NAME: usize = 255;
/// TXT entries looked at; the rest are ignored.
const MAX_TXT_ENTRIES: usize = 32;
/// Longest TXT value kept (one TXT string is at most 255 bytes on the wire).
const MAX_TXT_VALUE: usize = 255;
/// Addresses kept per announcement.
const MAX_ADDRESSES: usize = 8;

/// A resolved DNS-SD service as the network announced it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announcement {
    /// Service type with domain, `_shelly._tcp.local.` or `_http._tcp.local.`.
    pub service: String,
    /// Full instance name, `ShellyPlus1PM-A8032AB12345._shelly._tcp.local.`.
    pub instance: String,
    /// Host name, `ShellyPlus1PM-A8032AB12345.local.`.
    pub host: String,
    /// The host's addresses.
    pub addresses: Vec<IpAddr>,
    /// TCP port of the web server.
    pub port: u16,
    /// TXT entries in announced order: key and value (`None` for a key without `=`).
    pub txt: Vec<(String, Option<Vec<u8>>)>,
}

/// What the announcement says the device is; confirmed or refuted by one HTTP request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    /// Shelly Gen2, Gen3 or Gen4 (`_shelly._tcp`, or TXT `gen` on `_http._tcp`).
    ShellyRpc,
    /// Shelly Gen1 (`_http._tcp`, host name starting with `shelly`).
    ShellyGen1,
    /// Tasmota (`_http._tcp` with TXT `devicetype=tasmota`, or a `tasmota` host name).
    Tasmota,
}

/// A device worth one HTTP request: where it is and what it claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The family the announcement suggests.
    pub hint: Hint,
    /// Address to ask (IPv4 preferred).
    pub address: IpAddr,
    /// Port to ask.
    pub port: u16,
    /// The instance label (the full name without the service), as announced.
    pub name: String,
    /// The host name without `.local.`.
    pub host: String,
    /// TXT `gen`, when it is a small number.
    pub txt_generation: Option<u8>,
    /// TXT `app` (Gen2+ model family, `Plus1PM`).
    pub txt_app: Option<String>,
    /// TXT `ver` (Gen2+ firmware).
    pub txt_version: Option<String>,
}

/// The candidate an announcement describes, or `None` when it is not a device we manage (a printer on
/// `_http._tcp`) or is malformed (no address, port 0, a name too long).
pub fn candidate(a: &Announcement) -> Option<Candidate> {
    if a.port == 0 || a.instance.len() > MAX_NAME || a.host.len() > MAX_NAME {
        return None;
    }
    let address = pick_address(&a.addresses)?;
    let name = instance_label(&a.instance, &a.service);
    let host = a
        .host
        .trim_end_matches('.')
        .trim_end_matches(".local")
        .to_string();
    let txt = |key: &str| -> Option<String> {
        a.txt
            .iter()
            .take(MAX_TXT_ENTRIES)
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| v.as_deref())
            .filter(|v| v.len() <= MAX_TXT_VALUE)
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty() && !v.chars().any(char::is_control))
    };
    let txt_generation = txt("gen")
        .and_then(|g| g.parse::<u8>().ok())
        .filter(|g| (1..=9).contains(g));
    let shelly_named = starts_with_ci(&name, "shelly") || starts_with_ci(&host, "shelly");
    let hint = if a.service.eq_ignore_ascii_case(SHELLY_SERVICE) {
        Hint::ShellyRpc
    } else if !a.service.eq_ignore_ascii_case(HTTP_SERVICE) {
        return None;
    } else if txt_generation.is_some_and(|g| g >= 2) {
        Hint::ShellyRpc
    } else if txt("devicetype").is_some_and(|t| t.eq_ignore_ascii_case("tasmota"))
        || contains_ci(&name, "tasmota")
        || contains_ci(&host, "tasmota")
    {
        Hint::Tasmota
    } else if shelly_named {
        Hint::ShellyGen1
    } else {
        return None;
    };
    Some(Candidate {
        hint,
        address,
        port: a.port,
        name,
        host,
        txt_generation,
        txt_app: txt("app"),
        txt_version: txt("ver"),
    })
}

/// The address to ask: the first IPv4 (devices answer on it), else the first IPv6, among the first few.
fn pick_address(addresses: &[IpAddr]) -> Option<IpAddr> {
    let usable = |ip: &&IpAddr| !ip.is_unspecified() && !ip.is_multicast();
    let kept = || addresses.iter().take(MAX_ADDRESSES).filter(usable);
    kept()
        .find(|ip| ip.is_ipv4())
        .or_else(|| kept().next())
        .copied()
}

/// `ShellyPlus1PM-A8032AB12345` from `ShellyPlus1PM-A8032AB12345._shelly._tcp.local.`.
fn instance_label(instance: &str, service: &str) -> String {
    let label = instance
        .strip_suffix(service)
        .map(|s| s.trim_end_matches('.'))
        .unwrap_or_else(|| instance.split('.').next().unwrap_or_default());
    crate::text::escape_controls(label).into_owned()
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

fn contains_ci(s: &str, word: &str) -> bool {
    s.to_ascii_lowercase().contains(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announcement(service: &str, name: &str, txt: &[(&str, &str)]) -> Announcement {
        Announcement {
            service: service.into(),
            instance: format!("{name}.{service}"),
            host: format!("{name}.local."),
            addresses: vec!["192.168.1.20".parse().unwrap()],
            port: 80,
            txt: txt
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.as_bytes().to_vec())))
                .collect(),
        }
    }

    #[test]
    fn gen2_on_the_shelly_service() {
        let a = announcement(
            SHELLY_SERVICE,
            "ShellyPlus1PM-A8032AB12345",
            &[("gen", "2"), ("app", "Plus1PM"), ("ver", "1.4.4")],
        );
        let c = candidate(&a).unwrap();
        assert_eq!(c.hint, Hint::ShellyRpc);
        assert_eq!(c.name, "ShellyPlus1PM-A8032AB12345");
        assert_eq!(c.host, "ShellyPlus1PM-A8032AB12345");
        assert_eq!(c.txt_generation, Some(2));
        assert_eq!(c.txt_app.as_deref(), Some("Plus1PM"));
        assert_eq!(c.txt_version.as_deref(), Some("1.4.4"));
    }

    #[test]
    fn gen1_tasmota_and_strangers_on_the_http_service() {
        // Captured Gen1 shape (ShellyForHASS#248): TXT id, fw_id, arch; no gen.
        let g1 = announcement(
            HTTP_SERVICE,
            "shelly1-F4128C",
            &[("id", "shelly1-F4128C"), ("arch", "esp8266")],
        );
        assert_eq!(candidate(&g1).unwrap().hint, Hint::ShellyGen1);
        let gen3 = announcement(HTTP_SERVICE, "Shelly1PMG3-AABBCCDDEEFF", &[("gen", "3")]);
        assert_eq!(candidate(&gen3).unwrap().hint, Hint::ShellyRpc);
        let tas = announcement(HTTP_SERVICE, "kitchen-1234", &[("devicetype", "tasmota")]);
        assert_eq!(candidate(&tas).unwrap().hint, Hint::Tasmota);
        let printer = announcement(HTTP_SERVICE, "HP LaserJet", &[("ty", "printer")]);
        assert_eq!(candidate(&printer), None);
        let other = announcement("_ipp._tcp.local.", "shelly1-F4128C", &[]);
        assert_eq!(candidate(&other), None);
    }

    #[test]
    fn hostile_announcements_are_bounded_or_refused() {
        let mut a = announcement(
            SHELLY_SERVICE,
            "ShellyPlus1-AABBCCDDEEFF",
            &[("gen", "999")],
        );
        assert_eq!(candidate(&a).unwrap().txt_generation, None);
        a.txt = vec![("gen".into(), Some(vec![0xff, 0xfe]))];
        assert_eq!(candidate(&a).unwrap().txt_generation, None);
        a.txt = vec![("app".into(), Some(vec![b'x'; 10_000]))];
        assert_eq!(candidate(&a).unwrap().txt_app, None);
        a.txt = vec![
            ("app".into(), Some(b"a\x1b[2Jb".to_vec())),
            ("ver".into(), None),
        ];
        let c = candidate(&a).unwrap();
        assert_eq!((c.txt_app, c.txt_version), (None, None));
        // Past the first entries, nothing is read.
        a.txt = (0..1000).map(|i| (format!("k{i}"), None)).collect();
        a.txt.push(("gen".into(), Some(b"2".to_vec())));
        assert_eq!(candidate(&a).unwrap().txt_generation, None);
        a.port = 0;
        assert_eq!(candidate(&a), None);
        a.port = 80;
        a.addresses.clear();
        assert_eq!(candidate(&a), None);
        a.addresses = vec!["0.0.0.0".parse().unwrap(), "fe80::1".parse().unwrap()];
        assert_eq!(
            candidate(&a).unwrap().address,
            "fe80::1".parse::<IpAddr>().unwrap()
        );
        a.instance = "x".repeat(300);
        assert_eq!(candidate(&a), None);
        let escaped = announcement(SHELLY_SERVICE, "Shelly\nFake", &[]);
        assert_eq!(candidate(&escaped).unwrap().name, "Shelly\\nFake");
    }
}
