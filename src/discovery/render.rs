//! Discovered devices for people (`table`) and as configuration to paste (`yaml`).

use super::found::{Configured, Discovered};
use crate::table::Table;

fn or_dash(v: Option<&str>) -> String {
    v.unwrap_or("-").to_string()
}

/// An aligned table, one device a line, with a heading; `No devices found` and the likely fixes when empty.
pub fn table(found: &[Discovered]) -> String {
    if found.is_empty() {
        return "No devices found. Devices announce themselves over mDNS on the local network: check that this \
                computer is on the same network (and VLAN) as the devices, that UDP port 5353 is not blocked, and \
                try a longer --timeout (seconds). Tasmota announces itself only with SetOption55 1 on a build \
                with mDNS.\n"
            .to_string();
    }
    let mut t = Table::new();
    let configured = found.iter().any(|d| d.configured.is_some());
    let mut head = vec!["NAME", "MODEL", "GEN", "ADDRESS", "MAC", "FIRMWARE", "AUTH"];
    if configured {
        head.push("CONFIGURED");
    }
    t.row(head.into_iter().map(str::to_string).collect());
    for d in found {
        let mut row = vec![
            d.name.clone(),
            or_dash(d.model.as_deref().or(d.reported_model.as_deref())),
            d.generation.map_or("-".into(), |g| g.to_string()),
            address(d),
            or_dash(d.mac_address.as_deref()),
            or_dash(d.firmware.as_deref()),
            match d.auth_required {
                Some(true) => "password".into(),
                Some(false) => "none".into(),
                None => "-".into(),
            },
        ];
        if configured {
            row.push(match &d.configured {
                Some(Configured::As(name)) => format!("as {name}"),
                _ => "no".into(),
            });
        }
        t.row(row);
    }
    let mut s = String::new();
    t.write(&mut s, "");
    s
}

fn address(d: &Discovered) -> String {
    let host = crate::hostname::url_host(&d.address.to_string());
    match (d.cert_sha256.is_some(), d.port) {
        (false, 80) => host,
        (false, port) => format!("{host}:{port}"),
        (true, 443) => format!("https://{host}"),
        (true, port) => format!("https://{host}:{port}"),
    }
}

/// A YAML scalar: plain when it is safe, else a double-quoted (JSON) string.
fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | '.' | '-'))
        && !s.starts_with(['-', ' ', '.'])
        && !s.ends_with(' ')
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "yes" | "no" | "true" | "false" | "on" | "off" | "null" | "y" | "n" | "~"
        )
        && s.parse::<f64>().is_err();
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
    }
}

/// A configuration to paste: one device block (`Name`, `Model`, `Hostname`, `Port` when not the scheme's
/// default, `MAC`, and for a device that answered over HTTPS `Tls` and `CertSha256`) per
/// device not yet configured; configured ones appear as comments. Devices whose model the library does not
/// know get a comment instead of a block, with the fix.
pub fn yaml(found: &[Discovered]) -> String {
    let mut s = String::from(
        "# Found by sdctl discover. Paste into your configuration; rename as you like.\n",
    );
    s.push_str("SmartDevices:\n  Devices:\n");
    let mut blocks = 0;
    for d in found {
        if let Some(Configured::As(name)) = &d.configured {
            s.push_str(&format!(
                "    # already configured as {}: {} at {}\n",
                scalar(name),
                scalar(&d.name),
                address(d)
            ));
            continue;
        }
        let Some(model) = &d.model else {
            s.push_str(&format!(
                "    # {} at {} reports model {}, which the model library does not know: add it to models/vendor_models.json or pick the closest Model by hand\n",
                scalar(&d.name),
                address(d),
                scalar(d.reported_model.as_deref().unwrap_or("?"))
            ));
            continue;
        };
        blocks += 1;
        s.push_str(&format!("    - Name: {}\n", scalar(&d.name)));
        s.push_str(&format!("      Model: {}\n", scalar(model)));
        s.push_str(&format!(
            "      Hostname: {}\n",
            scalar(&d.address.to_string())
        ));
        let default_port = if d.cert_sha256.is_some() { 443 } else { 80 };
        if d.port != default_port {
            s.push_str(&format!("      Port: {}\n", d.port));
        }
        if let Some(mac) = &d.mac_address {
            s.push_str(&format!("      MAC: {}\n", scalar(mac)));
        }
        if let Some(cert) = &d.cert_sha256 {
            s.push_str("      Tls: true\n");
            s.push_str("      # the certificate it presented; check it against the device's web page before trusting it\n");
            s.push_str(&format!(
                "      CertSha256: {}\n",
                serde_json::to_string(cert).unwrap_or_default()
            ));
        }
        if d.auth_required == Some(true) {
            s.push_str("      # the device asks for a password: add Password: env:NAME (NAME: an environment variable holding it)\n");
        }
    }
    if blocks == 0 {
        s.push_str("    []   # nothing new to add\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_that_yaml_would_misread_are_quoted() {
        assert_eq!(scalar("Kitchen Light"), "Kitchen Light");
        assert_eq!(scalar("A8:03:2A:B1:23:45"), "\"A8:03:2A:B1:23:45\"");
        assert_eq!(scalar("yes"), "\"yes\"");
        assert_eq!(scalar("1.5"), "\"1.5\"");
        assert_eq!(scalar("a # b"), "\"a # b\"");
        assert_eq!(scalar("x\ny"), "\"x\\ny\"");
    }
}
