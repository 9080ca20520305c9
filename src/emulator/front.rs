//! A device's front door (`Service` for its port's server): the auth guard, then its family's front end
//! (`gen1.rs`, `rpc.rs`, `tasmota.rs`), and WebSocket upgrades (`ws.rs`). Above `device.rs`, which names none
//! of them.

use std::net::TcpStream;
use std::sync::Arc;

use super::device::{Device, Family};
use super::server::{Request, Response, Service};
use super::{auth, gen1, rpc, tasmota, ws};

impl Service for Device {
    fn key(&self, req: &Request) -> String {
        match self.ident.family {
            Family::Gen1 => gen1::key(req),
            Family::Rpc => rpc::key(req),
            Family::Tasmota => tasmota::key(req),
        }
    }

    fn handle(&self, req: &Request) -> Response {
        if let Some(refused) = auth::guard(&self.auth, self.ident.family, &self.ident.id, req) {
            return refused;
        }
        match self.ident.family {
            Family::Gen1 => gen1::handle(self, req),
            Family::Rpc => rpc::handle(self, req),
            Family::Tasmota => tasmota::handle(self, req),
        }
    }

    fn tls(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.tls.as_ref().map(|t| t.config())
    }

    fn upgrade_tls(
        self: Arc<Self>,
        req: &Request,
        stream: super::server::TlsStream,
    ) -> Option<super::server::TlsStream> {
        if self.ident.family != Family::Rpc || !ws::is_upgrade(req) {
            return Some(stream);
        }
        let rustls::StreamOwned { conn, sock } = stream;
        ws::accept(self, req, ws::Duplex::tls(sock, conn));
        None
    }

    fn upgrade(self: Arc<Self>, req: &Request, stream: TcpStream) -> Option<TcpStream> {
        if self.ident.family != Family::Rpc || !ws::is_upgrade(req) {
            return Some(stream);
        }
        ws::accept(self, req, ws::Duplex::plain(stream));
        None
    }
}
