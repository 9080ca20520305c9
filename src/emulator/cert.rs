//! HTTPS for emulated devices: certificates made with rcgen (self-signed, expired, for other names, or
//! signed by a [`CertAuthority`]), and the rustls server configuration a device serves, switchable at runtime.

use std::sync::{Arc, RwLock};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// A certificate authority for tests and `sdctl emulate`: signs device certificates
/// ([`CertSpec::issuer`]). Its certificate (PEM) is what a controller's `CaFile` names.
pub struct CertAuthority {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

impl std::fmt::Debug for CertAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertAuthority").finish()
    }
}

impl CertAuthority {
    /// A new CA (ECDSA P-256) whose subject is `name`.
    pub fn new(name: &str) -> CertAuthority {
        let key = KeyPair::generate().expect("an ECDSA P-256 key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("no names");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let pem = params.self_signed(&key).expect("a CA certificate").pem();
        CertAuthority { params, key, pem }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A server certificate signed by this CA for `names` (DNS names or IP addresses), and its private key:
    /// `(certificate PEM, PKCS#8 key PEM)`, for servers other than an emulated device (a test's MQTT broker).
    pub fn issue_pem(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("an ECDSA P-256 key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("valid names");
        params
            .distinguished_name
            .push(DnType::CommonName, "smartdev test server");
        let cert = params
            .signed_by(&key, &Issuer::from_params(&self.params, &self.key))
            .expect("a certificate signed by the CA");
        (cert.pem(), key.serialize_pem())
    }
}

/// Which certificate an emulated device serves ([`crate::emulator::Emulator::set_certificate`]).
#[derive(Clone, Debug, Default)]
pub struct CertSpec {
    /// The CA that signs it; `None`: self-signed.
    pub issuer: Option<Arc<CertAuthority>>,
    /// The names it is valid for (DNS names or IP addresses); empty: `localhost` and `127.0.0.1`.
    pub names: Vec<String>,
    /// Valid only from 2020-01-01 to 2021-01-01: expired.
    pub expired: bool,
}

/// A device's TLS side: the configuration it serves and that certificate's fingerprint.
pub(crate) struct DeviceTls {
    current: RwLock<(Arc<ServerConfig>, String)>,
}

impl DeviceTls {
    pub(crate) fn new(spec: &CertSpec) -> Result<DeviceTls, String> {
        Ok(DeviceTls {
            current: RwLock::new(make(spec)?),
        })
    }

    pub(crate) fn config(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    pub(crate) fn fingerprint(&self) -> String {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone()
    }

    /// Serves a new certificate from the next connection on; returns its fingerprint.
    pub(crate) fn set(&self, spec: &CertSpec) -> Result<String, String> {
        let next = make(spec)?;
        let fp = next.1.clone();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(fp)
    }
}

fn make(spec: &CertSpec) -> Result<(Arc<ServerConfig>, String), String> {
    let names = if spec.names.is_empty() {
        vec!["localhost".to_string(), "127.0.0.1".to_string()]
    } else {
        spec.names.clone()
    };
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params = CertificateParams::new(names).map_err(|e| e.to_string())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "smartdev emulated device");
    if spec.expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let cert = match &spec.issuer {
        Some(ca) => params.signed_by(&key, &Issuer::from_params(&ca.params, &ca.key)),
        None => params.self_signed(&key),
    }
    .map_err(|e| e.to_string())?;
    let der = cert.der().clone();
    let fp = crate::driver::tls::fingerprint(&der);
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    // TLS 1.2 only, like the devices: Shelly's TLS stack has 1.3 disabled (kb.shelly.cloud "Shelly TLS:
    // Supported Certs and Config"). So a client resumes with the abbreviated 1.2 handshake (no key exchange),
    // as against the real device; smartdev itself offers 1.2 and 1.3.
    let config = ServerConfig::builder_with_provider(crate::driver::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(vec![der], key_der)
        .map_err(|e| e.to_string())?;
    Ok((Arc::new(config), fp))
}
