//! The wake flag: a thread-safe event the library sets when a webhook arrives and the application clears.
//!
//! On Unix it also owns a file descriptor that is readable exactly while the flag is set (level-triggered), so
//! C, Go and Python callers can `poll`/`select` it next to their own descriptors. It is one end of a socket pair
//! holding one byte while set; std creates it close-on-exec, and both ends are non-blocking so a caller that
//! reads the fd by mistake cannot make `clear` hang.

#[cfg(unix)]
use std::io::{ErrorKind, Read, Write};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Inner {
    set: Mutex<bool>,
    cv: Condvar,
    /// (readable end handed out as the fd, writing end)
    #[cfg(unix)]
    pipe: Option<(UnixStream, UnixStream)>,
}

/// A settable, clearable, waitable flag shared between the library and the application. Cheap to clone; clones
/// share the same flag.
#[derive(Clone, Debug)]
pub struct WakeFlag {
    inner: Arc<Inner>,
}

impl Default for WakeFlag {
    fn default() -> Self {
        Self::new()
    }
}

impl WakeFlag {
    /// A new, cleared flag (with its descriptor on Unix, when the process may open one more).
    pub fn new() -> Self {
        #[cfg(unix)]
        let pipe = UnixStream::pair().ok().and_then(|(r, w)| {
            r.set_nonblocking(true).ok()?;
            w.set_nonblocking(true).ok()?;
            Some((r, w))
        });
        WakeFlag {
            inner: Arc::new(Inner {
                set: Mutex::new(false),
                cv: Condvar::new(),
                #[cfg(unix)]
                pipe,
            }),
        }
    }

    /// Sets the flag, makes the descriptor readable and wakes every waiter.
    pub fn set(&self) {
        let mut set = self.inner.set.lock().unwrap_or_else(|e| e.into_inner());
        if !*set {
            *set = true;
            #[cfg(unix)]
            if let Some((_, mut w)) = self.inner.pipe.as_ref().map(|(r, w)| (r, w)) {
                // One byte while set; a full buffer would already be readable.
                let _ = w.write(&[1]);
            }
        }
        self.inner.cv.notify_all();
    }

    /// Clears the flag and drains the descriptor (the application does this after handling events).
    pub fn clear(&self) {
        let mut set = self.inner.set.lock().unwrap_or_else(|e| e.into_inner());
        *set = false;
        #[cfg(unix)]
        if let Some((mut r, _)) = self.inner.pipe.as_ref().map(|(r, w)| (r, w)) {
            let mut buf = [0u8; 64];
            loop {
                match r.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => continue,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => break, // WouldBlock: drained.
                }
            }
        }
    }

    /// Whether the flag is set.
    pub fn is_set(&self) -> bool {
        *self.inner.set.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the flag is set or `timeout` passes; returns whether it is set.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut set = self.inner.set.lock().unwrap_or_else(|e| e.into_inner());
        while !*set {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            set = self
                .inner
                .cv
                .wait_timeout(set, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *set
    }

    /// The descriptor that is readable while the flag is set; owned by the flag (never close it, never read
    /// it — call [`WakeFlag::clear`]). `None` when no descriptor could be created.
    #[cfg(unix)]
    pub fn fd(&self) -> Option<std::os::unix::io::RawFd> {
        use std::os::unix::io::AsRawFd;
        self.inner.pipe.as_ref().map(|(r, _)| r.as_raw_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_wakes_a_waiter_and_clear_resets() {
        let flag = WakeFlag::new();
        let other = flag.clone();
        let t = std::thread::spawn(move || other.wait(Duration::from_secs(5)));
        std::thread::sleep(Duration::from_millis(20));
        flag.set();
        assert!(t.join().unwrap());
        flag.clear();
        assert!(!flag.is_set());
        assert!(!flag.wait(Duration::from_millis(10)));
    }

    #[cfg(unix)]
    #[test]
    fn the_descriptor_is_readable_exactly_while_set() {
        let flag = WakeFlag::new();
        assert!(flag.fd().is_some());
        let (r, _) = flag.inner.pipe.as_ref().unwrap();
        // Reading a clone of the fd's end tells whether a byte is waiting (and consumes it, as a careless
        // caller would).
        let has_byte = || {
            let mut b = [0u8; 8];
            matches!((&*r).read(&mut b), Ok(n) if n > 0)
        };
        assert!(!has_byte());
        flag.set();
        flag.set();
        assert!(has_byte(), "readable while set");
        // The byte was taken behind the flag's back: clear() must still return.
        flag.clear();
        assert!(!flag.is_set());
        flag.set();
        flag.clear();
        assert!(!has_byte(), "not readable after clear");
    }
}
