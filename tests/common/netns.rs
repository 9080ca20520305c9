//! A virtual LAN of Linux network namespaces, so tests can put devices and the controller on "other
//! machines" without sending a packet to a real interface.
//!
//! A [`Lan`] is a bridge in a namespace of its own plus N hosts (namespaces), each linked to the bridge by a
//! veth pair (`eth0` in the host, `v<i>` on the bridge), with loopback up, an address on a /24 of 10.64.0.0/10
//! (one per `Lan`: derived from the pid and checked against other live test runs' namespaces), and a route for
//! 224.0.0.0/4 on `eth0` so multicast (mDNS) goes out without a default route. The bridge floods multicast
//! (snooping off). Processes run in a host with `ip netns exec` ([`Lan::spawn`], [`Lan::run`]); the
//! controller side runs there too (`sdctl`, or this test binary again: [`child_role`], [`Lan::spawn_self`]).
//!
//! Clean-up: a [`Proc`] kills its process on drop; dropping the `Lan` (also while a test panics) kills every
//! process left in its namespaces and deletes them. Namespace names are `sdt-<pid>-<start time>-<n>-…`;
//! [`Lan::new`] first sweeps the namespaces of test processes that no longer run (killed before their drops
//! ran), so nothing outlives its test run for long.
//!
//! Needs root and `ip` (iproute2). `build.rs` sets `cfg(smartdev_no_netns)` otherwise, and the tests that
//! need namespaces are then `#[ignore]`d with that reason: reported as ignored, never as passed.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Every namespace a test creates starts with this.
pub const PREFIX: &str = "sdt-";
/// Set in a re-executed test binary: the role it plays (see [`child_role`]).
pub const CHILD_ENV: &str = "SMARTDEV_NETNS_CHILD";
/// Hang guard for commands run to completion.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// `Err(why)` when this process cannot create namespaces (not root, or no `ip`).
pub fn available() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string));
    if euid.as_deref() != Some("0") {
        return Err("not root".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("no ip(8) (iproute2)".into()),
    }
}

/// This process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22): with the pid it names
/// a process run uniquely, so a reused pid does not keep a dead run's namespaces alive.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(19)?.parse().ok()
}

/// `ip ARGS`, panicking with its stderr when it fails.
fn ip(args: &[&str]) -> String {
    let o = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `ip [-n NS] -batch -` with `lines`.
fn ip_batch(ns: Option<&str>, lines: &[String]) {
    let mut cmd = Command::new("ip");
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    let mut child = cmd
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ip runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(lines.join("\n").as_bytes()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "ip -batch in {ns:?}: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        lines.join("\n")
    );
}

/// Every namespace whose name starts with `prefix`.
pub fn namespaces(prefix: &str) -> Vec<String> {
    ip(&["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// Kills every process in the namespaces `names`, then deletes them.
fn remove(names: &[String]) {
    for ns in names {
        let pids = Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for pid in pids.split_whitespace() {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
    for ns in names {
        let _ = Command::new("ip").args(["netns", "del", ns]).status();
    }
}

/// Removes the namespaces of test runs that ended without removing theirs (killed: no drop ran).
pub fn sweep() {
    let dead: Vec<String> = namespaces(PREFIX)
        .into_iter()
        .filter(|n| {
            let mut f = n[PREFIX.len()..].split('-');
            let pid = f.next().and_then(|p| p.parse::<u32>().ok());
            let start = f.next().and_then(|s| s.parse::<u64>().ok());
            match (pid, start) {
                (Some(pid), Some(start)) => start_time(pid) != Some(start),
                _ => false, // not ours
            }
        })
        .collect();
    remove(&dead);
}

/// This process's namespace tag: `sdt-<pid>-<start time>-`.
pub fn run_prefix() -> String {
    let pid = std::process::id();
    format!("{PREFIX}{pid}-{}-", start_time(pid).unwrap_or(0))
}

/// IPv4 /24 networks (as `10.a.b`) used by other test runs' hosts (live, or dead and not yet swept).
pub fn subnets_in_use() -> Vec<[u8; 3]> {
    let mine = run_prefix();
    let mut out = Vec::new();
    for ns in namespaces(PREFIX) {
        if ns.starts_with(&mine) || ns.ends_with("-br") {
            continue;
        }
        let Ok(o) = Command::new("ip")
            .args(["-n", &ns, "-4", "-o", "addr", "show", "dev", "eth0"])
            .output()
        else {
            continue;
        };
        for w in String::from_utf8_lossy(&o.stdout).split_whitespace() {
            if let Some(Ok(a)) = w.split('/').next().map(str::parse::<Ipv4Addr>)
                && w.contains('/')
            {
                let o = a.octets();
                out.push([o[0], o[1], o[2]]);
            }
        }
    }
    out
}

/// A virtual LAN; see the module comment.
pub struct Lan {
    tag: String,
    net: [u8; 3],
    hosts: Vec<Ipv4Addr>,
}

impl Lan {
    /// A bridge and `n` hosts, host `i` at `10.a.b.(10 + i)`. Panics when namespaces cannot be made.
    pub fn new(n: usize) -> Lan {
        static LANS: AtomicU32 = AtomicU32::new(0);
        assert!(n <= 180, "a Lan has at most 180 hosts");
        if let Err(why) = available() {
            panic!(
                "network namespaces unavailable ({why}) although build.rs found them usable: rebuild"
            );
        }
        sweep();
        let k = LANS.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{k}-", run_prefix());
        // 10.64.0.0/10 holds 16384 /24s; skip ones other runs use (a stray route then mixes nobody's traffic).
        let used = subnets_in_use();
        let seed = std::process::id().wrapping_mul(131) ^ k.wrapping_mul(7919);
        let net = (0..16384u32)
            .map(|i| {
                let x = (seed.wrapping_add(i)) % 16384;
                [10, 64 + (x >> 8) as u8, (x & 0xff) as u8]
            })
            .find(|s| !used.contains(s))
            .expect("a free /24");
        let hosts = (0..n)
            .map(|i| Ipv4Addr::new(net[0], net[1], net[2], 10 + i as u8))
            .collect();
        let lan = Lan { tag, net, hosts };
        // From here on a failure drops `lan`, which removes whatever was made.
        let mut root = vec![format!("netns add {}", lan.bridge())];
        root.extend((0..n).map(|i| format!("netns add {}", lan.ns(i))));
        ip_batch(None, &root);
        let mut br = vec![
            "link set lo up".to_string(),
            "link add br0 type bridge mcast_snooping 0".to_string(),
            "link set br0 multicast on up".to_string(),
        ];
        for i in 0..n {
            br.push(format!(
                "link add v{i} type veth peer name eth0 netns {}",
                lan.ns(i)
            ));
            br.push(format!("link set v{i} master br0 multicast on up"));
        }
        ip_batch(Some(&lan.bridge()), &br);
        for i in 0..n {
            ip_batch(
                Some(&lan.ns(i)),
                &[
                    "link set lo up".to_string(),
                    format!("addr add {}/24 dev eth0", lan.hosts[i]),
                    "link set eth0 multicast on up".to_string(),
                    "route add 224.0.0.0/4 dev eth0".to_string(),
                ],
            );
        }
        lan
    }

    /// The prefix of every namespace of this `Lan`.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    fn bridge(&self) -> String {
        format!("{}br", self.tag)
    }

    /// The namespace of host `i`.
    pub fn ns(&self, host: usize) -> String {
        format!("{}h{host}", self.tag)
    }

    /// Host `i`'s current address.
    pub fn addr(&self, host: usize) -> Ipv4Addr {
        self.hosts[host]
    }

    /// An address of the Lan's subnet no host has at the start (`k` < 50).
    pub fn spare(&self, k: u8) -> Ipv4Addr {
        assert!(k < 50);
        Ipv4Addr::new(self.net[0], self.net[1], self.net[2], 200 + k)
    }

    /// Gives host `i` the address `new` instead of its current one (the device "moved"; its sockets bound
    /// to 0.0.0.0 answer there at once, ones bound to the old address no longer answer).
    pub fn readdress(&mut self, host: usize, new: Ipv4Addr) {
        // An interface left without addresses loses its routes, the multicast one too: put it back. (Adding the
        // new one first does not help: deleting a primary address deletes its secondaries too.)
        ip_batch(
            Some(&self.ns(host)),
            &[
                "addr flush dev eth0".to_string(),
                format!("addr add {new}/24 dev eth0"),
                "route replace 224.0.0.0/4 dev eth0".to_string(),
            ],
        );
        self.hosts[host] = new;
    }

    /// Unplugs host `i` (its bridge port goes down: no carrier; its own configuration stays).
    pub fn down(&self, host: usize) {
        ip(&[
            "-n",
            &self.bridge(),
            "link",
            "set",
            &format!("v{host}"),
            "down",
        ]);
    }

    /// Plugs host `i` back in.
    pub fn up(&self, host: usize) {
        ip(&[
            "-n",
            &self.bridge(),
            "link",
            "set",
            &format!("v{host}"),
            "up",
        ]);
    }

    /// `argv` to run inside host `i`.
    pub fn command(&self, host: usize, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(host)]).args(argv);
        c
    }

    /// Starts `argv` in host `i`; its stdout lines come through [`Proc::line`]. Killed when the guard goes.
    pub fn spawn(&self, host: usize, argv: &[&str]) -> Proc {
        Proc::start(self.command(host, argv))
    }

    /// This test binary again in host `i`, running only `test` with [`CHILD_ENV`] = `role` (see
    /// [`child_role`]) and `env`.
    pub fn spawn_self(&self, host: usize, test: &str, role: &str, env: &[(&str, &str)]) -> Proc {
        let exe = std::env::current_exe().expect("current_exe");
        let mut c = self.command(
            host,
            &[
                exe.to_str().unwrap(),
                "--exact",
                test,
                "--nocapture",
                "--test-threads=1",
                "--include-ignored",
            ],
        );
        c.env(CHILD_ENV, role).envs(env.iter().copied());
        Proc::start(c)
    }

    /// Runs `argv` in host `i` to completion (hang guard: one minute, then it is killed and this panics).
    pub fn run(&self, host: usize, argv: &[&str]) -> Output {
        run_with_limit(self.command(host, argv), RUN_LIMIT)
    }

    /// Starts `sdctl emulate --listen-on 0.0.0.0 ARGS...` in host `i` (0.0.0.0: it follows
    /// [`Lan::readdress`]); `args` are devices, after options such as `--announce`.
    pub fn emulate(&self, host: usize, args: &[&str]) -> Emulate {
        let devices = args;
        let mut argv = vec![
            env!("CARGO_BIN_EXE_sdctl"),
            "emulate",
            "--listen-on",
            "0.0.0.0",
        ];
        argv.extend_from_slice(args);
        let proc = self.spawn(host, &argv);
        let mut ports = Vec::new();
        let mut ids = Vec::new();
        loop {
            let line = proc
                .line(Duration::from_secs(30))
                .unwrap_or_else(|| panic!("sdctl emulate {devices:?} printed no port"));
            let port: u16 = line.rsplit(':').next().unwrap().parse().unwrap();
            if line.starts_with("admin ") {
                return Emulate {
                    proc,
                    ports,
                    ids,
                    admin_port: port,
                };
            }
            ports.push(port);
            ids.push(line.split_whitespace().nth(1).unwrap().to_string());
        }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        remove(&namespaces(&self.tag));
    }
}

/// A process in a host, killed on drop.
pub struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    fn start(mut c: Command) -> Proc {
        let mut child = c
            .stdout(Stdio::piped())
            .spawn()
            .expect("ip netns exec runs");
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line of its stdout, or `None` at its end or after `limit` (a hang guard).
    pub fn line(&self, limit: Duration) -> Option<String> {
        self.lines.recv_timeout(limit).ok()
    }

    /// The rest of the next line holding `marker`, skipping others (the test harness's; it may also have
    /// started the line, as in `test name ... <marker>...`).
    pub fn marked(&self, marker: &str, limit: Duration) -> Option<String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.checked_duration_since(Instant::now())?;
            let l = self.line(left)?;
            if let Some((_, rest)) = l.split_once(marker) {
                return Some(rest.to_string());
            }
        }
    }

    /// Waits for it to exit (hang guard `limit`, then it is killed and this panics).
    pub fn wait(mut self, limit: Duration) -> std::process::ExitStatus {
        let end = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < end, "process {} still runs", self.pid());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sdctl emulate` in a host.
pub struct Emulate {
    pub proc: Proc,
    /// Device i's port and id, in the order given.
    pub ports: Vec<u16>,
    pub ids: Vec<String>,
    pub admin_port: u16,
}

fn run_with_limit(mut c: Command, limit: Duration) -> Output {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ip netns exec runs");
    let end = Instant::now() + limit;
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut v);
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{c:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

/// In a test re-executed by [`Lan::spawn_self`], its role; `None` in the test run itself. A test starts with
/// `if let Some(role) = child_role() { ... return; }`.
pub fn child_role() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}
