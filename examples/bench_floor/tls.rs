//! The floor's TLS, with the library's own pieces so that it verifies exactly as the library does and no
//! more: the client is the library's configuration for a device pinned with `CertSha256` that has chosen TLS 1.2
//! (it offers no TLS 1.3 key share it would not use); the devices use the library's provider and serve TLS 1.2
//! alone, as Shelly's stack does.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// The wire devices' TLS side: one self-signed ECDSA P-256 certificate (as the emulator's), and its fingerprint.
pub fn server_config() -> (Arc<ServerConfig>, String) {
    let key = rcgen::KeyPair::generate().expect("a P-256 key");
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("a certificate");
    let der = cert.der().clone();
    let fingerprint = smartdev::certificate_sha256(&der);
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = ServerConfig::builder_with_provider(smartdev::fuzzing::tls_provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .expect("TLS 1.2")
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .expect("the certificate");
    (Arc::new(config), fingerprint)
}

/// The client configuration for the device whose certificate's SHA-256 is `pin`.
pub fn client_config(pin: &str) -> Arc<rustls::ClientConfig> {
    smartdev::fuzzing::pinned_tls12_client_config(pin).expect("a valid pin")
}
