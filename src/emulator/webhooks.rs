//! Installed webhooks (RPC `Webhook.*` and Gen1 action URLs share one store) and the outgoing GET that fires
//! them.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::url;

/// Most hooks an RPC device accepts.
pub(crate) const MAX_HOOKS: usize = 20;
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// One installed hook, as `Webhook.List` shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hook {
    pub id: u64,
    pub cid: usize,
    pub enable: bool,
    pub event: String,
    pub name: Option<String>,
    pub ssl_ca: Option<String>,
    pub urls: Vec<String>,
    pub condition: Option<String>,
    pub repeat_period: i64,
}

impl Hook {
    /// A new enabled hook without URLs (the id is assigned on insertion).
    pub(crate) fn new(event: &str, cid: usize) -> Self {
        Hook {
            id: 0,
            cid,
            enable: true,
            event: event.to_string(),
            name: None,
            ssl_ca: None,
            urls: Vec::new(),
            condition: None,
            repeat_period: 0,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "cid": self.cid,
            "enable": self.enable,
            "event": self.event,
            "name": self.name,
            "ssl_ca": self.ssl_ca,
            "urls": self.urls,
            "condition": self.condition,
            "repeat_period": self.repeat_period,
        })
    }
}

/// The hooks of one device and their revision counter (`sys.webhook_rev`).
#[derive(Debug, Default)]
pub(crate) struct HookStore {
    pub hooks: Vec<Hook>,
    pub rev: u64,
    next_id: u64,
}

impl HookStore {
    /// Adds a hook with a fresh id; returns the id.
    pub(crate) fn insert(&mut self, mut hook: Hook) -> u64 {
        self.next_id += 1;
        hook.id = self.next_id;
        self.hooks.push(hook);
        self.rev += 1;
        self.next_id
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut Hook> {
        self.hooks.iter_mut().find(|h| h.id == id)
    }

    /// Records a change made through `get_mut`; returns the new revision.
    pub(crate) fn touch(&mut self) -> u64 {
        self.rev += 1;
        self.rev
    }

    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let before = self.hooks.len();
        self.hooks.retain(|h| h.id != id);
        let removed = self.hooks.len() != before;
        if removed {
            self.rev += 1;
        }
        removed
    }

    pub(crate) fn clear(&mut self) {
        self.hooks.clear();
        self.rev += 1;
    }

    pub(crate) fn list(&self) -> Vec<Value> {
        self.hooks.iter().map(Hook::to_json).collect()
    }

    /// URLs of every enabled hook for `event` on component `cid`, in installation order.
    pub(crate) fn urls(&self, event: &str, cid: usize) -> Vec<String> {
        self.hooks
            .iter()
            .filter(|h| h.enable && h.event == event && h.cid == cid)
            .flat_map(|h| h.urls.iter().cloned())
            .collect()
    }

    /// Gen1: sets action `name` of channel `index` (one hook per name and channel; no URLs removes it).
    pub(crate) fn set_action(
        &mut self,
        name: &str,
        index: usize,
        enabled: bool,
        urls: Vec<String>,
    ) {
        let Some(event) = gen1_event(name) else {
            return;
        };
        let pos = self
            .hooks
            .iter()
            .position(|h| h.cid == index && h.name.as_deref() == Some(name));
        match (pos, urls.is_empty()) {
            (Some(p), true) => {
                self.hooks.remove(p);
                self.rev += 1;
            }
            (Some(p), false) => {
                self.hooks[p].enable = enabled;
                self.hooks[p].urls = urls;
                self.rev += 1;
            }
            (None, true) => {}
            (None, false) => {
                let mut h = Hook::new(event, index);
                h.name = Some(name.to_string());
                h.enable = enabled;
                h.urls = urls;
                self.insert(h);
            }
        }
    }

    /// Gen1: the hook behind action `name` of channel `index`.
    pub(crate) fn action(&self, name: &str, index: usize) -> Option<&Hook> {
        self.hooks
            .iter()
            .find(|h| h.cid == index && h.name.as_deref() == Some(name))
    }
}

/// Which channel count a Gen1 action's index runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Channel {
    /// Inputs (buttons).
    Input,
    /// Relays.
    Output,
}

/// Gen1 action names, the RPC event each stands for, and what its index counts.
pub(crate) const GEN1_ACTIONS: [(&str, &str, Channel); 6] = [
    ("btn_on_url", "input.toggle_on", Channel::Input),
    ("btn_off_url", "input.toggle_off", Channel::Input),
    ("shortpush_url", "input.button_push", Channel::Input),
    ("longpush_url", "input.button_longpush", Channel::Input),
    ("out_on_url", "switch.on", Channel::Output),
    ("out_off_url", "switch.off", Channel::Output),
];

pub(crate) fn gen1_event(action: &str) -> Option<&'static str> {
    GEN1_ACTIONS
        .iter()
        .find(|(a, _, _)| *a == action)
        .map(|(_, e, _)| *e)
}

/// Sends `GET` to an `http://` URL and waits briefly for the answer. True when the request was delivered.
pub(crate) fn call(target_url: &str) -> bool {
    match try_call(target_url) {
        Ok(()) => true,
        Err(e) => {
            log::warn!("emulator: webhook {target_url} failed: {e}");
            false
        }
    }
}

fn try_call(target_url: &str) -> Result<(), String> {
    let rest = target_url
        .strip_prefix("http://")
        .ok_or("only http:// URLs are supported")?;
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(split);
    let target = match target.chars().next() {
        None => "/".to_string(),
        Some('?') => format!("/{target}"),
        Some(_) => target.to_string(),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let with_port = if host.ends_with(']') || !host.contains(':') {
        format!("{host}:80")
    } else {
        host.to_string()
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or(format!("cannot resolve {host}"))?;
    let mut s = TcpStream::connect_timeout(&addr, CALL_TIMEOUT).map_err(|e| e.to_string())?;
    // Every emulator socket sends at once (a request is one write anyway).
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(CALL_TIMEOUT));
    let _ = s.set_write_timeout(Some(CALL_TIMEOUT));
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: smartdev-emulator\r\nConnection: close\r\n\r\n",
        url::encode_target(&target)
    );
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    // Read the answer (or until the peer closes) so that closing does not reset a request not yet read.
    let deadline = Instant::now() + CALL_TIMEOUT;
    let mut buf = [0u8; 4096];
    let mut got = 0;
    while Instant::now() < deadline && got < 64 * 1024 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_ids_revisions_and_matching() {
        let mut s = HookStore::default();
        let mut h = Hook::new("switch.on", 0);
        h.urls = vec!["http://a".into(), "http://b".into()];
        assert_eq!(s.insert(h.clone()), 1);
        h.cid = 1;
        assert_eq!(s.insert(h), 2);
        assert_eq!(s.rev, 2);
        assert_eq!(s.urls("switch.on", 0), ["http://a", "http://b"]);
        s.get_mut(1).unwrap().enable = false;
        assert_eq!(s.touch(), 3);
        assert!(s.urls("switch.on", 0).is_empty());
        assert!(s.remove(2));
        assert!(!s.remove(2));
        s.clear();
        assert_eq!((s.hooks.len(), s.rev), (0, 5));
        assert_eq!(s.insert(Hook::new("x", 0)), 3, "ids are never reused");
    }

    #[test]
    fn gen1_actions_map_to_events() {
        let mut s = HookStore::default();
        s.set_action("out_on_url", 1, true, vec!["http://x/on".into()]);
        assert_eq!(s.urls("switch.on", 1), ["http://x/on"]);
        s.set_action("out_on_url", 1, false, vec!["http://x/on2".into()]);
        assert_eq!(s.hooks.len(), 1);
        assert!(s.urls("switch.on", 1).is_empty());
        s.set_action("out_on_url", 1, true, vec![]);
        assert!(s.hooks.is_empty());
        assert_eq!(gen1_event("longpush_url"), Some("input.button_longpush"));
        assert_eq!(gen1_event("report_url"), None);
    }
}
