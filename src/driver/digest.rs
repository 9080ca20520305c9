//! HTTP Digest (RFC 7616) as Shelly Gen2+ devices use it: SHA-256 (MD5 when the device asks), qop `auth`,
//! user `admin`, realm = device id. Challenge parsing splits each parameter on its first `=` only, because
//! firmware 2.x nonces are Base64 with `=` padding.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use md5::Md5;
use sha2::{Digest, Sha256};

/// The hash a challenge asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Algorithm {
    /// SHA-256 (Shelly's choice).
    Sha256,
    /// MD5 (accepted when a device asks for it).
    Md5,
}

/// A parsed `WWW-Authenticate: Digest ...` challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// Realm (the device id on Shelly).
    pub realm: String,
    /// The nonce to answer with.
    pub nonce: String,
    /// `auth` when offered (the only qop used).
    pub qop: Option<String>,
    /// Hash algorithm.
    pub algorithm: Algorithm,
    /// Whether the algorithm was named in the challenge (firmware 2.0.1 echoes it only then).
    pub algorithm_named: bool,
    /// Opaque value to echo back.
    pub opaque: Option<String>,
    /// True when the previous nonce expired (not a wrong password).
    pub stale: bool,
}

/// Splits `k=v, k="v, with comma", ...` into pairs, honouring quotes.
fn params(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq]
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = rest[eq + 1..].trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            }
        };
        out.push((key, value.trim().to_string()));
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    out
}

/// Parses a `WWW-Authenticate` value; `None` when it is not a usable Digest challenge.
pub(crate) fn parse_challenge(header: &str) -> Option<Challenge> {
    let h = header.trim();
    let (scheme, rest) = h.split_at(h.find(char::is_whitespace)?);
    if !scheme.eq_ignore_ascii_case("digest") {
        return None;
    }
    let p = params(rest);
    let get = |k: &str| p.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    let algorithm_text = get("algorithm");
    let algorithm = match algorithm_text
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("SHA-256") => Algorithm::Sha256,
        Some("MD5") => Algorithm::Md5,
        Some(_) => return None,
    };
    Some(Challenge {
        realm: get("realm").unwrap_or_default(),
        nonce: get("nonce")?,
        qop: get("qop").map(|q| {
            // `auth` if offered among several.
            if q.split(',').any(|x| x.trim() == "auth") {
                "auth".into()
            } else {
                q
            }
        }),
        algorithm,
        algorithm_named: algorithm_text.is_some(),
        opaque: get("opaque"),
        stale: get("stale").is_some_and(|s| s.eq_ignore_ascii_case("true")),
    })
}

/// Lower-case hex of the hash of `data`.
pub(crate) fn hash(algorithm: Algorithm, data: &str) -> String {
    let bytes: Vec<u8> = match algorithm {
        Algorithm::Sha256 => Sha256::digest(data.as_bytes()).to_vec(),
        Algorithm::Md5 => Md5::digest(data.as_bytes()).to_vec(),
    };
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `Authorization` header value answering `ch` for `method uri` with nonce count `nc`.
pub(crate) fn authorization(
    ch: &Challenge,
    user: &str,
    password: &str,
    method: &str,
    uri: &str,
    nc: u32,
    cnonce: &str,
) -> String {
    let a = ch.algorithm;
    let ha1 = hash(a, &format!("{user}:{}:{password}", ch.realm));
    let ha2 = hash(a, &format!("{method}:{uri}"));
    let nc_text = format!("{nc:08x}");
    let (response, qop_part) = match &ch.qop {
        Some(q) => (
            hash(
                a,
                &format!("{ha1}:{}:{nc_text}:{cnonce}:{q}:{ha2}", ch.nonce),
            ),
            format!(", qop={q}, nc={nc_text}, cnonce=\"{cnonce}\""),
        ),
        None => (hash(a, &format!("{ha1}:{}:{ha2}", ch.nonce)), String::new()),
    };
    let algorithm = if ch.algorithm_named || a == Algorithm::Md5 {
        format!(
            ", algorithm={}",
            if a == Algorithm::Md5 {
                "MD5"
            } else {
                "SHA-256"
            }
        )
    } else {
        String::new()
    };
    let opaque = ch
        .opaque
        .as_ref()
        .map(|o| format!(", opaque=\"{o}\""))
        .unwrap_or_default();
    format!(
        "Digest username=\"{user}\", realm=\"{}\", nonce=\"{}\", uri=\"{uri}\", response=\"{response}\"{qop_part}{algorithm}{opaque}",
        ch.realm, ch.nonce
    )
}

/// A client nonce nobody can predict: SipHash keyed by this process's random keys over a counter and the time.
pub(crate) fn cnonce() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let state = RandomState::new();
    let mut h = state.build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let a = h.finish();
    h.write_u64(a);
    format!("{a:016x}{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_shelly_challenges_including_padded_nonces() {
        let ch = parse_challenge(
            r#"Digest qop="auth", realm="shellyplus2pm-485519992590", nonce="QUJDRA==", algorithm=SHA-256"#,
        )
        .unwrap();
        assert_eq!(ch.realm, "shellyplus2pm-485519992590");
        assert_eq!(ch.nonce, "QUJDRA==");
        assert_eq!(ch.qop.as_deref(), Some("auth"));
        assert_eq!(ch.algorithm, Algorithm::Sha256);
        assert!(!ch.stale);
        let stale = parse_challenge(
            r#"Digest realm="r", nonce="n=", stale=true, opaque="", qop="auth,auth-int""#,
        )
        .unwrap();
        assert!(stale.stale);
        assert_eq!(stale.opaque.as_deref(), Some(""));
        assert_eq!(stale.qop.as_deref(), Some("auth"));
        assert!(!stale.algorithm_named);
        assert_eq!(parse_challenge(r#"Basic realm="x""#), None);
        assert_eq!(
            parse_challenge(r#"Digest realm="x", nonce="n", algorithm=SHA-512"#),
            None
        );
    }

    #[test]
    fn rfc_7616_md5_example() {
        // RFC 7616 §3.9.1 (MD5): user Mufasa, password "Circle of Life".
        let ch = Challenge {
            realm: "http-auth@example.org".into(),
            nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v".into(),
            qop: Some("auth".into()),
            algorithm: Algorithm::Md5,
            algorithm_named: true,
            opaque: Some("FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS".into()),
            stale: false,
        };
        let h = authorization(
            &ch,
            "Mufasa",
            "Circle of Life",
            "GET",
            "/dir/index.html",
            1,
            "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
        );
        assert!(
            h.contains("response=\"8ca523f5e9506fed4657c9700eebdbec\""),
            "{h}"
        );
        assert!(h.contains("nc=00000001") && h.contains("algorithm=MD5"));
    }

    #[test]
    fn rfc_7616_sha256_example() {
        let ch = Challenge {
            realm: "http-auth@example.org".into(),
            nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v".into(),
            qop: Some("auth".into()),
            algorithm: Algorithm::Sha256,
            algorithm_named: true,
            opaque: None,
            stale: false,
        };
        let h = authorization(
            &ch,
            "Mufasa",
            "Circle of Life",
            "GET",
            "/dir/index.html",
            1,
            "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
        );
        assert!(
            h.contains(
                "response=\"753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1\""
            ),
            "{h}"
        );
    }

    #[test]
    fn cnonces_differ() {
        assert_ne!(cnonce(), cnonce());
        assert_eq!(cnonce().len(), 32);
    }
}
