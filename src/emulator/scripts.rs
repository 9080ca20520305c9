//! A Gen2+ device's scripts (`Script.Create/List/PutCode/GetCode/GetConfig/SetConfig/GetStatus/Start/Stop/
//! Delete/Eval`): stored and listed, bounded as the firmware bounds them, but never run. `Script.Start` and
//! `Script.Eval` say so in an error (-109, as the firmware answers for a script that cannot run), and every
//! script reports `running: false`, as a stopped script does. A leaf: the dispatcher hands it the calls.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};

use super::rpc_params::{RpcError, id_param, invalid, missing, not_found, precondition};

/// Scripts a device holds at most (firmware: 10).
pub(crate) const MAX_SCRIPTS: usize = 10;
/// Longest script in bytes.
pub(crate) const MAX_CODE: usize = 20 * 1024;
/// Longest name in bytes.
const MAX_NAME: usize = 64;
/// Longest piece `Script.GetCode` returns at once (the firmware pages code too).
const CHUNK: usize = 2048;

/// The scripts of one device.
#[derive(Debug, Default)]
pub(crate) struct Scripts {
    inner: Mutex<Vec<Script>>,
    /// Counts calls: the device's status lists the scripts, so a call may have changed it.
    calls: AtomicU64,
}

#[derive(Debug, Clone)]
struct Script {
    id: u64,
    name: String,
    enable: bool,
    code: String,
}

impl Script {
    fn config(&self) -> Value {
        json!({"id": self.id, "name": self.name, "enable": self.enable})
    }

    fn status(&self) -> Value {
        json!({"id": self.id, "running": false, "mem_free": 25_200, "errors": []})
    }
}

impl Scripts {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Script>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `script:<id>` status entries (`Shelly.GetStatus`), as real devices list their scripts.
    pub(crate) fn statuses(&self) -> Vec<(String, Value)> {
        let g = self.lock();
        g.iter()
            .map(|s| (format!("script:{}", s.id), s.status()))
            .collect()
    }

    /// `script:<id>` config entries (`Shelly.GetConfig`).
    pub(crate) fn configs(&self) -> Vec<(String, Value)> {
        let g = self.lock();
        g.iter()
            .map(|s| (format!("script:{}", s.id), s.config()))
            .collect()
    }

    /// How many calls were made: a change of it says the `script:<id>` statuses may have changed.
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Answers `Script.<method>` (lower case); `RpcError::unknown()` for a method it does not have.
    pub(crate) fn call(&self, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
        let mut g = self.lock();
        self.calls.fetch_add(1, Ordering::SeqCst);
        if method == "script.list" {
            let list: Vec<Value> = g
                .iter()
                .map(|s| json!({"id": s.id, "name": s.name, "enable": s.enable, "running": false}))
                .collect();
            return Ok(json!({ "scripts": list }));
        }
        if method == "script.create" {
            let name = match p.get("name") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(n)) if n.len() <= MAX_NAME => n.clone(),
                Some(_) => return Err(invalid("name")),
            };
            if g.len() >= MAX_SCRIPTS {
                return Err(RpcError {
                    code: -108,
                    message: format!("Resource exhausted: at most {MAX_SCRIPTS} scripts"),
                });
            }
            let id = g.iter().map(|s| s.id).max().unwrap_or(0) + 1;
            g.push(Script {
                id,
                name,
                enable: false,
                code: String::new(),
            });
            return Ok(json!({ "id": id }));
        }
        let known = [
            "script.putcode",
            "script.getcode",
            "script.getconfig",
            "script.setconfig",
            "script.getstatus",
            "script.start",
            "script.stop",
            "script.delete",
            "script.eval",
        ];
        if !known.contains(&method) {
            return Err(RpcError::unknown());
        }
        let id = id_param(p, "id")?;
        let i = g
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| not_found("id", id))?;
        let s = &mut g[i];
        match method {
            "script.putcode" => {
                let code = match p.get("code") {
                    None | Some(Value::Null) => return Err(missing("code")),
                    Some(Value::String(c)) => c,
                    Some(_) => return Err(invalid("code")),
                };
                let append = matches!(p.get("append"), Some(Value::Bool(true)));
                let len = if append { s.code.len() } else { 0 } + code.len();
                if len > MAX_CODE {
                    return Err(RpcError {
                        code: -108,
                        message: format!(
                            "Resource exhausted: a script holds at most {MAX_CODE} bytes"
                        ),
                    });
                }
                if !append {
                    s.code.clear();
                }
                s.code.push_str(code);
                Ok(json!({"len": s.code.len()}))
            }
            "script.getcode" => {
                let offset = usize_param(p, "offset")?.unwrap_or(0).min(s.code.len());
                let want = usize_param(p, "len")?.unwrap_or(CHUNK).min(CHUNK);
                let mut end = (offset + want).min(s.code.len());
                while !s.code.is_char_boundary(end) {
                    end -= 1;
                }
                let mut start = offset;
                while !s.code.is_char_boundary(start) {
                    start -= 1;
                }
                let data = &s.code[start..end];
                Ok(json!({"data": data, "left": s.code.len() - end}))
            }
            "script.getconfig" => Ok(s.config()),
            "script.setconfig" => {
                let Some(Value::Object(c)) = p.get("config") else {
                    return Err(missing("config"));
                };
                if let Some(n) = c.get("name") {
                    match n {
                        Value::String(n) if n.len() <= MAX_NAME => s.name = n.clone(),
                        _ => return Err(invalid("config.name")),
                    }
                }
                if let Some(e) = c.get("enable") {
                    s.enable = e.as_bool().ok_or_else(|| invalid("config.enable"))?;
                }
                Ok(json!({"restart_required": false}))
            }
            "script.getstatus" => Ok(s.status()),
            "script.stop" => Ok(json!({"was_running": false})),
            "script.delete" => {
                g.remove(i);
                Ok(Value::Null)
            }
            "script.start" => Err(precondition(&format!(
                "Script {id} not started: the emulator stores scripts but does not run them"
            ))),
            _ => Err(precondition(&format!(
                "Script {id} is not running: the emulator stores scripts but does not run them"
            ))),
        }
    }
}

fn usize_param(p: &Map<String, Value>, name: &str) -> Result<Option<usize>, RpcError> {
    match p.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|n| Some(n as usize))
            .ok_or_else(|| invalid(name)),
    }
}
