//! An in-process ureq transport that answers each connection with the next canned byte string, so tests and
//! fuzz targets drive whole device answers (status line, headers, body) through the HTTP client and the
//! drivers without sockets or timing. With an upstream (an emulated device on loopback), connections beyond
//! the canned answers are relayed to it, and every exchange is recorded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};

/// One connection: the request as the client sent it, and the answer it got.
type Exchange = (Vec<u8>, Vec<u8>);

/// The answers still to give, one per connection, and the exchanges so far (request as sent, answer).
#[derive(Clone, Debug, Default)]
pub(crate) struct Script {
    answers: Arc<Mutex<VecDeque<Vec<u8>>>>,
    log: Arc<Mutex<Vec<Exchange>>>,
    upstream: Option<u16>,
}

impl Script {
    /// A script that relays connections beyond its canned answers to the loopback `port`.
    #[cfg(test)]
    pub(crate) fn relaying(port: u16) -> Self {
        Script {
            upstream: Some(port),
            ..Script::default()
        }
    }

    /// Replaces the answers to come.
    pub(crate) fn load(&self, answers: impl IntoIterator<Item = Vec<u8>>) {
        let mut a = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        a.clear();
        a.extend(answers);
    }

    /// The exchanges so far: each request as the client sent it, and the answer it got.
    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn next(&self) -> Option<Vec<u8>> {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }
}

/// Connects every request to the next answer of its script; with none left the connection is refused.
#[derive(Debug)]
pub(crate) struct CannedConnector(pub(crate) Script);

impl Connector for CannedConnector {
    type Out = Box<dyn Transport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        let answer = self.0.next();
        if answer.is_none() && self.0.upstream.is_none() {
            return Err(ureq::Error::Io(
                std::io::ErrorKind::ConnectionRefused.into(),
            ));
        }
        let index = {
            let mut r = self.0.log.lock().unwrap_or_else(|e| e.into_inner());
            r.push((Vec::new(), Vec::new()));
            r.len() - 1
        };
        Ok(Some(Box::new(Canned {
            buffers: LazyBuffers::new(
                details.config.input_buffer_size(),
                details.config.output_buffer_size(),
            ),
            answer,
            given: 0,
            script: self.0.clone(),
            index,
        })))
    }
}

#[derive(Debug)]
struct Canned {
    buffers: LazyBuffers,
    /// `None` until relayed from upstream.
    answer: Option<Vec<u8>>,
    given: usize,
    script: Script,
    index: usize,
}

impl Transport for Canned {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, _timeout: NextTimeout) -> Result<(), ureq::Error> {
        let sent = self
            .buffers
            .output()
            .get(..amount)
            .unwrap_or_default()
            .to_vec();
        let mut r = self.script.log.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((req, _)) = r.get_mut(self.index) {
            req.extend_from_slice(&sent);
        }
        Ok(())
    }

    fn await_input(&mut self, _timeout: NextTimeout) -> Result<bool, ureq::Error> {
        if self.answer.is_none() {
            // ureq sends the whole request before it waits for the answer.
            let request = self.script.exchanges().get(self.index).map(|e| e.0.clone());
            let answer = relay(self.script.upstream, &request.unwrap_or_default())?;
            self.answer = Some(answer);
        }
        if self.given == 0 {
            let mut r = self.script.log.lock().unwrap_or_else(|e| e.into_inner());
            if let (Some((_, logged)), Some(a)) = (r.get_mut(self.index), &self.answer) {
                logged.clone_from(a);
            }
        }
        let answer = self.answer.as_deref().unwrap_or_default();
        let rest = answer.get(self.given..).unwrap_or_default();
        let buf = self.buffers.input_append_buf();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.buffers.input_appended(n);
        self.given += n;
        // Like a socket at end of stream: no more input.
        Ok(n > 0)
    }

    fn is_open(&mut self) -> bool {
        // Devices close every connection; never reuse one (the next request takes the next answer).
        false
    }
}

/// Sends `request` to the loopback `port` and reads the whole answer (emulated devices close every connection).
fn relay(port: Option<u16>, request: &[u8]) -> Result<Vec<u8>, ureq::Error> {
    use std::io::{Read, Write};
    let port = port.ok_or(ureq::Error::ConnectionFailed)?;
    let mut up = std::net::TcpStream::connect(("127.0.0.1", port))?;
    up.write_all(request)?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer)?;
    Ok(answer)
}

/// Helpers for request-level driver tests: canned JSON answers and the request lines the driver sent.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::LazyLock;

    use super::Script;
    use crate::driver::http::Http;

    /// No retries and no pauses: each request takes exactly one canned answer.
    static SETTINGS: LazyLock<crate::Settings> = LazyLock::new(|| {
        crate::Settings::from_yaml_str(
            "SmartDevices:\n  RetryCount: 0\n  RetryDelay: 0\n  Devices: [{Name: F, Model: Shelly1, Simulate: true}]\n",
        )
        .expect("fixed settings load")
    });

    /// An HTTP client whose connections get the answers of `script`.
    pub(crate) fn http(script: &Script) -> Http {
        Http::canned(&SETTINGS, script.clone())
    }

    /// A `200 OK` answer with `body` as JSON.
    pub(crate) fn ok(body: &serde_json::Value) -> Vec<u8> {
        let body = body.to_string();
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// The target (path and query) of every request sent so far.
    pub(crate) fn targets(script: &Script) -> Vec<String> {
        script
            .exchanges()
            .iter()
            .map(|(req, _)| {
                let line = String::from_utf8_lossy(req);
                let first = line.lines().next().unwrap_or_default().to_string();
                first.split(' ').nth(1).unwrap_or_default().to_string()
            })
            .collect()
    }
}
