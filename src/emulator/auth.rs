//! Device authentication as real devices do it, per family:
//!
//! - Shelly Gen1: HTTP Basic on everything but `/shelly`.
//! - Shelly Gen2+: HTTP Digest (RFC 7616, user `admin`, realm = device id, `qop="auth"`, SHA-256 or MD5) on
//!   `/rpc` and `/rpc/<Method>`, except `Shelly.GetDeviceInfo`; `/shelly` stays open. Firmware 2.x nonce rules
//!   (opaque Base64 nonces reused with a rising `nc`, a lifetime, 32 slots, 429 with a 2 s throttle window) or
//!   pre-2.0 ones (numeric nonces, one request each).
//! - Tasmota: `user=` and `password=` query parameters on `/cm`.
//!
//! Every refused request is answered here, before the family's handler runs; it has already been counted under
//! its endpoint by the server.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use md5::Md5;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::DeviceSpec;
use super::clock::EmuClock;
use super::family::Family;
use super::server::{Request, Response};

/// Nonce slots of firmware 2.x: a challenge holds one until its nonce expires.
pub(crate) const SLOTS: usize = 32;
/// After a 429 every new challenge is refused for this long.
pub(crate) const THROTTLE: Duration = Duration::from_secs(2);
/// Expired nonces remembered (beyond the live ones) so that a client using one gets `stale=true`.
const REMEMBER_EXPIRED: usize = 256;
/// Firmware before 2.0 has no slot limit; outstanding unused nonces beyond this are forgotten, oldest first.
const FW1_OUTSTANDING: usize = 1024;
/// The Gen2+ digest user.
const DIGEST_USER: &str = "admin";
/// The default Gen1 and Tasmota user.
pub(crate) const DEFAULT_USER: &str = "admin";
/// The default nonce lifetime.
pub(crate) const DEFAULT_NONCE_LIFETIME: Duration = Duration::from_secs(3600);

/// Gen2+ nonce rules, by firmware.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthMode {
    /// Firmware 2.x: opaque Base64 nonces that live [`DeviceSpec::nonce_lifetime`] and may be reused with a
    /// rising `nc` (starting at `00000001`); expired → `stale=true`; 32 nonce slots, then `429 Too Many
    /// Requests` for a 2 s throttle window.
    #[default]
    Fw2,
    /// Firmware before 2.0: numeric (timestamp-like) nonces, each good for one successful request (`nc` is
    /// ignored); no slot limit.
    Fw1,
}

/// Authentication counters of one device since start (see [`super::Emulator::auth_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuthStats {
    /// Requests refused with a challenge: every 401 (Gen2+: each carries a new nonce; Gen1: the Basic
    /// challenge) and every Tasmota `WARNING` answer. Includes the `rejected` and `stale` ones; excludes 429s.
    pub challenges: u64,
    /// Requests let through by valid credentials (open endpoints are not counted).
    pub accepted: u64,
    /// Credentials presented but wrong: bad password, user, realm, `uri`, `qop` or `algorithm`, or a malformed
    /// `Authorization`.
    pub rejected: u64,
    /// Correct digests on an expired nonce (answered `stale=true`).
    pub stale: u64,
    /// `429 Too Many Requests` answers.
    pub throttled: u64,
    /// Live nonces: firmware 2.x slots taken, pre-2.0 outstanding unused nonces. 0 for Gen1 and Tasmota.
    pub nonces_in_use: usize,
}

/// How a family protects itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    Basic,
    Digest,
    Tasmota,
}

/// Rejects auth options that do not apply to the device's family.
pub(crate) fn validate(index: usize, spec: &DeviceSpec, family: Family) -> Result<(), String> {
    let name = format!("device {index} ({})", spec.model);
    if family == Family::Rpc && spec.username.as_deref().is_some_and(|u| u != DIGEST_USER) {
        return Err(format!(
            "{name}: username applies to Shelly Gen1 and Tasmota only; Gen2+ devices always use 'admin'"
        ));
    }
    if family != Family::Rpc {
        if spec.auth_mode != AuthMode::Fw2 {
            return Err(format!("{name}: auth_mode applies to Shelly Gen2+ only"));
        }
        if spec.digest_md5 {
            return Err(format!("{name}: digest_md5 applies to Shelly Gen2+ only"));
        }
        if spec.nonce_lifetime != DEFAULT_NONCE_LIFETIME {
            return Err(format!(
                "{name}: nonce_lifetime applies to Shelly Gen2+ only"
            ));
        }
    }
    if family != Family::Tasmota && spec.tasmota_old_auth {
        return Err(format!("{name}: tasmota_old_auth applies to Tasmota only"));
    }
    if spec.nonce_lifetime.is_zero() {
        return Err(format!("{name}: nonce_lifetime must be longer than 0"));
    }
    if let Some(u) = &spec.username
        && (u.is_empty() || u.contains(':'))
    {
        return Err(format!(
            "{name}: the username must not be empty or contain ':'"
        ));
    }
    Ok(())
}

/// One issued nonce.
struct Nonce {
    value: String,
    expires: Instant,
    /// The highest `nc` accepted so far; 0 = not used yet.
    last_nc: u32,
}

struct State {
    password: Option<String>,
    /// Issued nonces, oldest first: the live ones plus some expired ones.
    nonces: Vec<Nonce>,
    throttle_until: Option<Instant>,
    last_numeric: u64,
    stats: AuthStats,
}

/// The auth side of one device.
pub(crate) struct Auth {
    /// Nonce lifetimes, throttle windows and numeric nonces follow it.
    clock: EmuClock,
    scheme: Scheme,
    realm: String,
    username: String,
    mode: AuthMode,
    lifetime: Duration,
    md5: bool,
    tasmota_old: bool,
    state: Mutex<State>,
}

/// Why a request is refused.
enum Refusal {
    /// 401 with a new challenge (Digest: a new nonce).
    Challenge { nonce: String, stale: bool },
    /// 429.
    Throttled,
}

impl Auth {
    pub(crate) fn new(family: Family, spec: &DeviceSpec, realm: &str, clock: EmuClock) -> Self {
        let scheme = match family {
            Family::Gen1 => Scheme::Basic,
            Family::Rpc => Scheme::Digest,
            Family::Tasmota => Scheme::Tasmota,
        };
        Auth {
            clock,
            scheme,
            realm: realm.to_string(),
            username: spec
                .username
                .clone()
                .unwrap_or_else(|| DEFAULT_USER.to_string()),
            mode: spec.auth_mode,
            lifetime: spec.nonce_lifetime,
            md5: spec.digest_md5,
            tasmota_old: spec.tasmota_old_auth,
            state: Mutex::new(State {
                password: spec.password.clone(),
                nonces: Vec::new(),
                throttle_until: None,
                last_numeric: 0,
                stats: AuthStats::default(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when a password is set.
    pub(crate) fn enabled(&self) -> bool {
        self.lock().password.is_some()
    }

    /// The Basic / Tasmota user (Gen2+: always `admin`).
    pub(crate) fn username(&self) -> &str {
        if self.scheme == Scheme::Digest {
            DIGEST_USER
        } else {
            &self.username
        }
    }

    /// Sets or (with `None`) removes the password. Issued nonces and the throttle window are forgotten, as on a
    /// device that restarts its HTTP server.
    pub(crate) fn set_password(&self, password: Option<&str>) {
        let mut st = self.lock();
        st.password = password.map(str::to_string);
        st.nonces.clear();
        st.throttle_until = None;
    }

    pub(crate) fn stats(&self) -> AuthStats {
        let now = self.clock.instant();
        let st = self.lock();
        let mut stats = st.stats;
        stats.nonces_in_use = live(&st, now);
        stats
    }

    fn algorithm(&self) -> &'static str {
        if self.md5 { "MD5" } else { "SHA-256" }
    }

    fn hash(&self, text: &str) -> String {
        if self.md5 {
            hex(&Md5::digest(text.as_bytes()))
        } else {
            hex(&Sha256::digest(text.as_bytes()))
        }
    }

    // ---- Gen1: Basic ----

    fn check_basic(&self, st: &mut State, req: &Request) -> bool {
        let Some(password) = st.password.as_deref() else {
            return true;
        };
        match req.header("authorization").and_then(basic_credentials) {
            Some((u, p)) if u == self.username && p == password => {
                st.stats.accepted += 1;
                return true;
            }
            Some(_) => st.stats.rejected += 1,
            None => {}
        }
        st.stats.challenges += 1;
        false
    }

    // ---- Tasmota: query parameters ----

    fn check_tasmota(&self, st: &mut State, req: &Request) -> bool {
        let Some(password) = st.password.as_deref() else {
            return true;
        };
        match (req.param("user"), req.param("password")) {
            (Some(u), Some(p)) if u == self.username && p == password => {
                st.stats.accepted += 1;
                return true;
            }
            (None, None) => {}
            _ => st.stats.rejected += 1,
        }
        st.stats.challenges += 1;
        false
    }

    // ---- Gen2+: Digest ----

    /// Ok when the request may go on.
    fn check_digest(&self, st: &mut State, req: &Request, now: Instant) -> Result<(), Refusal> {
        let Some(password) = st.password.clone() else {
            return Ok(());
        };
        let Some(p) = req.header("authorization").and_then(digest_params) else {
            return self.challenge(st, now, false);
        };
        let get = |k: &str| {
            p.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.as_str())
        };
        let (Some(user), Some(realm), Some(nonce), Some(uri), Some(response)) = (
            get("username"),
            get("realm"),
            get("nonce"),
            get("uri"),
            get("response"),
        ) else {
            st.stats.rejected += 1;
            return self.challenge(st, now, false);
        };
        let (qop, nc, cnonce) = (
            get("qop").unwrap_or(""),
            get("nc").unwrap_or(""),
            get("cnonce").unwrap_or(""),
        );
        // Firmware before 2.0 effectively ignores nc (it still enters the hash).
        let nc_value = match self.mode {
            AuthMode::Fw2 => (nc.len() == 8)
                .then(|| u32::from_str_radix(nc, 16).ok())
                .flatten(),
            AuthMode::Fw1 => (!nc.is_empty()).then_some(0),
        };
        let algorithm_ok =
            get("algorithm").is_none_or(|a| a.eq_ignore_ascii_case(self.algorithm()));
        let well_formed = user == DIGEST_USER
            && realm == self.realm
            && uri == req.target
            && qop == "auth"
            && !cnonce.is_empty()
            && nc_value.is_some()
            && algorithm_ok;
        let ha1 = self.hash(&format!("{DIGEST_USER}:{}:{password}", self.realm));
        let ha2 = self.hash(&format!("{}:{}", req.method, req.target));
        let expected = self.hash(&format!("{ha1}:{nonce}:{nc}:{cnonce}:{qop}:{ha2}"));
        if !well_formed || !response.eq_ignore_ascii_case(&expected) {
            st.stats.rejected += 1;
            return self.challenge(st, now, false);
        }
        self.accept_nonce(st, nonce, nc_value, now)
    }

    /// The nonce rules once the digest itself is right: known, not expired, `nc` rising (firmware 2.x) or the
    /// nonce unused (before 2.0).
    fn accept_nonce(
        &self,
        st: &mut State,
        nonce: &str,
        nc_value: Option<u32>,
        now: Instant,
    ) -> Result<(), Refusal> {
        let Some(i) = st.nonces.iter().position(|n| n.value == nonce) else {
            // Not ours (e.g. from before a restart or a password change): a new challenge.
            return self.challenge(st, now, false);
        };
        if st.nonces[i].expires <= now {
            st.stats.stale += 1;
            return self.challenge(st, now, true);
        }
        match self.mode {
            AuthMode::Fw2 => {
                let nc = nc_value.unwrap_or(0);
                let last = st.nonces[i].last_nc;
                let fresh = if last == 0 { nc == 1 } else { nc > last };
                if !fresh {
                    return self.challenge(st, now, false);
                }
                st.nonces[i].last_nc = nc;
            }
            AuthMode::Fw1 => {
                st.nonces.remove(i);
            }
        }
        st.stats.accepted += 1;
        Ok(())
    }

    /// A new nonce, or a 429 when firmware 2.x has no free slot (or is inside its throttle window).
    fn challenge(&self, st: &mut State, now: Instant, stale: bool) -> Result<(), Refusal> {
        prune(st, now);
        if self.mode == AuthMode::Fw2 {
            let throttled = st.throttle_until.is_some_and(|t| now < t);
            if throttled || live(st, now) >= SLOTS {
                if !throttled {
                    st.throttle_until = Some(now + THROTTLE);
                }
                st.stats.throttled += 1;
                return Err(Refusal::Throttled);
            }
        } else if live(st, now) >= FW1_OUTSTANDING
            && let Some(i) = st.nonces.iter().position(|n| n.expires > now)
        {
            st.nonces.remove(i);
        }
        let value = loop {
            let v = match self.mode {
                AuthMode::Fw2 => BASE64.encode(random_bytes()),
                AuthMode::Fw1 => {
                    let secs = self.clock.unix().max(0.0) as u64;
                    st.last_numeric = secs.max(st.last_numeric + 1);
                    st.last_numeric.to_string()
                }
            };
            if !st.nonces.iter().any(|n| n.value == v) {
                break v;
            }
        };
        st.nonces.push(Nonce {
            value: value.clone(),
            expires: now + self.lifetime,
            last_nc: 0,
        });
        st.stats.challenges += 1;
        Err(Refusal::Challenge {
            nonce: value,
            stale,
        })
    }

    fn www_authenticate(&self, nonce: &str, stale: bool) -> String {
        let mut h = format!(
            "Digest qop=\"auth\", realm=\"{}\", nonce=\"{nonce}\", algorithm={}",
            self.realm,
            self.algorithm()
        );
        if stale {
            h.push_str(", stale=true");
        }
        h
    }

    /// The JSON text real devices put into the `message` of a 401 RPC error.
    fn rpc_message(&self, nonce: &str, stale: bool) -> String {
        let nonce = match self.mode {
            AuthMode::Fw1 => nonce.to_string(),
            AuthMode::Fw2 => Value::String(nonce.to_string()).to_string(),
        };
        let stale = if stale { ", \"stale\": true" } else { "" };
        format!(
            "{{\"auth_type\": \"digest\", \"nonce\": {nonce}, \"nc\": 1, \"realm\": {}, \"algorithm\": \"{}\"{stale}}}",
            Value::String(self.realm.clone()),
            self.algorithm()
        )
    }
}

impl Auth {
    /// In-frame digest (WebSocket RPC): the frame's `auth` object (`realm`, `username`, `nonce`, `cnonce`,
    /// `response`, `algorithm`, optional `nc`, default 1); HA2 is the hash of `dummy_method:dummy_uri`.
    fn check_frame(
        &self,
        st: &mut State,
        auth: Option<&Value>,
        now: Instant,
    ) -> Result<(), Refusal> {
        let Some(password) = st.password.clone() else {
            return Ok(());
        };
        let Some(a) = auth.and_then(Value::as_object) else {
            return self.challenge(st, now, false);
        };
        // Numbers (pre-2.0 nonces, numeric cnonces) as their decimal text.
        let text = |k: &str| match a.get(k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) if n.is_u64() => Some(n.to_string()),
            _ => None,
        };
        let (Some(user), Some(realm), Some(nonce), Some(cnonce), Some(response)) = (
            text("username"),
            text("realm"),
            text("nonce"),
            text("cnonce"),
            text("response"),
        ) else {
            st.stats.rejected += 1;
            return self.challenge(st, now, false);
        };
        let nc = match a.get("nc") {
            None => Some(1),
            Some(v) => v.as_u64().and_then(|n| u32::try_from(n).ok()),
        };
        let algorithm_ok =
            text("algorithm").is_none_or(|x| x.eq_ignore_ascii_case(self.algorithm()));
        let ha1 = self.hash(&format!("{DIGEST_USER}:{}:{password}", self.realm));
        let ha2 = self.hash("dummy_method:dummy_uri");
        let expected = nc.map(|n| self.hash(&format!("{ha1}:{nonce}:{n}:{cnonce}:auth:{ha2}")));
        let right = user == DIGEST_USER
            && realm == self.realm
            && algorithm_ok
            && !cnonce.is_empty()
            && expected.is_some_and(|e| response.eq_ignore_ascii_case(&e));
        if !right {
            st.stats.rejected += 1;
            return self.challenge(st, now, false);
        }
        let nc_value = match self.mode {
            AuthMode::Fw2 => nc,
            AuthMode::Fw1 => Some(0),
        };
        self.accept_nonce(st, &nonce, nc_value, now)
    }
}

/// The error object refusing a WebSocket request frame; `None` lets it through (no password, or
/// `Shelly.GetDeviceInfo`).
pub(crate) fn guard_frame(auth: &Auth, frame: &Map<String, Value>) -> Option<Value> {
    let method = frame.get("method").and_then(Value::as_str).unwrap_or("");
    if auth.scheme != Scheme::Digest || method.eq_ignore_ascii_case("Shelly.GetDeviceInfo") {
        return None;
    }
    let mut st = auth.lock();
    let refusal = auth
        .check_frame(&mut st, frame.get("auth"), auth.clock.instant())
        .err()?;
    drop(st);
    Some(match refusal {
        Refusal::Challenge { nonce, stale } => {
            json!({"code": 401, "message": auth.rpc_message(&nonce, stale)})
        }
        Refusal::Throttled => json!({"code": 429, "message": "Too many requests"}),
    })
}

/// Live (unexpired) nonces.
fn live(st: &State, now: Instant) -> usize {
    st.nonces.iter().filter(|n| n.expires > now).count()
}

/// Forgets the oldest expired nonces beyond what is remembered for `stale` answers.
fn prune(st: &mut State, now: Instant) {
    let expired = st.nonces.len() - live(st, now);
    let mut drop = expired.saturating_sub(REMEMBER_EXPIRED);
    st.nonces.retain(|n| {
        if drop > 0 && n.expires <= now {
            drop -= 1;
            false
        } else {
            true
        }
    });
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 16 unpredictable-enough bytes for an emulator (std's randomly keyed SipHash over a counter and the clock).
fn random_bytes() -> [u8; 16] {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut out = [0u8; 16];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.write_u128(nanos);
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

/// `Basic <base64(user:password)>` → (user, password).
fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = BASE64.decode(rest.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// The parameters of `Digest k=v, k="v", ...`; values unquoted. Splits each on its first `=` only (Base64
/// nonces end in `=`).
pub(crate) fn digest_params(header: &str) -> Option<Vec<(String, String)>> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("digest") {
        return None;
    }
    let mut out = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if chars.next() != Some('=') {
            return None;
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
            value = value.trim_end().to_string();
        }
        out.push((key.trim().to_string(), value));
    }
}

// ---- which requests are protected, and the refusals ----

/// The RPC method of a request, if it is one.
fn rpc_method(req: &Request) -> Option<String> {
    if req.path == "/rpc" && req.method == "POST" {
        return req
            .json_body()
            .and_then(|v| v.get("method")?.as_str().map(str::to_string));
    }
    req.path.strip_prefix("/rpc/").map(str::to_string)
}

fn protected(family: Family, req: &Request) -> bool {
    match family {
        Family::Gen1 => req.path.trim_end_matches('/') != "/shelly",
        Family::Tasmota => req.path == "/cm",
        Family::Rpc => {
            let is_rpc =
                (req.path == "/rpc" && req.method == "POST") || req.path.starts_with("/rpc/");
            is_rpc
                && !rpc_method(req).is_some_and(|m| m.eq_ignore_ascii_case("Shelly.GetDeviceInfo"))
        }
    }
}

/// The answer for a request that auth refuses; `None` lets it through. `device_id` is the device's `src`.
pub(crate) fn guard(
    auth: &Auth,
    family: Family,
    device_id: &str,
    req: &Request,
) -> Option<Response> {
    if !protected(family, req) {
        return None;
    }
    let mut st = auth.lock();
    match auth.scheme {
        Scheme::Basic => (!auth.check_basic(&mut st, req)).then(|| {
            Response::text(401, "401 Unauthorized").with_header(
                "WWW-Authenticate",
                format!("Basic realm=\"{}\"", auth.realm),
            )
        }),
        Scheme::Tasmota => (!auth.check_tasmota(&mut st, req)).then(|| {
            let status = if auth.tasmota_old { 200 } else { 401 };
            Response::json(
                status,
                &json!({"WARNING": "Need user=<username>&password=<password>"}),
            )
        }),
        Scheme::Digest => {
            let refusal = auth
                .check_digest(&mut st, req, auth.clock.instant())
                .err()?;
            drop(st);
            Some(digest_refusal(auth, device_id, req, &refusal))
        }
    }
}

fn digest_refusal(auth: &Auth, device_id: &str, req: &Request, refusal: &Refusal) -> Response {
    let (status, error, header) = match refusal {
        Refusal::Challenge { nonce, stale } => (
            401,
            json!({"code": 401, "message": auth.rpc_message(nonce, *stale)}),
            Some(auth.www_authenticate(nonce, *stale)),
        ),
        Refusal::Throttled => (
            429,
            json!({"code": 429, "message": "Too many requests"}),
            None,
        ),
    };
    let body = if req.path == "/rpc" {
        // A whole frame, like the device's other /rpc answers.
        let f = req.json_body().unwrap_or(&Value::Null);
        let mut out = Map::new();
        out.insert("id".into(), f.get("id").cloned().unwrap_or(Value::Null));
        out.insert("src".into(), json!(device_id));
        if let Some(src) = f.get("src") {
            out.insert("dst".into(), src.clone());
        }
        out.insert("error".into(), error);
        Value::Object(out)
    } else {
        error
    };
    let r = Response::json(status, &body);
    match header {
        Some(h) => r.with_header("WWW-Authenticate", h),
        None => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_params_split_on_the_first_equals_and_unquote() {
        let p = digest_params(
            r#"Digest qop="auth", realm="shellyplus2pm-a", nonce="q83v7w+/AQ==",algorithm=SHA-256, nc=00000001, x="a\"b,c""#,
        )
        .unwrap();
        let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("nonce"), Some("q83v7w+/AQ=="));
        assert_eq!(get("realm"), Some("shellyplus2pm-a"));
        assert_eq!(get("algorithm"), Some("SHA-256"));
        assert_eq!(get("nc"), Some("00000001"));
        assert_eq!(get("x"), Some("a\"b,c"));
        assert!(digest_params("Basic abc").is_none());
        assert!(digest_params("Digest realm=\"open").is_none());
    }

    #[test]
    fn basic_credentials_decode() {
        assert_eq!(
            basic_credentials("Basic YWRtaW46cGE6c3M="),
            Some(("admin".into(), "pa:ss".into()))
        );
        assert_eq!(basic_credentials("Digest x=1"), None);
        assert_eq!(basic_credentials("Basic !!"), None);
    }

    #[test]
    fn rfc7616_sha256_vector() {
        // RFC 7616 section 3.9.1 (SHA-256, qop=auth).
        let h = |s: &str| hex(&Sha256::digest(s.as_bytes()));
        let ha1 = h("Mufasa:http-auth@example.org:Circle of Life");
        let ha2 = h("GET:/dir/index.html");
        let nonce = "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v";
        let cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
        let r = h(&format!("{ha1}:{nonce}:00000001:{cnonce}:auth:{ha2}"));
        assert_eq!(
            r,
            "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"
        );
    }
}
