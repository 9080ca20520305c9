//! A real Mosquitto broker per test: its own configuration file, a free loopback port, optional user/password
//! and TLS (a throwaway CA made by the test), stopped and its files removed on drop, also when the test panics.
//! Never a broker the machine happens to run. `.ci/run` installs the Debian package `mosquitto`; without it,
//! `build.rs` sets `cfg(smartdev_no_mosquitto)` and the broker tests are `#[ignore]`d with that reason.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TempDir;

/// What the broker asks of clients.
#[derive(Default, Clone)]
pub struct BrokerOptions {
    /// `Some((user, password))`: anonymous clients are refused.
    pub login: Option<(String, String)>,
    /// Serve MQTT over TLS with a certificate for 127.0.0.1 and `localhost` signed by a fresh CA
    /// ([`Broker::ca_file`]).
    pub tls: bool,
    /// Extra lines for `mosquitto.conf` (an ACL file, limits).
    pub extra: String,
}

/// A running broker. Dropping it kills the process and removes its directory.
pub struct Broker {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
    opts: BrokerOptions,
    /// The broker's log (stdout and stderr), for a failing test to show.
    log: PathBuf,
}

/// `mosquitto` from the PATH, else Debian's /usr/sbin (not on a non-root user's PATH).
fn broker_binary() -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .map(|d| std::path::Path::new(d).join("mosquitto"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/usr/sbin/mosquitto"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Broker {
    /// Starts an anonymous plain broker.
    pub fn start() -> Broker {
        Self::start_with(BrokerOptions::default())
    }

    /// Starts a broker with `opts` on a free loopback port.
    pub fn start_with(opts: BrokerOptions) -> Broker {
        let dir = TempDir::new("mosquitto");
        let log = dir.join("broker.log");
        let mut b = Broker {
            child: None,
            port: 0,
            dir,
            opts,
            log,
        };
        // A port found free can be taken before the broker binds it; try again with another.
        for _ in 0..5 {
            b.port = free_port();
            if b.launch() {
                return b;
            }
        }
        panic!("mosquitto did not start; its log:\n{}", b.log_text());
    }

    fn write_config(&self) -> PathBuf {
        let d = self.dir.path();
        let mut conf = format!(
            "per_listener_settings false\npersistence false\nlog_dest stdout\nlog_type error\nlog_type warning\nlog_type notice\nlistener {} 127.0.0.1\n",
            self.port
        );
        match &self.opts.login {
            Some((user, password)) => {
                let pw = d.join("passwords");
                std::fs::write(&pw, "").unwrap();
                let ok = Command::new("mosquitto_passwd")
                    .args(["-b", pw.to_str().unwrap(), user, password])
                    .status()
                    .expect("mosquitto_passwd (Debian package mosquitto)");
                assert!(ok.success(), "mosquitto_passwd failed");
                conf += &format!("allow_anonymous false\npassword_file {}\n", pw.display());
            }
            None => conf += "allow_anonymous true\n",
        }
        if self.opts.tls {
            if !d.join("ca.pem").exists() {
                make_ca(d);
            }
            conf += &format!(
                "cafile {}\ncertfile {}\nkeyfile {}\n",
                d.join("ca.pem").display(),
                d.join("server.pem").display(),
                d.join("server.key").display()
            );
        }
        conf += &self.opts.extra;
        let path = d.join("mosquitto.conf");
        std::fs::write(&path, conf).unwrap();
        path
    }

    /// Starts the process on `self.port`; false if it exited (the port was taken).
    fn launch(&mut self) -> bool {
        let conf = self.write_config();
        let out = std::fs::File::create(&self.log).unwrap();
        let err = out.try_clone().unwrap();
        let mut child = Command::new(broker_binary())
            .args(["-c", conf.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("mosquitto (the Debian package mosquitto; .ci/run installs it)");
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(_)) = child.try_wait() {
                return false;
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                self.child = Some(child);
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Kills the broker (SIGKILL: no clean goodbye to its clients) and waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the broker again on the same port after [`Broker::kill`] (retained messages are gone:
    /// persistence is off, as after a crash of a broker without a store).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart after kill");
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.launch() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "mosquitto did not start again on port {}; its log:\n{}",
            self.port,
            self.log_text()
        );
    }

    /// Freezes (`true`, SIGSTOP) or thaws (SIGCONT) the broker: its sockets stay open but nothing is answered,
    /// as with a hung broker or a silently dropped network path (no reset reaches the clients).
    pub fn freeze(&self, frozen: bool) {
        let pid = self.child.as_ref().expect("a running broker").id();
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let ok = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill");
        assert!(ok.success(), "kill {signal} {pid}");
    }

    /// The CA certificate (PEM) that signed the broker's certificate (`tls` brokers only).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The broker's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `host:port` for configurations and `mqtt=` emulator options.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Subscribes with `mosquitto_sub` to `filter` and returns the first `count` messages (`topic payload`
    /// per line), or what came within `limit` (a hang guard).
    pub fn take(&self, filter: &str, count: usize, limit: Duration) -> Vec<String> {
        let mut args = vec![
            "-h".to_string(),
            "127.0.0.1".into(),
            "-p".into(),
            self.port.to_string(),
            "-v".into(),
            "-t".into(),
            filter.into(),
            "-C".into(),
            count.to_string(),
            "-W".into(),
            limit.as_secs().max(1).to_string(),
        ];
        args.extend(self.client_args());
        let out = Command::new("mosquitto_sub")
            .args(&args)
            .stderr(Stdio::null())
            .output()
            .expect("mosquitto_sub (Debian package mosquitto-clients)");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect()
    }

    /// Publishes `payload` to `topic` with `mosquitto_pub` (as a device or an attacker would).
    pub fn publish(&self, topic: &str, payload: &str, retain: bool) {
        let mut args = vec![
            "-h".to_string(),
            "127.0.0.1".into(),
            "-p".into(),
            self.port.to_string(),
            "-t".into(),
            topic.into(),
            "-m".into(),
            payload.into(),
        ];
        if retain {
            args.push("-r".into());
        }
        args.extend(self.client_args());
        let ok = Command::new("mosquitto_pub")
            .args(&args)
            .status()
            .expect("mosquitto_pub (Debian package mosquitto-clients)");
        assert!(ok.success(), "mosquitto_pub to {topic} failed");
    }

    /// Subscribes with `mosquitto_sub` to `filter` and returns once the subscription is active, so nothing
    /// published afterwards is missed (unlike [`Broker::take`], which may subscribe late): it subscribes to a
    /// probe topic of its own too, publishes to it until the probe comes back, and skips probes afterwards.
    pub fn watch(&self, filter: &str) -> Watch {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let probe = format!(
            "smartdev-watch/{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut args = vec![
            "-h".to_string(),
            "127.0.0.1".into(),
            "-p".into(),
            self.port.to_string(),
            "-v".into(),
            "-q".into(),
            "1".into(),
            "-t".into(),
            filter.into(),
            "-t".into(),
            probe.clone(),
        ];
        args.extend(self.client_args());
        let mut child = Command::new("mosquitto_sub")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto_sub (Debian package mosquitto-clients)");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let w = Watch {
            child,
            rx,
            probe: probe.clone(),
            early: std::cell::RefCell::new(Vec::new()),
        };
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            self.publish(&probe, "probe", false);
            // Messages of the filter that came first (retained ones) are kept for `next`.
            while let Ok(line) = w.rx.recv_timeout(Duration::from_millis(200)) {
                if line.starts_with(&format!("{probe} ")) {
                    return w;
                }
                w.early.borrow_mut().push(line);
            }
        }
        panic!(
            "mosquitto_sub did not subscribe to {filter}; broker log:\n{}",
            self.log_text()
        );
    }

    fn client_args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some((u, p)) = &self.opts.login {
            a.extend(["-u".to_string(), u.clone(), "-P".into(), p.clone()]);
        }
        if self.opts.tls {
            a.extend(["--cafile".to_string(), self.ca_file().display().to_string()]);
        }
        a
    }
}

/// A running `mosquitto_sub` ([`Broker::watch`]); killed on drop.
pub struct Watch {
    child: Child,
    rx: std::sync::mpsc::Receiver<String>,
    probe: String,
    /// Lines that came while waiting for the probe.
    early: std::cell::RefCell<Vec<String>>,
}

impl Watch {
    /// The next message as `topic payload` (probes skipped); `None` when none came within `limit` (a hang
    /// guard).
    pub fn next(&self, limit: Duration) -> Option<String> {
        {
            let mut early = self.early.borrow_mut();
            if !early.is_empty() {
                return Some(early.remove(0));
            }
        }
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let line = self.rx.recv_timeout(left).ok()?;
            if !line.starts_with(&format!("{} ", self.probe)) {
                return Some(line);
            }
        }
    }

    /// The next message whose topic is `topic`, skipping others; its payload.
    pub fn next_on(&self, topic: &str, limit: Duration) -> Option<String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let line = self.next(left)?;
            if let Some(payload) = line.strip_prefix(topic).and_then(|r| r.strip_prefix(' ')) {
                return Some(payload.to_string());
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A CA and a server certificate for 127.0.0.1/localhost signed by it, as PEM files in `dir`
/// (`ca.pem`, `server.pem`, `server.key`).
fn make_ca(dir: &std::path::Path) {
    let ca = smartdev::emulator::CertAuthority::new("smartdev test broker CA");
    let (cert, key) = ca.issue_pem(&["localhost", "127.0.0.1"]);
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), cert).unwrap();
    std::fs::write(dir.join("server.key"), key).unwrap();
}
