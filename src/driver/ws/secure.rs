//! WSS: TLS over the push channel's non-blocking socket. rustls is driven by hand (`read_tls`/`write_tls`) on
//! the poller's mio socket: the poller reads (and runs the handshake as it reads), and the worker writes its
//! requests through a second handle on the same socket ([`Writer`]); both go through one `ClientConnection`
//! behind a mutex, held only for the copy, never while waiting.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};

use rustls::ClientConnection;

/// The TLS state of one connection, shared by the poller's reads and the worker's writes.
pub(crate) type Shared = Arc<Mutex<ClientConnection>>;

fn lock(conn: &Shared) -> MutexGuard<'_, ClientConnection> {
    conn.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes what rustls has for the wire, as far as the socket takes it now (the rest goes at the next read
/// or write).
fn push_out(conn: &mut ClientConnection, tcp: &mut impl Write) -> io::Result<()> {
    while conn.wants_write() {
        match conn.write_tls(tcp) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads plaintext, like `Read::read` on a non-blocking socket: `WouldBlock` when neither rustls nor the
/// socket has more; `Ok(0)` when the connection ended. A refused certificate or a TLS error is an
/// `InvalidData` error carrying the rustls error.
pub(crate) fn read(
    conn: &Shared,
    tcp: &mut (impl Read + Write),
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut conn = lock(conn);
    loop {
        match conn.reader().read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // The peer closed without close_notify: the connection ended, as on plain TCP.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
            Err(e) => return Err(e),
        }
        push_out(&mut conn, tcp)?;
        match conn.read_tls(tcp) {
            Ok(0) => {
                // End of the TCP stream: what rustls still holds is read first.
                conn.process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                return match conn.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(_) => Ok(0),
                };
            }
            Ok(_) => {
                let processed = conn.process_new_packets();
                // An alert for the peer (a refused certificate) goes out before the error.
                let _ = push_out(&mut conn, tcp);
                processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// While the handshake runs: sends what rustls has, then takes what the socket has into rustls *without*
/// processing it, so that the handshake's public-key crypto (the costly part) can run on another thread
/// ([`process`]). `None` once the handshake is over (read with [`read`]); `Some(Ok(0))` at the end of the
/// stream.
pub(crate) fn receive_handshake(
    conn: &Shared,
    tcp: &mut (impl Read + Write),
) -> Option<io::Result<usize>> {
    let mut conn = lock(conn);
    if !conn.is_handshaking() {
        return None;
    }
    if let Err(e) = push_out(&mut conn, tcp) {
        return Some(Err(e));
    }
    Some(conn.read_tls(tcp))
}

/// Processes what [`receive_handshake`] took in, on the calling thread.
pub(crate) fn process(conn: &Shared) -> Result<(), rustls::Error> {
    lock(conn).process_new_packets().map(|_| ())
}

/// Sends what rustls has (after [`process`]: the next flight, or the alert of a refusal).
pub(crate) fn send_pending(conn: &Shared, tcp: &mut impl Write) -> io::Result<()> {
    push_out(&mut lock(conn), tcp)
}

/// Writes `buf` whole into the TLS stream (rustls buffers it until the handshake is done) and sends what the
/// socket takes now.
pub(crate) fn write(conn: &Shared, tcp: &mut impl Write, buf: &[u8]) -> io::Result<usize> {
    let mut conn = lock(conn);
    conn.writer().write_all(buf)?;
    push_out(&mut conn, tcp)?;
    Ok(buf.len())
}

/// The worker's handle for writing frames on a live connection: the socket itself, or TLS over it.
pub(crate) struct Writer {
    tcp: TcpStream,
    tls: Option<Shared>,
}

impl Writer {
    /// Plain WebSocket.
    #[cfg(test)]
    pub(crate) fn plain(tcp: TcpStream) -> Writer {
        Writer { tcp, tls: None }
    }

    /// WSS through `tls`.
    pub(crate) fn tls(tcp: TcpStream, tls: Option<Shared>) -> Writer {
        Writer { tcp, tls }
    }

    /// Writes a frame without waiting; false when the socket did not take it whole (plain) or TLS failed.
    pub(crate) fn write_now(&self, wire: &[u8]) -> bool {
        match &self.tls {
            None => matches!((&self.tcp).write(wire), Ok(n) if n == wire.len()),
            Some(conn) => write(conn, &mut (&self.tcp), wire).is_ok(),
        }
    }

    /// Ends the connection (both directions).
    pub(crate) fn shutdown(&self) {
        let _ = self.tcp.shutdown(Shutdown::Both);
    }
}
