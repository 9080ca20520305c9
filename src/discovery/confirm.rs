//! Confirming a [`Candidate`] with one HTTP (or HTTPS) request before it is reported: `GET /shelly` for Shelly (unprotected
//! on every generation: model, `gen`, `mac`, firmware, `auth_en`/`auth`), `GET /cm?cmnd=Status%200` for Tasmota
//! (a device with a web password answers `{"WARNING":"Need user=…"}`, which still proves it is Tasmota). The
//! device's answer wins over its announcement: a TXT `gen=2` on a device whose `/shelly` has no `gen` is Gen1.
//! An answer that is not what the family sends (garbage, a 404, a web page, no MAC from a Shelly) is no device.

use super::candidate::{Candidate, Hint};
use super::found::{Discovered, normalise_mac};
use crate::models::ModelLibrary;
use serde_json::Value;
use std::time::Duration;

/// Largest answer read; a real `/shelly` is well under 1 KiB, Tasmota's `Status 0` a few KiB.
const MAX_BODY: u64 = 32 * 1024;
/// Longest text field kept from an answer.
const MAX_FIELD: usize = 64;

/// The confirmed device, or `None` (logged at DEBUG with the reason) when the answer does not confirm it.
/// One request within `timeout`, over HTTP, or HTTPS at port 443 (as aioshelly decides); when the first scheme
/// fails at once the way a server of the other one answers (a TLS server closing on plain text, an HTTP server
/// answering a ClientHello), one more request with the other scheme. A device answering over HTTPS is reported
/// with its certificate's fingerprint ([`Discovered::cert_sha256`]).
pub fn confirm(c: &Candidate, timeout: Duration, models: &ModelLibrary) -> Option<Discovered> {
    let path = match c.hint {
        Hint::Tasmota => "/cm?cmnd=Status%200",
        Hint::ShellyRpc | Hint::ShellyGen1 => "/shelly",
    };
    let host = crate::hostname::url_host(&c.address.to_string());
    let started = std::time::Instant::now();
    let order = if c.port == 443 {
        [true, false]
    } else {
        [false, true]
    };
    for https in order {
        let url = format!(
            "{}://{host}:{}{path}",
            if https { "https" } else { "http" },
            c.port
        );
        let left = timeout.saturating_sub(started.elapsed());
        let (answer, cert) = match get(&url, left, https) {
            Ok(v) => v,
            Err(Failure { why, other_scheme }) => {
                log::debug!("discovery: {} at {url} not confirmed: {why}", c.name);
                if other_scheme && !left.is_zero() {
                    continue;
                }
                return None;
            }
        };
        let found = match c.hint {
            Hint::Tasmota => tasmota(c, &answer),
            Hint::ShellyRpc | Hint::ShellyGen1 => shelly(c, &answer, models),
        };
        if found.is_none() {
            log::debug!(
                "discovery: {} at {url} not confirmed: the answer is not a {:?} device's",
                c.name,
                c.hint
            );
        }
        return found.map(|d| Discovered {
            cert_sha256: cert,
            ..d
        });
    }
    None
}

/// Why a request did not confirm, and whether the other scheme may (the server answered, not in this one).
struct Failure {
    why: String,
    other_scheme: bool,
}

/// The JSON answer of a GET, whatever the status (Tasmota refuses with 401 and a JSON body), and over HTTPS
/// the fingerprint of the certificate presented.
fn get(url: &str, timeout: Duration, https: bool) -> Result<(Value, Option<String>), Failure> {
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .max_response_header_size(8 * 1024)
        .input_buffer_size(16 * 1024)
        .user_agent(format!("smartdev/{}", crate::VERSION))
        .build();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let agent: ureq::Agent = if https {
        use ureq::unversioned::transport::{Connector, TcpConnector};
        let tls =
            crate::driver::tls::client_config(crate::driver::tls::Trust::Observe(seen.clone()))
                .map_err(|why| Failure {
                    why,
                    other_scheme: false,
                })?;
        let connector =
            ().chain(TcpConnector::default())
                .chain(crate::driver::tls_transport::TlsConnector(tls));
        ureq::Agent::with_parts(
            config,
            connector,
            ureq::unversioned::resolver::DefaultResolver::default(),
        )
    } else {
        config.into()
    };
    let mut resp = agent.get(url).call().map_err(|e| Failure {
        other_scheme: other_scheme(&e),
        why: e.to_string(),
    })?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(MAX_BODY)
        .read_to_vec()
        .map_err(|e| Failure {
            why: e.to_string(),
            other_scheme: false,
        })?;
    if status != 200 && status != 401 {
        // An HTTP server's answer to a ClientHello never gets here (it is no TLS record); an HTTPS server's
        // `400 plain HTTP request sent to HTTPS port` does.
        return Err(Failure {
            why: format!("HTTP status {status}"),
            other_scheme: !https && status == 400,
        });
    }
    let json = crate::untrusted_json::parse(&body).map_err(|e| Failure {
        why: format!("not JSON: {e}"),
        other_scheme: false,
    })?;
    let cert = seen.lock().unwrap_or_else(|e| e.into_inner()).take();
    Ok((json, cert))
}

/// A failure that says a server answered in the other scheme: the connection was made, then the exchange
/// broke (closed, reset, not HTTP, a TLS error). A timeout or a refused connection says nothing of the scheme.
fn other_scheme(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
            false
        }
        ureq::Error::Io(io) => !matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::TimedOut
                | std::io::ErrorKind::WouldBlock
                | std::io::ErrorKind::HostUnreachable
                | std::io::ErrorKind::NetworkUnreachable
        ),
        _ => true,
    }
}

fn field(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(|s| crate::text::escape_controls(&crate::text::clip(s, MAX_FIELD)).into_owned())
        .filter(|s| !s.is_empty())
}

fn shelly(c: &Candidate, v: &Value, models: &ModelLibrary) -> Option<Discovered> {
    let mac = normalise_mac(v.get("mac")?.as_str()?)?;
    // Gen2+ report `gen` and `model`; Gen1 report `type` and no `gen`.
    let generation = match v.get("gen") {
        None => 1,
        Some(g) => g.as_u64().filter(|g| (2..=9).contains(g))? as u8,
    };
    if let Some(claimed) = c.txt_generation
        && claimed != generation
    {
        log::debug!(
            "discovery: {} announces gen={claimed} but /shelly says generation {generation}; using /shelly",
            c.name
        );
    }
    let reported = if generation == 1 {
        field(v, "type")
    } else {
        field(v, "model")
    }?;
    let model = library_model(models, &reported, generation, field(v, "app").as_deref());
    let (firmware, auth) = if generation == 1 {
        (field(v, "fw"), v.get("auth").and_then(Value::as_bool))
    } else {
        (
            field(v, "ver").or_else(|| field(v, "fw_id")),
            v.get("auth_en").and_then(Value::as_bool),
        )
    };
    let name = (generation > 1)
        .then(|| field(v, "name"))
        .flatten()
        .unwrap_or_else(|| c.name.clone());
    Some(Discovered {
        mac_address: Some(mac),
        model,
        reported_model: Some(reported),
        generation: Some(generation),
        address: c.address,
        port: c.port,
        name,
        hostname: c.host.clone(),
        firmware,
        auth_required: auth,
        cert_sha256: None,
        configured: None,
    })
}

/// The library model whose reported ids include `reported` (and whose generation matches), else the one
/// named `Shelly<app>`.
fn library_model(
    models: &ModelLibrary,
    reported: &str,
    generation: u8,
    app: Option<&str>,
) -> Option<String> {
    let family_ok = |m: &&crate::models::ModelInfo| (m.generation == 1) == (generation == 1);
    models
        .models()
        .iter()
        .filter(family_ok)
        .find(|m| {
            m.reported_models
                .iter()
                .any(|r| r.eq_ignore_ascii_case(reported))
        })
        .or_else(|| {
            app.and_then(|a| models.get(&format!("Shelly{a}")))
                .filter(family_ok)
        })
        .map(|m| m.model.clone())
}

fn tasmota(c: &Candidate, v: &Value) -> Option<Discovered> {
    let refused = v
        .get("WARNING")
        .and_then(Value::as_str)
        .is_some_and(|w| w.starts_with("Need user"));
    let net = v.get("StatusNET");
    let mac = net
        .and_then(|n| n.get("Mac"))
        .and_then(Value::as_str)
        .and_then(normalise_mac);
    if !refused && mac.is_none() {
        return None;
    }
    let status = v.get("Status");
    let name = status
        .and_then(|s| field(s, "DeviceName"))
        .or_else(|| {
            let first = status?.get("FriendlyName")?.get(0)?.as_str()?;
            Some(crate::text::escape_controls(&crate::text::clip(first, MAX_FIELD)).into_owned())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| c.name.clone());
    let firmware = v.get("StatusFWR").and_then(|f| field(f, "Version"));
    Some(Discovered {
        mac_address: mac,
        model: Some(crate::models::TASMOTA.to_string()),
        reported_model: Some("Tasmota".to_string()),
        generation: None,
        address: c.address,
        port: c.port,
        name,
        hostname: c.host.clone(),
        firmware,
        auth_required: Some(refused),
        cert_sha256: None,
        configured: None,
    })
}
