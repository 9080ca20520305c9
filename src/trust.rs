//! Accepting a device's new TLS certificate (`sdctl trust DEVICE`): the certificate the device presents now
//! replaces the one pinned at first use in the trust file.

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rustls::ClientConnection;
use rustls::pki_types::ServerName;

use crate::config::Settings;
use crate::driver::tls::{Trust, TrustStore, client_config, parse_fingerprint};
use crate::error::{Error, Result};

/// What [`trust_certificate`] changed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrustChange {
    /// The device's name (its key in the trust file).
    pub device: String,
    /// The fingerprint pinned before, if any.
    pub previous: Option<String>,
    /// The fingerprint pinned now (SHA-256, `AB:CD:…`).
    pub accepted: String,
    /// The trust file.
    pub file: PathBuf,
}

/// Pins the certificate device `device` (name or ID) presents now in the trust file, replacing the one
/// pinned at first use: what to do after a device really got a new certificate and the controller refused
/// it ([`Error::Certificate`]). With `expect`, only a certificate with that SHA-256 fingerprint is accepted
/// (read it from the device's web UI to rule out a machine in the middle). The handshake's signature is
/// checked, so the device holds the certificate's key. Only for devices verified by first use: one with
/// `CertSha256` or `CaFile` has nothing to pin.
pub fn trust_certificate(
    settings: &Settings,
    device: &str,
    expect: Option<&str>,
) -> Result<TrustChange> {
    let expect = expect
        .map(parse_fingerprint)
        .transpose()
        .map_err(Error::InvalidArgument)?;
    let (planned, _) = crate::plan::plan_following(settings).map_err(Error::Init)?;
    let Some((dev, cfg)) = planned
        .iter()
        .zip(&settings.devices)
        .find(|(d, _)| d.name == device || d.id.to_string() == device)
    else {
        return Err(Error::NotFound {
            kind: "device",
            identity: format!("name '{device}'"),
            hint: String::new(),
        });
    };
    let usage = |m: &str| Error::InvalidArgument(format!("device {}: {m}", dev.label()));
    if !cfg.tls {
        return Err(usage(
            "it is not configured for HTTPS (Tls: true, or Hostname https://...), so there is no certificate to trust",
        ));
    }
    if cfg.cert_sha256.is_some() {
        return Err(usage(
            "its certificate is pinned by CertSha256 in the configuration; change it there",
        ));
    }
    if let Some(ca) = cfg.ca_file.as_ref().or(settings.ca_file.as_ref()) {
        return Err(usage(&format!(
            "it is verified against CaFile {}, not pinned; a new certificate must be signed by that CA",
            ca.display()
        )));
    }
    let file = settings.trust_file.clone().ok_or_else(|| {
        usage("the settings were not read from a file and name no TrustFile, so there is no trust file")
    })?;
    let host = dev
        .address
        .clone()
        .ok_or_else(|| usage("it has no address (Hostname) to connect to"))?;
    let seen =
        presented(&host, dev.port, settings.response_timeout).map_err(|m| Error::Device {
            device: dev.label(),
            message: m,
        })?;
    if let Some(e) = &expect
        && *e != seen
    {
        return Err(Error::Certificate {
            device: dev.label(),
            message: format!(
                "the device presented certificate SHA-256 {seen}, not the expected {e}; nothing was changed"
            ),
            presented: Some(seen),
            expected: Some(e.clone()),
        });
    }
    let store = TrustStore::open(&file).map_err(Error::InvalidArgument)?;
    let previous = store.replace(&dev.name, &seen).map_err(|e| Error::Io {
        context: e,
        source: std::io::Error::other("trust file"),
    })?;
    log::info!(
        "device {}: certificate SHA-256 {seen} trusted in {} (was {})",
        dev.label(),
        file.display(),
        previous.as_deref().unwrap_or("none")
    );
    Ok(TrustChange {
        device: dev.name.clone(),
        previous,
        accepted: seen,
        file,
    })
}

/// The fingerprint of the certificate `host:port` presents, after a complete handshake.
fn presented(
    host: &str,
    port: u16,
    timeout: std::time::Duration,
) -> std::result::Result<String, String> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let mut sock = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let _ = sock.set_read_timeout(Some(timeout));
    let _ = sock.set_write_timeout(Some(timeout));
    // Any certificate is taken here: this is how the user sees what the device presents, to accept it.
    let seen = Arc::new(Mutex::new(None));
    let tls = client_config(Trust::Observe(seen.clone()))?;
    let name = ServerName::try_from(host.to_string())
        .map_err(|_| format!("{host} is not a valid TLS name"))?;
    let mut conn = ClientConnection::new(tls.config(), name).map_err(|e| format!("TLS: {e}"))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock)
            .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
    }
    conn.send_close_notify();
    let _ = conn.complete_io(&mut sock);
    let _ = sock.flush();
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or_else(|| format!("{addr} presented no certificate"))
}
