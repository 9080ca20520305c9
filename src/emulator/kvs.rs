//! A Gen2+ device's key-value store (`KVS.Set/Get/GetMany/List/Delete`): stored per device for as long as the
//! emulator runs (a reboot keeps it, as the firmware's flash does), bounded as the firmware bounds it. A leaf:
//! the dispatcher (`rpc.rs`) hands it the method and its parameters.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use super::rpc_params::{RpcError, missing};

/// Keys the store holds at most (the firmware's limit is of this order; a client that fills it gets -108).
pub(crate) const MAX_ITEMS: usize = 50;
/// Longest key in bytes (firmware: 42).
pub(crate) const MAX_KEY: usize = 42;
/// Longest value, as JSON text, in bytes (firmware: 253).
pub(crate) const MAX_VALUE: usize = 253;

/// The store of one device.
#[derive(Debug, Default)]
pub(crate) struct Kvs {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    items: BTreeMap<String, Item>,
    /// `sys.kvs_rev`: counts changes.
    rev: u64,
    /// Source of the next etag.
    next_tag: u64,
}

#[derive(Debug)]
struct Item {
    value: Value,
    etag: String,
}

impl Kvs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `sys.kvs_rev`.
    pub(crate) fn rev(&self) -> u64 {
        self.lock().rev
    }

    /// Answers `KVS.<method>` (lower case); `RpcError::unknown()` for a method it does not have.
    pub(crate) fn call(&self, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
        let mut g = self.lock();
        match method {
            "kvs.set" => {
                let key = key(p)?;
                let value = p.get("value").ok_or_else(|| missing("value"))?;
                if value.to_string().len() > MAX_VALUE {
                    return Err(invalid_arg(&format!("value longer than {MAX_VALUE} bytes")));
                }
                check_etag(g.items.get(&key), p)?;
                if !g.items.contains_key(&key) && g.items.len() >= MAX_ITEMS {
                    return Err(RpcError {
                        code: -108,
                        message: format!("Resource exhausted: the store holds {MAX_ITEMS} keys"),
                    });
                }
                g.next_tag += 1;
                g.rev += 1;
                let etag = format!("{:016x}", g.next_tag.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                g.items.insert(
                    key,
                    Item {
                        value: value.clone(),
                        etag: etag.clone(),
                    },
                );
                Ok(json!({"etag": etag, "rev": g.rev}))
            }
            "kvs.get" => {
                let key = key(p)?;
                let item = g.items.get(&key).ok_or_else(|| no_key(&key))?;
                Ok(json!({"etag": item.etag, "value": item.value}))
            }
            "kvs.getmany" => {
                let pattern = matcher(p)?;
                let items: Vec<Value> = g
                    .items
                    .iter()
                    .filter(|(k, _)| matches(&pattern, k))
                    .map(|(k, i)| json!({"key": k, "etag": i.etag, "value": i.value}))
                    .collect();
                let total = items.len();
                Ok(json!({"items": items, "offset": 0, "total": total}))
            }
            "kvs.list" => {
                let pattern = matcher(p)?;
                let keys: Map<String, Value> = g
                    .items
                    .iter()
                    .filter(|(k, _)| matches(&pattern, k))
                    .map(|(k, i)| (k.clone(), json!({"etag": i.etag})))
                    .collect();
                Ok(json!({"keys": keys, "rev": g.rev}))
            }
            "kvs.delete" => {
                let key = key(p)?;
                let item = g.items.get(&key).ok_or_else(|| no_key(&key))?;
                check_etag(Some(item), p)?;
                g.items.remove(&key);
                g.rev += 1;
                Ok(json!({"rev": g.rev}))
            }
            _ => Err(RpcError::unknown()),
        }
    }
}

fn invalid_arg(why: &str) -> RpcError {
    RpcError {
        code: -103,
        message: format!("Invalid argument: {why}"),
    }
}

fn key(p: &Map<String, Value>) -> Result<String, RpcError> {
    let k = match p.get("key") {
        None | Some(Value::Null) => return Err(missing("key")),
        Some(Value::String(k)) => k,
        Some(_) => return Err(invalid_arg("key must be a string")),
    };
    if k.is_empty() || k.len() > MAX_KEY {
        return Err(invalid_arg(&format!("key must be 1 to {MAX_KEY} bytes")));
    }
    Ok(k.clone())
}

fn no_key(key: &str) -> RpcError {
    RpcError {
        code: -105,
        message: format!(
            "Argument 'key', value '{}' not found!",
            crate::text::quote(key, MAX_KEY)
        ),
    }
}

/// An `etag` argument must name the stored version (optimistic locking).
fn check_etag(item: Option<&Item>, p: &Map<String, Value>) -> Result<(), RpcError> {
    match p.get("etag") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(t)) if item.is_some_and(|i| i.etag == *t) => Ok(()),
        Some(_) => Err(RpcError {
            code: -103,
            message: "Invalid argument: etag does not match the stored value".into(),
        }),
    }
}

/// `match`: a key pattern with `*` wildcards (default: every key).
fn matcher(p: &Map<String, Value>) -> Result<String, RpcError> {
    match p.get("match") {
        None | Some(Value::Null) => Ok("*".into()),
        Some(Value::String(m)) if m.len() <= MAX_KEY * 2 => Ok(m.clone()),
        Some(_) => Err(invalid_arg("match must be a short string")),
    }
}

/// Glob with `*` only, iterative (no backtracking blow-up on hostile patterns beyond O(n·m)).
fn matches(pattern: &str, key: &str) -> bool {
    let (p, k) = (pattern.as_bytes(), key.as_bytes());
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < k.len() {
        if i < p.len() && p[i] != b'*' && p[i] == k[j] {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == b'*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(matches("*", "a"));
        assert!(matches("ab*", "abc"));
        assert!(matches("*c", "abc"));
        assert!(matches("a*c", "abbbc"));
        assert!(!matches("a*d", "abc"));
        assert!(!matches("abc", "ab"));
    }
}
