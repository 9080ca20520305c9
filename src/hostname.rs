//! Hostname checks for configured devices and webhook hosts, and URL formatting (IPv6 needs brackets).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Checks a configured `Hostname` (IPv4, IPv6 or DNS name) and says what is wrong with it.
pub(crate) fn check(host: &str) -> Result<(), String> {
    let h = host.trim();
    if h.is_empty() {
        return Err("is empty".into());
    }
    if h != host {
        return Err("has leading or trailing spaces".into());
    }
    let inner = h.strip_prefix('[').and_then(|s| s.strip_suffix(']'));
    if inner.unwrap_or(h).parse::<Ipv6Addr>().is_ok() {
        return Ok(());
    }
    if h.parse::<Ipv4Addr>().is_ok() {
        return Ok(());
    }
    if h.contains("://") || h.contains('/') {
        return Err("must be a bare address or name, not a URL".into());
    }
    if let Some((_, port)) = h.rsplit_once(':')
        && port.chars().all(|c| c.is_ascii_digit())
    {
        return Err("contains a port; put the port in the Port key".into());
    }
    if h.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err("is neither a valid IPv4 address nor a host name".into());
    }
    let name = h.strip_suffix('.').unwrap_or(h);
    if name.len() > 253 {
        return Err("is longer than 253 characters".into());
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(format!("has an empty or over-long part '{label}'"));
        }
        if !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!(
                "part '{label}' may only hold letters, digits and '-'"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("part '{label}' must not start or end with '-'"));
        }
    }
    Ok(())
}

/// The host as written in a URL authority (`[fe80::1]` for IPv6).
pub(crate) fn url_host(host: &str) -> String {
    if host.parse::<Ipv6Addr>().is_ok() {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_addresses_and_names() {
        for ok in [
            "192.168.1.20",
            "::1",
            "[fe80::1]",
            "localhost",
            "shelly-1.local",
            "a.b",
            "Plug7",
        ] {
            assert!(check(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_with_a_reason() {
        assert!(check("host:80").unwrap_err().contains("Port"));
        assert!(check("1234").is_err());
        assert!(check("10.0.0.300").is_err());
        assert!(check("my_host").unwrap_err().contains("my_host"));
        assert!(check("http://x").unwrap_err().contains("URL"));
        assert!(check("-bad").is_err());
        assert!(check(" x").is_err());
    }

    #[test]
    fn ipv6_gets_brackets_in_urls() {
        assert_eq!(url_host("fe80::1"), "[fe80::1]");
        assert_eq!(url_host("10.1.1.1"), "10.1.1.1");
    }
}
