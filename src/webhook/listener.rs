//! The webhook listener: tiny_http accepts connections; two handler threads (`sd-webhook-N`) validate each
//! request, resolve it, queue the event, then set the wake flag (in that order, so a woken reader finds it).

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::HookSink;
use super::queue::EventQueue;
use super::request::{self, Incoming, MAX_BODY, Rules};
use crate::config::WebhookSettings;
use crate::error::Error;
use crate::event::WebhookEvent;
use crate::wake::WakeFlag;

/// Handler threads; requests are cheap (no device I/O), two keep a slow client from stalling the others.
const HANDLERS: usize = 2;

/// A running listener. Stopped by [`Listener::stop`] (also on drop).
pub(crate) struct Listener {
    server: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    addr: SocketAddr,
}

/// What the handler threads share.
struct Context {
    path: String,
    token: Option<String>,
    allowed: Option<Vec<IpAddr>>,
    queue: Arc<EventQueue>,
    wake: Option<WakeFlag>,
    sink: Arc<dyn HookSink>,
}

impl Listener {
    /// Binds `Host:Port` and starts the handlers. A bind failure names the address.
    pub(crate) fn start(
        w: &WebhookSettings,
        allowed: Option<Vec<IpAddr>>,
        queue: Arc<EventQueue>,
        wake: Option<WakeFlag>,
        sink: Arc<dyn HookSink>,
    ) -> Result<Listener, Error> {
        let host = crate::hostname::url_host(&w.host);
        let wanted = format!("{host}:{}", w.port);
        let server = tiny_http::Server::http(&wanted).map_err(|e| Error::Io {
            context: format!("starting the webhook listener on {wanted}"),
            source: std::io::Error::other(e.to_string()),
        })?;
        let addr = server.server_addr().to_ip().ok_or_else(|| Error::Io {
            context: format!("starting the webhook listener on {wanted}"),
            source: std::io::Error::other("not an IP address"),
        })?;
        let server = Arc::new(server);
        let stop = Arc::new(AtomicBool::new(false));
        let ctx = Arc::new(Context {
            path: w.path.clone(),
            token: w.token.clone(),
            allowed,
            queue,
            wake,
            sink,
        });
        let mut threads = Vec::with_capacity(HANDLERS);
        for n in 0..HANDLERS {
            let (server, stop, ctx) = (server.clone(), stop.clone(), ctx.clone());
            let builder = std::thread::Builder::new()
                .name(format!("sd-webhook-{n}"))
                .stack_size(256 * 1024);
            let t = crate::log_scope::spawn(builder, move || {
                while !stop.load(Ordering::Relaxed) {
                    match server.recv_timeout(Duration::from_millis(200)) {
                        Ok(Some(rq)) => handle(&ctx, rq),
                        Ok(None) => {}
                        Err(_) => break,
                    }
                }
            })
            .map_err(|e| Error::Io {
                context: "starting a webhook handler thread".into(),
                source: e,
            })?;
            threads.push(t);
        }
        log::info!("webhook listener on http://{addr}{}", w.path);
        Ok(Listener {
            server,
            stop,
            threads,
            addr,
        })
    }

    /// The address actually bound (the port is real even when 0 was configured).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, wakes and joins the handlers. Requests already being handled finish first.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for _ in 0..self.threads.len() {
            self.server.unblock();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The request target with any token value hidden, for logs.
fn redacted(target: &str) -> String {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if query.is_empty() {
        return path.to_string();
    }
    let q: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("token") => format!("{k}=***"),
            _ => p.to_string(),
        })
        .collect();
    format!("{path}?{}", q.join("&"))
}

fn respond(rq: tiny_http::Request, status: u16, body: &str) {
    let resp = tiny_http::Response::from_string(body).with_status_code(status);
    // The sender may be gone already; nothing to do about it.
    let _ = rq.respond(resp);
}

fn handle(ctx: &Context, mut rq: tiny_http::Request) {
    let source = rq
        .remote_addr()
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let method = rq.method().as_str().to_string();
    let target = rq.url().to_string();
    // Refuse oversized bodies by their declared length before reading them.
    let declared = rq.body_length().unwrap_or(0);
    let mut body = Vec::new();
    if declared <= MAX_BODY {
        let _ = rq
            .as_reader()
            .take(MAX_BODY as u64 + 1)
            .read_to_end(&mut body);
    } else {
        body.resize(MAX_BODY + 1, 0);
    }
    let rules = Rules {
        path: &ctx.path,
        token: ctx.token.as_deref(),
        allowed: ctx.allowed.as_deref(),
    };
    let incoming = Incoming {
        method: &method,
        target: &target,
        body: &body,
        source,
    };
    match request::parse(&incoming, &rules) {
        Ok(hook) => {
            let (device, component) = ctx.sink.resolve(&hook);
            let event = WebhookEvent {
                event: hook.event,
                component,
                component_id: hook.component_id,
                object_type: hook.object_type,
                device,
                device_id: hook.device_id,
                received_at: crate::clock::rfc3339_now(),
                source: source.to_string(),
                params: hook.params,
            };
            ctx.queue.push(event);
            if let Some(w) = &ctx.wake {
                w.set();
            }
            respond(rq, 200, "smartdev: event queued\n");
        }
        Err(r) => {
            log::debug!(
                "webhook request {method} {} from {source} refused ({}): {}",
                redacted(&target),
                r.status,
                r.reason
            );
            respond(rq, r.status, &format!("{}\n", r.reason));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn tokens_never_reach_the_log() {
        assert_eq!(
            redacted("/h?Event=x&token=s3cret&a=1"),
            "/h?Event=x&token=***&a=1"
        );
        assert_eq!(redacted("/h"), "/h");
    }
}
