//! TLS to devices (HTTPS): who is trusted, the rustls verifier that says so, and the ureq connector that runs
//! rustls over ureq's TCP transport.
//!
//! A device is verified one of three ways, never none:
//! - **CA** (`CaFile:`, per device or at the root): the usual web PKI check against that CA only: chain,
//!   validity period, and the host name or IP address the device is configured with (an IP needs an IP SAN).
//! - **Pin** (`CertSha256:`): the device's certificate is exactly the one with this SHA-256 fingerprint.
//! - **Trust on first use** (neither): the first certificate seen is pinned in the trust file next to the
//!   configuration ([`TrustStore`]); a different one later is refused until the user accepts it
//!   (`sdctl trust DEVICE`, [`crate::trust_certificate`]).
//!
//! Pin and first use check the certificate itself, not its names or dates: the fingerprint is the identity.
//! All three check the handshake's signature with the certificate's key (rustls' `verify_tls1x_signature`),
//! so a peer that merely replays the certificate cannot complete the handshake.
//!
//! Why our own connector rather than ureq's rustls feature: ureq's `TlsConfig` takes root certificates only,
//! and pin and first use need a custom `ServerCertVerifier`.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore};
use sha2::{Digest, Sha256};

/// The crypto provider every TLS connection uses (ring).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    static P: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    P.get_or_init(|| {
        let mut p = rustls::crypto::ring::default_provider();
        // AES-128-GCM with SHA-256 first (Mozilla's order too): SHA-256 runs on the CPU's SHA extensions, where
        // SHA-384 has none, and every TLS 1.2 record and key derivation hashes with the suite's hash. A device
        // that insists on its own order still gets what it picks.
        p.cipher_suites.sort_by_key(|s| {
            let hash = match s {
                rustls::SupportedCipherSuite::Tls12(s) => s.common.hash_provider.algorithm(),
                rustls::SupportedCipherSuite::Tls13(s) => s.common.hash_provider.algorithm(),
            };
            hash != rustls::crypto::hash::HashAlgorithm::SHA256
        });
        // A key share offered and not used (the device chose TLS 1.2) serves the next handshake.
        p.kx_groups = p
            .kx_groups
            .iter()
            .map(|g| {
                super::key_shares::Recycled::leak(*g)
                    as &'static dyn rustls::crypto::SupportedKxGroup
            })
            .collect();
        Arc::new(p)
    })
    .clone()
}

/// The SHA-256 fingerprint of a DER certificate as `AB:CD:…` (32 pairs), the spelling `openssl x509
/// -fingerprint -sha256` prints.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    digest
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Reads a fingerprint in any common spelling (upper or lower case, with `:`, spaces or nothing between
/// pairs, an optional `sha256/` or `SHA256:` prefix) into the canonical one of [`fingerprint`].
pub fn parse_fingerprint(text: &str) -> Result<String, String> {
    let t = text.trim();
    let t = t
        .strip_prefix("sha256/")
        .or_else(|| t.strip_prefix("SHA256:"))
        .or_else(|| t.strip_prefix("sha256:"))
        .unwrap_or(t);
    let hex: String = t
        .chars()
        .filter(|c| !matches!(c, ':' | ' ' | '-'))
        .collect();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "{} is not a SHA-256 fingerprint: expected 64 hexadecimal digits (pairs may be separated by ':'), as `openssl x509 -noout -fingerprint -sha256` or `sdctl emulate` print",
            crate::text::quote(text, 120)
        ));
    }
    Ok(hex
        .to_ascii_uppercase()
        .as_bytes()
        .chunks(2)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect::<Vec<_>>()
        .join(":"))
}

/// Reads the CA certificates of a PEM file (`CaFile`).
pub(crate) fn load_ca(path: &Path) -> Result<Arc<RootCertStore>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{} is not a PEM certificate file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{} holds no certificate (expected PEM blocks `-----BEGIN CERTIFICATE-----`)",
            path.display()
        ));
    }
    let mut roots = RootCertStore::empty();
    let (_, ignored) = roots.add_parsable_certificates(certs);
    if roots.is_empty() {
        return Err(format!(
            "{}: none of its {ignored} certificates is a usable CA certificate",
            path.display()
        ));
    }
    Ok(Arc::new(roots))
}

/// How a TLS device's certificate is checked.
#[derive(Clone)]
pub(crate) enum Trust {
    /// Against these CA certificates (`CaFile`), for the configured host name or IP address.
    Ca {
        /// The file, for messages.
        file: PathBuf,
        /// Its certificates.
        roots: Arc<RootCertStore>,
    },
    /// Exactly this certificate (`CertSha256`, canonical spelling).
    Pin(String),
    /// The certificate pinned at first use under this device name in the trust file.
    FirstUse {
        /// The trust file.
        store: Arc<TrustStore>,
        /// The device's name, its key in the file.
        name: String,
    },
    /// Showing what a device presents, never trusting it: discovery's one `GET /shelly` over HTTPS (as
    /// unauthenticated as the same request over HTTP) and `sdctl trust` (the handshake whose certificate the user
    /// accepts). Any certificate is taken and its fingerprint written here; the handshake signature is still
    /// checked with its key. Nothing is ever switched or read for a configured device this way.
    Observe(Arc<Mutex<Option<String>>>),
}

/// Why a certificate was refused; carried through rustls and ureq to the HTTP layer as the source of an
/// `io::Error`, where it becomes [`crate::Error::Certificate`].
#[derive(Debug, Clone)]
pub(crate) enum Refusal {
    /// A certificate other than the pinned one.
    Changed {
        /// The pinned fingerprint.
        expected: String,
        /// The fingerprint of what the device presented.
        presented: String,
        /// `Some(trust file)`: pinned at first use; `None`: the configured `CertSha256`.
        file: Option<PathBuf>,
        /// The device's name (for the `sdctl trust` hint).
        name: String,
    },
    /// The CA check failed.
    Ca {
        /// What rustls found, in words.
        why: String,
        /// The fingerprint of what the device presented.
        presented: String,
    },
    /// The trust file could not be read or written, so nothing is trusted.
    Store(String),
}

impl Refusal {
    /// The fingerprint of the certificate the device presented, when one was seen.
    pub(crate) fn presented(&self) -> Option<&str> {
        match self {
            Refusal::Changed { presented, .. } | Refusal::Ca { presented, .. } => Some(presented),
            Refusal::Store(_) => None,
        }
    }

    /// The fingerprint that was expected (pin or first use).
    pub(crate) fn expected(&self) -> Option<&str> {
        match self {
            Refusal::Changed { expected, .. } => Some(expected),
            _ => None,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Changed {
                expected,
                presented,
                file: Some(file),
                name,
            } => write!(
                f,
                "the device presented certificate SHA-256 {presented}, not the one pinned at first use ({expected}, in {}); if the device really has a new certificate, accept it with `sdctl trust {}` (or configure CertSha256: {presented})",
                file.display(),
                crate::text::quote(name, 60)
            ),
            Refusal::Changed {
                expected,
                presented,
                file: None,
                ..
            } => write!(
                f,
                "the device presented certificate SHA-256 {presented}, not the configured CertSha256 {expected}; if the device really has a new certificate, set CertSha256 to the new fingerprint"
            ),
            Refusal::Ca { why, presented } => {
                write!(f, "{why} (the device presented SHA-256 {presented})")
            }
            Refusal::Store(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Refusal {}

fn refuse(r: Refusal) -> rustls::Error {
    rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
        Arc::new(r),
    )))
}

/// Puts a rustls CA verdict in words a user can act on.
fn ca_words(e: &rustls::Error, file: &Path, host: &str) -> String {
    use rustls::CertificateError as C;
    let ca = file.display();
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::Expired | C::ExpiredContext { .. } => {
                "the device's certificate has expired (or this machine's clock is wrong): renew it on the device".into()
            }
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "the device's certificate is not valid yet (or this machine's clock is wrong)".into()
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "the device's certificate does not name {host}: under CaFile verification the certificate must carry the configured Hostname (a DNS name SAN, or an IP address SAN when the device is configured by IP); reissue it, or pin it with CertSha256 instead"
            ),
            C::UnknownIssuer => format!("the device's certificate is not signed by a CA in {ca}"),
            C::BadSignature => format!("the device's certificate has a bad signature (CaFile {ca})"),
            other => format!("the device's certificate was refused ({other}; CaFile {ca})"),
        },
        other => format!("the device's certificate was refused: {other}"),
    }
}

/// How the device configured by `cfg` (planned as `name`) is verified; `stores` shares one [`TrustStore`] per
/// trust file among the devices of a controller.
pub(crate) fn trust_for(
    cfg: &crate::config::DeviceConfig,
    name: &str,
    settings: &crate::config::Settings,
    stores: &mut Vec<Arc<TrustStore>>,
) -> Result<Trust, String> {
    if let Some(pin) = &cfg.cert_sha256 {
        return Ok(Trust::Pin(pin.clone()));
    }
    if let Some(file) = cfg.ca_file.as_ref().or(settings.ca_file.as_ref()) {
        return Ok(Trust::Ca {
            file: file.clone(),
            roots: load_ca(file).map_err(|e| format!("CaFile: {e}"))?,
        });
    }
    let Some(path) = &settings.trust_file else {
        return Err("Tls: nothing to verify the certificate with: configure CertSha256 or CaFile, or TrustFile (settings not read from a file have no place to keep a certificate pinned at first use)".into());
    };
    let store = match stores.iter().find(|s| s.path() == path) {
        Some(s) => s.clone(),
        None => {
            let s = TrustStore::open(path).map_err(|e| format!("TrustFile: {e}"))?;
            stores.push(s.clone());
            s
        }
    };
    Ok(Trust::FirstUse {
        store,
        name: name.to_string(),
    })
}

/// The verifier of one device.
#[derive(Debug)]
pub(crate) struct Verifier {
    trust: TrustDebug,
    ca: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

/// `Trust` behind a `Debug` that shows no certificates.
struct TrustDebug(Trust);

impl fmt::Debug for TrustDebug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Trust::Ca { .. } => "Ca",
            Trust::Pin(_) => "Pin",
            Trust::FirstUse { .. } => "FirstUse",
            Trust::Observe(_) => "Observe",
        })
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let presented = fingerprint(end_entity);
        match &self.trust.0 {
            Trust::Ca { file, .. } => {
                let ca = self.ca.as_ref().expect("a CA verifier for Trust::Ca");
                ca.verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
                    .map_err(|e| {
                        refuse(Refusal::Ca {
                            why: ca_words(&e, file, &server_name.to_str()),
                            presented,
                        })
                    })
            }
            Trust::Pin(expected) if *expected == presented => Ok(ServerCertVerified::assertion()),
            Trust::Pin(expected) => Err(refuse(Refusal::Changed {
                expected: expected.clone(),
                presented,
                file: None,
                name: String::new(),
            })),
            Trust::FirstUse { store, name } => store
                .check(name, &presented)
                .map(|()| ServerCertVerified::assertion())
                .map_err(refuse),
            Trust::Observe(seen) => {
                *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(presented);
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A device's TLS client configurations, both with its verifier and one session cache. A device's first
/// connections offer TLS 1.3 and 1.2; once it has chosen 1.2 (Shelly's TLS stack has 1.3 off), later
/// connections offer 1.2 alone: a resumed 1.2 handshake then needs no key exchange, where offering 1.3 costs a
/// key share in every ClientHello (measured: 1.7–2.1× the CPU of HTTP per request, 1.2–1.3× without it). A
/// device that answers 1.3 keeps being offered both.
#[derive(Debug)]
pub(crate) struct DeviceTls {
    both: Arc<ClientConfig>,
    v12: Arc<ClientConfig>,
    only12: AtomicBool,
    /// Trusted at first use with no pin yet when opened: its first handshake writes the trust file (waiting
    /// for the write), which a poller must not do for one device while every other waits.
    pins_first: bool,
}

impl DeviceTls {
    /// Whether its first handshake (at open) pins the certificate, writing the trust file.
    pub(crate) fn pins_first(&self) -> bool {
        self.pins_first
    }

    /// The configuration for the next connection.
    pub(crate) fn config(&self) -> Arc<ClientConfig> {
        if self.only12.load(Ordering::Relaxed) {
            self.v12.clone()
        } else {
            self.both.clone()
        }
    }

    /// The configuration offering TLS 1.2 alone (for the floor benchmark, through `fuzzing`).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn tls12(&self) -> Arc<ClientConfig> {
        self.v12.clone()
    }

    /// Learns from a finished handshake which versions to offer next time.
    pub(crate) fn learn(&self, conn: &ClientConnection) {
        let only12 = conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_2);
        self.only12.store(only12, Ordering::Relaxed);
    }
}

/// The client configurations for a device trusted this way.
pub(crate) fn client_config(trust: Trust) -> Result<Arc<DeviceTls>, String> {
    let provider = provider();
    let pins_first = match &trust {
        Trust::FirstUse { store, name } => !store.lock().map.contains_key(name),
        _ => false,
    };
    let ca = match &trust {
        Trust::Ca { roots, file } => Some(
            WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| format!("CaFile {}: {e}", file.display()))?,
        ),
        _ => None,
    };
    let verifier = Arc::new(Verifier {
        trust: TrustDebug(trust),
        ca,
        provider: provider.clone(),
    });
    let both = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    let mut v12 = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // One session cache: a session made while offering both versions resumes when offering 1.2 alone.
    v12.resumption = both.resumption.clone();
    Ok(Arc::new(DeviceTls {
        pins_first,
        both: Arc::new(both),
        v12: Arc::new(v12),
        only12: AtomicBool::new(false),
    }))
}

/// The trust file: the certificate fingerprints pinned at first use, by device name. A small JSON object
/// (`{"Kitchen": "AB:CD:…"}`), read at open and again before a certificate is refused when the file changed
/// (another process, such as `sdctl trust`, may have changed it), written atomically (a temporary file renamed
/// over it). Pins taken at once (1,000 devices opening) are written together: whoever writes takes every pin
/// waiting, so the file is written a few times rather than once per device.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    pins: Mutex<Pins>,
    /// One writer at a time; a pin is answered once a write that holds it has ended.
    writer: Mutex<()>,
}

#[derive(Debug, Default)]
struct Pins {
    /// What the file held when last read or written, plus the pins not yet written.
    map: BTreeMap<String, String>,
    /// Pins not yet written: name → (fingerprint, the number it was taken as).
    pending: BTreeMap<String, (String, u64)>,
    /// The number of the last pin taken, and of the last one written.
    taken: u64,
    written: u64,
    /// The file's (modification time, length, inode) when last read or written: unchanged, it is not read
    /// again.
    seen: Option<(std::time::SystemTime, u64, u64)>,
}

impl Pins {
    /// The file's contents with the pins not yet written over them, read only when the file changed.
    fn refresh(&mut self, path: &Path) -> Result<(), String> {
        let now = stamp(path);
        if now.is_some() && now == self.seen {
            return Ok(());
        }
        let mut map = read_pins(path)?;
        for (name, (fp, _)) in &self.pending {
            map.insert(name.clone(), fp.clone());
        }
        self.map = map;
        self.seen = now;
        Ok(())
    }
}

/// What tells that the file changed: every write renames a new file over it (a new inode), so a change is seen
/// even within the file system's time granularity and at the same length.
fn stamp(path: &Path) -> Option<(std::time::SystemTime, u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let inode = 0;
    Some((m.modified().ok()?, m.len(), inode))
}

impl TrustStore {
    /// Opens the trust file at `path` (a missing file is an empty one).
    pub fn open(path: &Path) -> Result<Arc<TrustStore>, String> {
        let mut pins = Pins::default();
        pins.refresh(path)?;
        Ok(Arc::new(TrustStore {
            path: path.to_path_buf(),
            pins: Mutex::new(pins),
            writer: Mutex::new(()),
        }))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pins> {
        self.pins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pins `fingerprint` for `name`, replacing what was pinned (`sdctl trust`); returns the old pin.
    pub fn replace(&self, name: &str, fingerprint: &str) -> Result<Option<String>, String> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut g = self.lock();
        g.seen = None;
        g.refresh(&self.path)?;
        g.pending.remove(name);
        let old = g.map.insert(name.to_string(), fingerprint.to_string());
        write_pins(&self.path, &g.map)?;
        g.seen = stamp(&self.path);
        Ok(old)
    }

    /// Accepts `presented` for `name` when it is the pinned one, or when nothing is pinned yet (then pins it,
    /// writes the file and logs one line).
    fn check(&self, name: &str, presented: &str) -> Result<(), Refusal> {
        let mut g = self.lock();
        if g.map.get(name).map(String::as_str) == Some(presented) {
            return Ok(());
        }
        // Another process may have pinned or replaced it since we read the file.
        g.refresh(&self.path).map_err(Refusal::Store)?;
        match g.map.get(name) {
            Some(p) if p == presented => Ok(()),
            Some(p) => Err(Refusal::Changed {
                expected: p.clone(),
                presented: presented.to_string(),
                file: Some(self.path.clone()),
                name: name.to_string(),
            }),
            None => {
                g.taken += 1;
                let mine = g.taken;
                g.map.insert(name.to_string(), presented.to_string());
                g.pending
                    .insert(name.to_string(), (presented.to_string(), mine));
                drop(g);
                if let Err(e) = self.persist(mine) {
                    let mut g = self.lock();
                    if g.pending.get(name).is_some_and(|(_, n)| *n == mine) {
                        g.pending.remove(name);
                        g.map.remove(name);
                    }
                    return Err(Refusal::Store(format!(
                        "cannot pin the device's first certificate ({presented}): {e}; nothing is trusted without it (configure CertSha256 or CaFile, or make the trust file writable)"
                    )));
                }
                log::info!(
                    "device {}: first certificate pinned (SHA-256 {presented}) in {}",
                    crate::text::quote(name, 60),
                    self.path.display()
                );
                Ok(())
            }
        }
    }

    /// Returns once pin number `mine` is in the file: written by us, with every other pin waiting, or by a
    /// writer before us.
    fn persist(&self, mine: u64) -> Result<(), String> {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut g = self.lock();
        if g.written >= mine {
            return Ok(());
        }
        // What another process wrote stays; our pins go over it.
        g.seen = None;
        g.refresh(&self.path)?;
        let (map, upto) = (g.map.clone(), g.taken);
        drop(g);
        write_pins(&self.path, &map)?;
        let mut g = self.lock();
        g.written = g.written.max(upto);
        g.pending.retain(|_, (_, n)| *n > upto);
        g.seen = stamp(&self.path);
        Ok(())
    }
}

fn read_pins(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => {
            return Err(format!(
                "cannot read the trust file {}: {e}",
                path.display()
            ));
        }
    };
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "the trust file {} is not a JSON object of device names and fingerprints: {e}; fix or delete it (deleting it pins every device's certificate again at its next contact)",
            path.display()
        )
    })
}

fn write_pins(path: &Path, pins: &BTreeMap<String, String>) -> Result<(), String> {
    let text = serde_json::to_string_pretty(pins).expect("strings serialise") + "\n";
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trust".into());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write the trust file {}: {e}", path.display())
    })
}

/// The [`Refusal`] an I/O error carries, if any.
pub(crate) fn refusal_of(e: &std::io::Error) -> Option<Refusal> {
    let inner = e.get_ref()?;
    if let Some(r) = inner.downcast_ref::<Refusal>() {
        return Some(r.clone());
    }
    match inner.downcast_ref::<rustls::Error>()? {
        rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o)) => {
            o.0.downcast_ref::<Refusal>().cloned()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_suites_are_offered_first_for_both_versions() {
        use rustls::CipherSuite as C;
        let order: Vec<C> = provider().cipher_suites.iter().map(|s| s.suite()).collect();
        let at = |c: C| order.iter().position(|s| *s == c).unwrap();
        assert!(at(C::TLS13_AES_128_GCM_SHA256) < at(C::TLS13_AES_256_GCM_SHA384));
        assert!(
            at(C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)
                < at(C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)
        );
        assert!(
            at(C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)
                < at(C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384)
        );
        // Nothing was dropped: a device that prefers SHA-384 still finds it.
        assert_eq!(
            order.len(),
            rustls::crypto::ring::default_provider().cipher_suites.len()
        );
    }

    #[test]
    fn fingerprints_are_read_in_every_common_spelling() {
        let canon = fingerprint(b"x");
        let plain: String = canon.replace(':', "").to_lowercase();
        assert_eq!(parse_fingerprint(&plain).unwrap(), canon);
        assert_eq!(
            parse_fingerprint(&format!("SHA256:{canon}")).unwrap(),
            canon
        );
        assert!(
            parse_fingerprint("AB:CD")
                .unwrap_err()
                .contains("64 hexadecimal")
        );
    }

    #[test]
    fn the_trust_file_pins_once_and_refuses_a_change() {
        let dir = std::env::temp_dir().join(format!("sd-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        let _ = std::fs::remove_file(&path);
        let store = TrustStore::open(&path).unwrap();
        store.check("Kitchen", "AA").unwrap();
        assert!(path.exists());
        store.check("Kitchen", "AA").unwrap();
        let err = store.check("Kitchen", "BB").unwrap_err().to_string();
        assert!(
            err.contains("AA") && err.contains("BB") && err.contains("sdctl trust"),
            "{err}"
        );
        assert_eq!(
            store.replace("Kitchen", "BB").unwrap().as_deref(),
            Some("AA")
        );
        store.check("Kitchen", "BB").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn scratch(tag: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("sd-trust-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        (dir, path)
    }

    #[test]
    fn pins_taken_at_once_all_reach_the_file_and_each_is_answered_after_its_write() {
        let (dir, path) = scratch("many");
        let store = TrustStore::open(&path).unwrap();
        let names: Vec<String> = (0..64).map(|i| format!("D{i}")).collect();
        std::thread::scope(|s| {
            for n in &names {
                let store = &store;
                let path = &path;
                s.spawn(move || {
                    store.check(n, &format!("FP-{n}")).unwrap();
                    // Answered only once the pin is in the file.
                    assert_eq!(
                        read_pins(path).unwrap().get(n.as_str()),
                        Some(&format!("FP-{n}"))
                    );
                });
            }
        });
        let file = read_pins(&path).unwrap();
        assert_eq!(file.len(), 64);
        // A new store (another run) refuses a changed certificate for any of them.
        let again = TrustStore::open(&path).unwrap();
        assert!(again.check("D7", "OTHER").is_err());
        again.check("D7", "FP-D7").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_pin_another_process_wrote_is_kept_and_a_replaced_one_is_seen() {
        let (dir, path) = scratch("other");
        let store = TrustStore::open(&path).unwrap();
        store.check("Kitchen", "AA").unwrap();
        // Another process (sdctl trust) replaces Kitchen's pin and pins Hall.
        let other = TrustStore::open(&path).unwrap();
        other.replace("Kitchen", "BB").unwrap();
        other.replace("Hall", "CC").unwrap();
        store.check("Kitchen", "BB").unwrap();
        assert!(
            store.check("Hall", "DD").is_err(),
            "Hall is pinned in the file"
        );
        // Our next pin keeps what the other process wrote.
        store.check("Cellar", "EE").unwrap();
        let file = read_pins(&path).unwrap();
        assert_eq!(file.get("Kitchen").map(String::as_str), Some("BB"));
        assert_eq!(file.get("Hall").map(String::as_str), Some("CC"));
        assert_eq!(file.get("Cellar").map(String::as_str), Some("EE"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
