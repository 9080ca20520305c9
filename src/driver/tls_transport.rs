//! The ureq connector that runs rustls over ureq's TCP transport for `https` URLs (who is trusted and how is
//! `tls.rs`).
//!
//! rustls queues a handshake flight as several records and hands them to the socket as one vectored write;
//! ureq's `TransportAdapter` sends only the first slice of a vectored write, so each record would be its own
//! syscall and TCP segment. [`Gather`] sends the flight in one write (measured in BENCHMARKS.md, "HTTPS
//! against HTTP").

use std::fmt;
use std::io::{IoSlice, Read, Write};
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport,
    TransportAdapter,
};

use super::tls::DeviceTls;

/// ureq's adapter, with vectored writes gathered into one send.
struct Gather {
    inner: TransportAdapter,
    scratch: Vec<u8>,
}

impl Read for Gather {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

impl Write for Gather {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        if bufs.iter().filter(|b| !b.is_empty()).count() < 2 {
            let one = bufs.iter().find(|b| !b.is_empty());
            return one.map_or(Ok(0), |b| self.inner.write(b));
        }
        self.scratch.clear();
        for b in bufs {
            self.scratch.extend_from_slice(b);
        }
        // All or an error: the adapter takes at most its output buffer per write, so loop here.
        self.inner.write_all(&self.scratch)?;
        Ok(self.scratch.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Runs rustls over the chained (TCP) transport for `https` URLs.
#[derive(Debug)]
pub(crate) struct TlsConnector(pub Arc<DeviceTls>);

impl<In: Transport> Connector<In> for TlsConnector {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Ok(None);
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details
            .uri
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let name = ServerName::try_from(host)
            .map_err(|_| ureq::Error::Tls("the device's address is not a valid TLS name"))?;
        let mut conn = ClientConnection::new(self.0.config(), name)
            .map_err(|e| ureq::Error::Io(std::io::Error::other(e)))?;
        let mut sock = Gather {
            inner: TransportAdapter::new(transport.boxed(), details.current_time.clone()),
            scratch: Vec::new(),
        };
        // The handshake is bounded like the request (`ResponseTimeout`).
        sock.inner.set_timeout(details.timeout);
        conn.complete_io(&mut sock).map_err(ureq::Error::from)?;
        self.0.learn(&conn);
        Ok(Some(Either::B(TlsTransport {
            buffers: LazyBuffers::new(
                details.config.input_buffer_size(),
                details.config.output_buffer_size(),
            ),
            stream: StreamOwned { conn, sock },
        })))
    }
}

/// An HTTPS connection to a device.
pub(crate) struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, Gather>,
}

impl fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsTransport").finish()
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().inner.set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().inner.set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().inner.get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records every send, as the socket would see it.
    #[derive(Debug)]
    struct Wire {
        buffers: LazyBuffers,
        sent: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Transport for Wire {
        fn buffers(&mut self) -> &mut dyn Buffers {
            &mut self.buffers
        }
        fn transmit_output(&mut self, amount: usize, _: NextTimeout) -> Result<(), ureq::Error> {
            let out = self.buffers.output()[..amount].to_vec();
            self.sent.lock().unwrap().push(out);
            Ok(())
        }
        fn await_input(&mut self, _: NextTimeout) -> Result<bool, ureq::Error> {
            Ok(false)
        }
        fn is_open(&mut self) -> bool {
            true
        }
    }

    fn gather(output: usize) -> (Gather, Arc<Mutex<Vec<Vec<u8>>>>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let wire = Wire {
            buffers: LazyBuffers::new(64, output),
            sent: sent.clone(),
        };
        let g = Gather {
            inner: TransportAdapter::new(
                wire.boxed(),
                Arc::new(ureq::unversioned::transport::time::Instant::now),
            ),
            scratch: Vec::new(),
        };
        (g, sent)
    }

    #[test]
    fn a_flight_of_records_is_one_send() {
        let (mut g, sent) = gather(1024);
        let records: [&[u8]; 4] = [
            b"client key exchange",
            b"",
            b"change cipher spec",
            b"finished",
        ];
        let slices: Vec<IoSlice<'_>> = records.iter().map(|r| IoSlice::new(r)).collect();
        let n = g.write_vectored(&slices).unwrap();
        assert_eq!(n, records.iter().map(|r| r.len()).sum::<usize>());
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), 1, "one send for the flight: {sent:?}");
        assert_eq!(sent[0], records.concat());
    }

    #[test]
    fn a_flight_larger_than_the_output_buffer_is_sent_whole_in_order() {
        let (mut g, sent) = gather(8);
        let records: [&[u8]; 2] = [b"0123456789", b"abcdefghij"];
        let slices: Vec<IoSlice<'_>> = records.iter().map(|r| IoSlice::new(r)).collect();
        assert_eq!(g.write_vectored(&slices).unwrap(), 20);
        assert_eq!(sent.lock().unwrap().concat(), records.concat());
    }

    #[test]
    fn a_single_record_passes_through() {
        let (mut g, sent) = gather(1024);
        assert_eq!(
            g.write_vectored(&[IoSlice::new(b""), IoSlice::new(b"one")])
                .unwrap(),
            3
        );
        assert_eq!(g.write_vectored(&[]).unwrap(), 0);
        assert_eq!(*sent.lock().unwrap(), vec![b"one".to_vec()]);
    }
}
