//! A misbehaving device on loopback: it stands in front of an emulated device, passes requests through while
//! it behaves, and answers whatever raw bytes, at whatever pace, a test sets.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the device does with the next requests.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// Forward to the emulated device and relay its answer.
    Sane,
    /// Answer these exact bytes, then close.
    Raw(Vec<u8>),
    /// `200 OK` with a JSON-looking body of `len` bytes (`[0,0,0,…`), written as fast as the client reads.
    Huge(usize),
    /// Send these bytes one at a time, `every` apart, until done or the client leaves.
    Trickle(Vec<u8>, Duration),
}

/// The fake device. Dropping it stops the accept thread.
pub struct Hostile {
    port: u16,
    behaviour: Arc<Mutex<Behaviour>>,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Hostile {
    /// Listens on 127.0.0.1 in front of the emulated device at `upstream` (a loopback port).
    pub fn start(upstream: u16) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let behaviour = Arc::new(Mutex::new(Behaviour::Sane));
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, n, s) = (behaviour.clone(), requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let now = b.lock().unwrap().clone();
                let n = n.clone();
                std::thread::spawn(move || serve(conn, now, upstream, &n));
            }
        });
        Hostile {
            port,
            behaviour,
            requests,
            stop,
        }
    }

    /// The port to configure.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Changes what the device does from the next connection on.
    pub fn set(&self, b: Behaviour) {
        *self.behaviour.lock().unwrap() = b;
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads one request (head and a `Content-Length` body) from `conn`.
fn read_request(conn: &mut TcpStream) -> Option<Vec<u8>> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Some(buf);
            }
        }
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn serve(mut conn: TcpStream, behaviour: Behaviour, upstream: u16, requests: &AtomicUsize) {
    let Some(request) = read_request(&mut conn) else {
        return;
    };
    requests.fetch_add(1, Ordering::SeqCst);
    // Errors writing are the client leaving early (a size limit, a timeout): expected here.
    match behaviour {
        Behaviour::Sane => {
            let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else {
                return;
            };
            let _ = up.write_all(&request);
            let mut answer = Vec::new();
            let _ = up.read_to_end(&mut answer);
            let _ = conn.write_all(&answer);
        }
        Behaviour::Raw(bytes) => {
            let _ = conn.write_all(&bytes);
        }
        Behaviour::Huge(len) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n["
            );
            if conn.write_all(head.as_bytes()).is_err() {
                return;
            }
            let block = "0,".repeat(32 * 1024);
            let mut left = len.saturating_sub(1);
            while left > 0 {
                let n = left.min(block.len());
                if conn.write_all(&block.as_bytes()[..n]).is_err() {
                    return;
                }
                left -= n;
            }
        }
        Behaviour::Trickle(bytes, every) => {
            for b in bytes {
                if conn.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(every);
            }
        }
    }
    let _ = conn.shutdown(Shutdown::Both);
}

/// A complete HTTP/1.1 answer with `status` and `body`.
pub fn answer(status: u16, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} Whatever\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}
