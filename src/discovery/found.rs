//! [`Discovered`]: a device that announced itself and confirmed what it is over HTTP or HTTPS.

use serde::{Serialize, Serializer};
use std::net::IpAddr;

/// A confirmed device. Serialised with PascalCase keys, like the configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Discovered {
    /// `AA:BB:CC:DD:EE:FF`; `None` when the device did not tell (a Tasmota with a web password).
    pub mac_address: Option<String>,
    /// A model id of the model library, or `Tasmota`; `None` when the device reports a model the library
    /// does not know (see `ReportedModel`).
    pub model: Option<String>,
    /// What the device calls itself (`/shelly` `model` or `type`; `Tasmota`).
    pub reported_model: Option<String>,
    /// 1 for Gen1, 2, 3, 4 for Gen2+ as the device reports it (`/shelly` `gen`); `None` for Tasmota.
    pub generation: Option<u8>,
    /// The address the device answered on.
    pub address: IpAddr,
    /// The port the device answered on.
    pub port: u16,
    /// The device's own name when it has one, else its mDNS instance name.
    pub name: String,
    /// The mDNS host name without `.local` (`ShellyPlus1PM-A8032AB12345`).
    pub hostname: String,
    /// Firmware version as reported.
    pub firmware: Option<String>,
    /// Whether the device asks for a password (`None` when it did not say).
    pub auth_required: Option<bool>,
    /// Answered over HTTPS (a device with a certificate, firmware 2.0): the SHA-256 fingerprint
    /// (`AB:CD:…`) of the certificate it presented, to be checked against the device's web page and
    /// configured as `CertSha256`. `None`: it answered over HTTP.
    pub cert_sha256: Option<String>,
    /// Only from [`Controller::discover`](crate::Controller::discover): whether the configuration already has
    /// the device. Absent from the free function's results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configured: Option<Configured>,
}

/// Whether a discovered device is in the configuration: serialised as `false` or the configured name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Configured {
    /// Not in the configuration.
    No,
    /// In the configuration under this name.
    As(String),
}

impl Serialize for Configured {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Configured::No => s.serialize_bool(false),
            Configured::As(name) => s.serialize_str(name),
        }
    }
}

/// `AA:BB:CC:DD:EE:FF` from 12 hex digits with or without `:`/`-` separators (`a8032ab12345`,
/// `A8:03:2A:B1:23:45`); `None` for anything else.
pub fn normalise_mac(text: &str) -> Option<String> {
    if text.len() > 17 {
        return None;
    }
    let hex: String = text.chars().filter(|c| *c != ':' && *c != '-').collect();
    if hex.len() != 12 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let upper = hex.to_ascii_uppercase();
    Some(
        upper
            .as_bytes()
            .chunks(2)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join(":"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_normalised() {
        assert_eq!(
            normalise_mac("a8032ab12345").as_deref(),
            Some("A8:03:2A:B1:23:45")
        );
        assert_eq!(
            normalise_mac("A8:03:2A:B1:23:45").as_deref(),
            Some("A8:03:2A:B1:23:45")
        );
        assert_eq!(
            normalise_mac("a8-03-2a-b1-23-45").as_deref(),
            Some("A8:03:2A:B1:23:45")
        );
        assert_eq!(normalise_mac("F4128C"), None);
        assert_eq!(normalise_mac("zz032ab12345"), None);
        assert_eq!(normalise_mac(&"a".repeat(1000)), None);
    }
}
