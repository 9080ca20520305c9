//! A connection as the wire client and the wire devices drive it, without blocking: the socket, or TLS over it.

use std::io::{self, Read, Write};

use mio::net::TcpStream;

/// The socket and, over TLS, rustls' state; bytes to send wait in `out` (plain) or in rustls (TLS).
pub struct Link {
    pub tcp: TcpStream,
    tls: Option<rustls::Connection>,
    out: Vec<u8>,
}

impl Link {
    pub fn plain(tcp: TcpStream) -> Link {
        Link {
            tcp,
            tls: None,
            out: Vec::new(),
        }
    }

    /// TLS over `tcp`, the handshake to come (driven by [`Link::receive`] and [`Link::flush`]).
    pub fn tls(tcp: TcpStream, conn: impl Into<rustls::Connection>) -> Link {
        Link {
            tcp,
            tls: Some(conn.into()),
            out: Vec::new(),
        }
    }

    /// Sends `bytes` (over TLS after the handshake: rustls holds them until then) as far as the socket takes them.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self.tls.as_mut() {
            None => self.out.extend_from_slice(bytes),
            Some(tls) => tls.writer().write_all(bytes)?,
        }
        self.flush()
    }

    /// Writes what waits until the socket takes no more (or is not connected yet).
    pub fn flush(&mut self) -> io::Result<()> {
        let blocked = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::NotConnected
            )
        };
        match self.tls.as_mut() {
            None => {
                let mut written = 0;
                while written < self.out.len() {
                    match self.tcp.write(&self.out[written..]) {
                        Ok(k) => written += k,
                        Err(e) if blocked(&e) => break,
                        Err(e) => return Err(e),
                    }
                }
                self.out.drain(..written);
            }
            Some(tls) => {
                while tls.wants_write() {
                    match tls.write_tls(&mut self.tcp) {
                        Ok(_) => {}
                        Err(e) if blocked(&e) => break,
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads what came (decrypted over TLS, the handshake answered) into `buf`; `Ok(false)` once the peer closed.
    pub fn receive(&mut self, chunk: &mut [u8], buf: &mut Vec<u8>) -> io::Result<bool> {
        loop {
            let k = match self.tcp.read(chunk) {
                Ok(0) => return Ok(false),
                Ok(k) => k,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::NotConnected
                    ) =>
                {
                    break;
                }
                Err(e) => return Err(e),
            };
            let Some(tls) = self.tls.as_mut() else {
                buf.extend_from_slice(&chunk[..k]);
                continue;
            };
            let mut records = &chunk[..k];
            while !records.is_empty() {
                tls.read_tls(&mut records)?;
                tls.process_new_packets().map_err(io::Error::other)?;
                match tls.reader().read_to_end(buf) {
                    Ok(_) => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
        }
        // The handshake's next flight, if it has one.
        self.flush()?;
        Ok(true)
    }
}
