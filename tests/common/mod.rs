//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "smartdev-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }

    /// Writes `text` to `name` inside the directory and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `f` every 10 ms until it holds or `limit` passes (a hang guard, never a timing assertion); returns
/// whether it held. Every test that waits for something another thread does uses this one.
pub fn eventually(limit: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    f()
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Writes a JSON file.
pub fn write_json(path: &Path, v: &serde_json::Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// Names of this process's live threads whose name starts with `prefix` (Linux). A thread that is exiting
/// is not counted: `join` returns once the kernel has released the thread's stack, which is before it leaves
/// `/proc/self/task`, so a joined thread can still be listed there for a moment (flag `PF_EXITING` is set by
/// then, and is what tells it apart from a thread that was not joined).
pub fn threads_named(prefix: &str) -> Vec<String> {
    const PF_EXITING: u64 = 0x4;
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc/self/task") {
        for e in entries.flatten() {
            let Ok(name) = std::fs::read_to_string(e.path().join("comm")) else {
                continue;
            };
            let name = name.trim().to_string();
            if !name.starts_with(prefix) {
                continue;
            }
            // `stat`: "tid (comm) state ppid pgrp session tty tpgid flags ..."; comm may hold spaces.
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue; // gone meanwhile
            };
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let mut fields = after.split_whitespace();
            let state = fields.next().unwrap_or("");
            let flags: u64 = fields.nth(5).and_then(|f| f.parse().ok()).unwrap_or(0);
            if flags & PF_EXITING != 0 || state == "X" || state == "Z" {
                continue;
            }
            out.push(name);
        }
    }
    out
}
pub mod emu;
pub mod hostile;
pub mod mosquitto;
pub mod netns;
pub mod raw_http;

/// Runs a nested `cargo build` with `args` in the repository (plain `cargo test` builds neither the C
/// libraries nor the examples) and returns the debug output directory.
pub fn cargo_build(args: &[&str]) -> PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .arg("build")
        .arg("--quiet")
        .args(args)
        .current_dir(root)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build {args:?} failed");
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(root).join("target"))
        .join("debug")
}

/// Runs test `test` of this test binary alone in a child process (with `env` set, which the child test waits
/// for) and returns the numbers it printed after `tag`: a count of the process's threads, say, that only a
/// process of its own sees undisturbed by the other tests.
pub fn child_report(test: &str, env: &str, tag: &str) -> Vec<usize> {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(env, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.split(tag)
        .nth(1)
        .unwrap_or_else(|| panic!("the child printed no {tag:?}: {text}"))
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}
