//! Gen2+ RPC errors and argument readers, shared by the dispatcher (`rpc.rs`, which re-exports them) and the
//! component modules it dispatches to (`rpc_cover.rs`, `rpc_light.rs`, ...): a leaf, so those modules do not
//! depend on the dispatcher.

use serde_json::{Map, Value, json};

/// An RPC error object.
#[derive(Debug, PartialEq)]
pub(crate) struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub(crate) fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

pub(crate) fn missing(name: &str) -> RpcError {
    RpcError {
        code: -103,
        message: format!("Missing required argument '{name}'!"),
    }
}

pub(crate) fn invalid(name: &str) -> RpcError {
    RpcError {
        code: -103,
        message: format!("Invalid argument '{name}'!"),
    }
}

pub(crate) fn not_found(name: &str, value: u64) -> RpcError {
    RpcError {
        code: -105,
        message: format!("Argument '{name}', value {value} not found!"),
    }
}

pub(crate) fn id_param(p: &Map<String, Value>, name: &str) -> Result<u64, RpcError> {
    match p.get(name) {
        None | Some(Value::Null) => Err(missing(name)),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .ok_or_else(|| invalid(name)),
    }
}

/// The `id` argument as an index below `n`, with ids starting at `base` (add-on components: 100).
pub(crate) fn index(p: &Map<String, Value>, base: u64, n: usize) -> Result<usize, RpcError> {
    let id = id_param(p, "id")?;
    match id.checked_sub(base) {
        Some(i) if (i as usize) < n => Ok(i as usize),
        _ => Err(not_found("id", id)),
    }
}

pub(crate) fn bool_param(p: &Map<String, Value>, name: &str) -> Result<bool, RpcError> {
    match p.get(name) {
        None | Some(Value::Null) => Err(missing(name)),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(_) => Err(invalid(name)),
    }
}

/// An optional number argument (numbers or numeric strings); `None` when absent or null.
pub(crate) fn opt_number(p: &Map<String, Value>, name: &str) -> Result<Option<f64>, RpcError> {
    match p.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .filter(|x: &f64| x.is_finite())
            .map(Some)
            .ok_or_else(|| invalid(name)),
    }
}

/// A request the component cannot take in its current state.
pub(crate) fn precondition(message: &str) -> RpcError {
    RpcError {
        code: -109,
        message: message.to_string(),
    }
}
