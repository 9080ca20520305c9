//! Address resolution for device URLs. Devices are nearly always configured by IP address; ureq's default
//! resolver spawns a detached thread per request to bound the lookup time, even for IP literals — a thread
//! spawn on every request, and a thread that can outlive `Controller::close`. IP literals are answered here
//! directly; host names still go to ureq's resolver and its timeout.

use std::net::{IpAddr, SocketAddr};

use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// Literal addresses in place, names through [`DefaultResolver`].
#[derive(Debug, Default)]
pub(crate) struct LiteralFirst(DefaultResolver);

impl Resolver for LiteralFirst {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        if let Some(addr) = literal(uri) {
            let mut out = self.empty();
            out.push(addr);
            return Ok(out);
        }
        self.0.resolve(uri, config, timeout)
    }
}

/// The socket address of `uri` when its host is an IP address (IPv6 in brackets).
fn literal(uri: &Uri) -> Option<SocketAddr> {
    let authority = uri.authority()?;
    let ip: IpAddr = authority.host().trim_matches(['[', ']']).parse().ok()?;
    let port = authority.port_u16().unwrap_or(match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    });
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(url: &str) -> Option<SocketAddr> {
        literal(&url.parse().unwrap())
    }

    #[test]
    fn literals_are_resolved_in_place_and_names_are_not() {
        assert_eq!(
            of("http://192.168.1.20/status"),
            Some("192.168.1.20:80".parse().unwrap())
        );
        assert_eq!(
            of("http://127.0.0.1:8081/rpc"),
            Some("127.0.0.1:8081".parse().unwrap())
        );
        assert_eq!(
            of("http://[::1]:9000/x"),
            Some("[::1]:9000".parse().unwrap())
        );
        assert_eq!(
            of("https://[fe80::1]/x"),
            Some("[fe80::1]:443".parse().unwrap())
        );
        assert_eq!(of("http://shelly-kitchen.local/status"), None);
        assert_eq!(of("http://999.1.1.1/status"), None);
    }
}
