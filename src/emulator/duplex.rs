//! `Duplex`: a connection's byte stream, the socket or TLS over it, shared by a reader thread and a writer
//! thread (the MQTT client of a device; a WebSocket connection of a device's server until its upgrade is
//! answered, then taken apart for the poller). Clones share the socket
//! and the TLS state: the reader blocks on the socket without holding the TLS lock and feeds what came to
//! rustls under it; the writer encrypts and writes under it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};

use super::lock::lock;

/// The socket, or TLS (either side) over it.
pub(crate) struct Duplex {
    pub(crate) tcp: TcpStream,
    tls: Option<Arc<Mutex<rustls::Connection>>>,
    /// Plaintext decrypted and not read yet.
    pending: Vec<u8>,
}

impl Duplex {
    pub(crate) fn plain(tcp: TcpStream) -> Duplex {
        Duplex {
            tcp,
            tls: None,
            pending: Vec::new(),
        }
    }

    /// TLS over `tcp`; a client connection's handshake must be complete (`rustls::Connection::complete_io`),
    /// a server's may have happened over the first request.
    pub(crate) fn tls(tcp: TcpStream, conn: impl Into<rustls::Connection>) -> Duplex {
        Duplex {
            tcp,
            tls: Some(Arc::new(Mutex::new(conn.into()))),
            pending: Vec::new(),
        }
    }

    pub(crate) fn try_clone(&self) -> io::Result<Duplex> {
        Ok(Duplex {
            tcp: self.tcp.try_clone()?,
            tls: self.tls.clone(),
            pending: Vec::new(),
        })
    }

    /// The socket and the TLS state, for a connection served without threads from now on; `None` when a
    /// clone still shares the TLS state or decrypted bytes were not read.
    pub(crate) fn into_parts(self) -> Option<(TcpStream, Option<rustls::Connection>)> {
        if !self.pending.is_empty() {
            return None;
        }
        let tls = match self.tls {
            None => None,
            Some(shared) => Some(
                Arc::try_unwrap(shared)
                    .ok()?
                    .into_inner()
                    .unwrap_or_else(|e| e.into_inner()),
            ),
        };
        Some((self.tcp, tls))
    }

    pub(crate) fn shutdown(&self) -> io::Result<()> {
        self.tcp.shutdown(Shutdown::Both)
    }
}

impl Read for Duplex {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.clone() else {
            return self.tcp.read(buf);
        };
        loop {
            if !self.pending.is_empty() {
                let n = buf.len().min(self.pending.len());
                buf[..n].copy_from_slice(&self.pending[..n]);
                self.pending.drain(..n);
                return Ok(n);
            }
            {
                // What rustls already holds (e.g. read with the upgrade request).
                let mut conn = lock(&tls);
                match conn.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return Ok(0),
                }
            }
            let mut raw = [0u8; 8192];
            let n = self.tcp.read(&mut raw)?;
            if n == 0 {
                return Ok(0);
            }
            let mut conn = lock(&tls);
            let mut rest = &raw[..n];
            while !rest.is_empty() {
                conn.read_tls(&mut rest)?;
                conn.process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                let mut chunk = [0u8; 8192];
                loop {
                    match conn.reader().read(&mut chunk) {
                        Ok(0) => break,
                        Ok(m) => self.pending.extend_from_slice(&chunk[..m]),
                        Err(_) => break,
                    }
                }
            }
            // What reading asked rustls to say (an alert, a key update).
            while conn.wants_write() {
                conn.write_tls(&mut self.tcp)?;
            }
        }
    }
}

impl Write for Duplex {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(tls) = &self.tls else {
            return self.tcp.write(buf);
        };
        let mut conn = lock(tls);
        conn.writer().write_all(buf)?;
        while conn.wants_write() {
            conn.write_tls(&mut self.tcp)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}
