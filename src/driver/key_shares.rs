//! Key exchange groups that keep a key share nobody used, for the next handshake.
//!
//! A client offering TLS 1.3 and 1.2 puts a TLS 1.3 key share in its ClientHello. A Shelly device answers
//! 1.2 (its stack has 1.3 off), and rustls then drops that key pair unused and makes another for the 1.2
//! exchange: one X25519 key generation wasted per handshake (about 20–30 µs, a tenth of what TLS adds to
//! `open`). Here a key pair that was dropped without being used goes back to a small pool, and the next
//! handshake starts from it instead of making a new one.
//!
//! Safety of the reuse: a private key still takes part in at most one key agreement, after which it is gone,
//! so forward secrecy is that of a fresh key. Before that, only its public half has been sent, to a device that
//! chose not to use it, which learns nothing from it. The one thing given away is that two ClientHellos came
//! from the same client, which their source address says anyway.

use std::sync::Mutex;

use rustls::crypto::{ActiveKeyExchange, SharedSecret, SupportedKxGroup};
use rustls::ffdhe_groups::FfdheGroup;
use rustls::{Error, NamedGroup, ProtocolVersion, SupportedProtocolVersion};

/// At most this many spare key pairs per group: the handshakes in flight at once rarely leave more.
const SPARES: usize = 64;

type Spares = Mutex<Vec<Box<dyn ActiveKeyExchange>>>;

/// A group whose unused key pairs are kept for the next handshake.
pub(crate) struct Recycled {
    inner: &'static dyn SupportedKxGroup,
    spares: &'static Spares,
}

impl std::fmt::Debug for Recycled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recycled")
            .field("group", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl Recycled {
    /// Wraps `inner`. Leaked because rustls keeps groups as `&'static`; the crypto provider makes one per
    /// group, once per process.
    pub(crate) fn leak(inner: &'static dyn SupportedKxGroup) -> &'static Self {
        Box::leak(Box::new(Self {
            inner,
            spares: Box::leak(Box::new(Mutex::new(Vec::new()))),
        }))
    }

    /// How many spare key pairs wait.
    #[cfg(test)]
    pub(crate) fn spare_count(&self) -> usize {
        self.spares.lock().map(|s| s.len()).unwrap_or(0)
    }
}

impl SupportedKxGroup for Recycled {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        let spare = self.spares.lock().ok().and_then(|mut s| s.pop());
        let kx = match spare {
            Some(kx) => kx,
            None => self.inner.start()?,
        };
        Ok(Box::new(Offered {
            kx: Some(kx),
            group: self.inner.name(),
            home: self.spares,
        }))
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        self.inner.ffdhe_group()
    }

    fn name(&self) -> NamedGroup {
        self.inner.name()
    }

    fn fips(&self) -> bool {
        self.inner.fips()
    }

    fn usable_for_version(&self, version: ProtocolVersion) -> bool {
        self.inner.usable_for_version(version)
    }
}

/// A key pair offered in a handshake: back to its group's pool when dropped without being used.
struct Offered {
    kx: Option<Box<dyn ActiveKeyExchange>>,
    group: NamedGroup,
    home: &'static Spares,
}

impl Drop for Offered {
    fn drop(&mut self) {
        if let Some(kx) = self.kx.take()
            && let Ok(mut spares) = self.home.lock()
            && spares.len() < SPARES
        {
            spares.push(kx);
        }
    }
}

impl Offered {
    /// Takes the key pair for its one agreement: it never returns to the pool.
    fn used(&mut self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        self.kx
            .take()
            .ok_or_else(|| Error::General("key share already used".into()))
    }
}

impl ActiveKeyExchange for Offered {
    fn complete(mut self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, Error> {
        self.used()?.complete(peer_pub_key)
    }

    fn complete_for_tls_version(
        mut self: Box<Self>,
        peer_pub_key: &[u8],
        tls_version: &SupportedProtocolVersion,
    ) -> Result<SharedSecret, Error> {
        self.used()?
            .complete_for_tls_version(peer_pub_key, tls_version)
    }

    fn hybrid_component(&self) -> Option<(NamedGroup, &[u8])> {
        self.kx.as_ref().and_then(|k| k.hybrid_component())
    }

    fn complete_hybrid_component(
        mut self: Box<Self>,
        peer_pub_key: &[u8],
    ) -> Result<SharedSecret, Error> {
        self.used()?.complete_hybrid_component(peer_pub_key)
    }

    fn pub_key(&self) -> &[u8] {
        self.kx.as_ref().map(|k| k.pub_key()).unwrap_or(&[])
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        self.kx.as_ref().and_then(|k| k.ffdhe_group())
    }

    fn group(&self) -> NamedGroup {
        self.group
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// X25519 (ring), counting the key pairs it makes.
    #[derive(Debug)]
    struct Counting(AtomicUsize);

    impl SupportedKxGroup for Counting {
        fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
            self.0.fetch_add(1, Ordering::SeqCst);
            rustls::crypto::ring::kx_group::X25519.start()
        }

        fn name(&self) -> NamedGroup {
            NamedGroup::X25519
        }
    }

    fn counted() -> (&'static Counting, &'static Recycled) {
        let counting: &'static Counting = Box::leak(Box::new(Counting(AtomicUsize::new(0))));
        (counting, Recycled::leak(counting))
    }

    fn peer_key() -> Vec<u8> {
        let peer = rustls::crypto::ring::kx_group::X25519.start().unwrap();
        peer.pub_key().to_vec()
    }

    #[test]
    fn a_key_pair_dropped_unused_serves_the_next_handshake() {
        let (counting, group) = counted();
        let offered = group.start().unwrap();
        let public = offered.pub_key().to_vec();
        drop(offered);
        assert_eq!(group.spare_count(), 1);
        let next = group.start().unwrap();
        assert_eq!(next.pub_key(), public.as_slice());
        assert_eq!(counting.0.load(Ordering::SeqCst), 1);
        assert_eq!(next.group(), NamedGroup::X25519);
        next.complete(&peer_key()).unwrap();
        assert_eq!(group.spare_count(), 0);
    }

    #[test]
    fn a_used_key_pair_never_comes_back() {
        let (counting, group) = counted();
        let first = group.start().unwrap();
        let public = first.pub_key().to_vec();
        first.complete(&peer_key()).unwrap();
        assert_eq!(group.spare_count(), 0);
        let second = group.start().unwrap();
        assert_ne!(second.pub_key(), public.as_slice());
        assert_eq!(counting.0.load(Ordering::SeqCst), 2);
        // A failed agreement (a bad peer key) uses it up too.
        let public = second.pub_key().to_vec();
        assert!(second.complete(&[0u8; 3]).is_err());
        let third = group.start().unwrap();
        assert_ne!(third.pub_key(), public.as_slice());
    }

    #[test]
    fn the_spares_are_bounded() {
        let (_, group) = counted();
        let many: Vec<_> = (0..SPARES + 10).map(|_| group.start().unwrap()).collect();
        drop(many);
        assert_eq!(group.spare_count(), SPARES);
    }

    /// One handshake between rustls client and server over memory; the protocol version agreed.
    #[cfg(feature = "emulator")]
    fn handshake(
        client: Arc<rustls::ClientConfig>,
        server: Arc<rustls::ServerConfig>,
    ) -> Option<ProtocolVersion> {
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut c = rustls::ClientConnection::new(client, name).unwrap();
        let mut s = rustls::ServerConnection::new(server).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            c.write_tls(&mut buf).unwrap();
            s.read_tls(&mut buf.as_slice()).unwrap();
            s.process_new_packets().unwrap();
            let mut buf = Vec::new();
            s.write_tls(&mut buf).unwrap();
            c.read_tls(&mut buf.as_slice()).unwrap();
            c.process_new_packets().unwrap();
            if !c.is_handshaking() && !s.is_handshaking() {
                return c.protocol_version();
            }
        }
        panic!("the handshake did not finish");
    }

    #[cfg(feature = "emulator")]
    fn configs(
        group: &'static Recycled,
        server_versions: &[&'static SupportedProtocolVersion],
    ) -> (Arc<rustls::ClientConfig>, Arc<rustls::ServerConfig>) {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let ca = crate::emulator::CertAuthority::new("key share test CA");
        let (cert, key) = ca.issue_pem(&["localhost"]);
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap())
            .unwrap();
        let mut provider = rustls::crypto::ring::default_provider();
        provider.kx_groups = vec![group];
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server = rustls::ServerConfig::builder_with_provider(
            rustls::crypto::ring::default_provider().into(),
        )
        .with_protocol_versions(server_versions)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
        )
        .unwrap();
        (Arc::new(client), Arc::new(server))
    }

    #[cfg(feature = "emulator")]
    #[test]
    fn a_device_answering_tls12_costs_one_key_pair_per_handshake() {
        let (counting, group) = counted();
        let (client, server) = configs(group, &[&rustls::version::TLS12]);
        let made = || counting.0.load(Ordering::SeqCst);
        // A full handshake: the key pair offered for TLS 1.3 makes the 1.2 exchange.
        assert_eq!(
            handshake(client.clone(), server.clone()),
            Some(ProtocolVersion::TLSv1_2)
        );
        assert_eq!((made(), group.spare_count()), (1, 0));
        // Resumed 1.2 handshakes exchange no key: the key pair offered is kept, and offered again.
        for _ in 0..3 {
            assert_eq!(
                handshake(client.clone(), server.clone()),
                Some(ProtocolVersion::TLSv1_2)
            );
            assert_eq!((made(), group.spare_count()), (2, 1));
        }
    }

    #[cfg(feature = "emulator")]
    #[test]
    fn a_device_answering_tls13_uses_each_key_pair_once() {
        let (counting, group) = counted();
        let (client, server) = configs(group, &[&rustls::version::TLS13]);
        // Sessions resume from the second handshake on; each still makes its own key pair (psk_dhe_ke).
        for n in 1..=3 {
            let version = handshake(client.clone(), server.clone());
            assert_eq!(version, Some(ProtocolVersion::TLSv1_3));
            assert_eq!(counting.0.load(Ordering::SeqCst), n);
            assert_eq!(group.spare_count(), 0);
        }
    }
}
