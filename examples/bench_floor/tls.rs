//! The floor's TLS: what a client that verifies a pinned certificate cannot skip, and devices that serve one.
//! Both use ring with the library's suite order (SHA-256 first) and TLS 1.2 alone, as Shelly's stack speaks it:
//! the floor client knows that, so it offers no TLS 1.3 key share it would not use.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};

/// One for the process: the floor client makes no more than it needs per device.
fn provider() -> Arc<CryptoProvider> {
    static P: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    Arc::clone(P.get_or_init(|| {
        let mut p = rustls::crypto::ring::default_provider();
        p.cipher_suites.sort_by_key(|s| {
            let hash = match s {
                rustls::SupportedCipherSuite::Tls12(s) => s.common.hash_provider.algorithm(),
                rustls::SupportedCipherSuite::Tls13(s) => s.common.hash_provider.algorithm(),
            };
            hash != rustls::crypto::hash::HashAlgorithm::SHA256
        });
        Arc::new(p)
    }))
}

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
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .expect("TLS 1.2")
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .expect("the certificate");
    (Arc::new(config), fingerprint)
}

/// A client that accepts the one certificate whose SHA-256 is `pin` (as `CertSha256`) and checks the handshake's
/// signature with it.
pub fn client_config(pin: &str) -> Arc<ClientConfig> {
    let provider = provider();
    let verifier = Pinned {
        pin: pin.to_string(),
        provider: Arc::clone(&provider),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .expect("TLS 1.2")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Arc::new(config)
}

#[derive(Debug)]
struct Pinned {
    pin: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if smartdev::certificate_sha256(end_entity) == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("not the pinned certificate".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
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
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
