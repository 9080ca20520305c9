//! The controller: the public entry point that owns the workers, the supervisor and the listener. Lookups
//! are in `directory.rs`, webhook routing in `webhook/routing.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use crossbeam_channel::Sender;

mod energy;
mod firmware;

use crate::actor::hook_inbox::HookInbox;
use crate::actor::supervisor;
use crate::actor::worker::{self, Command, WorkerTx};
use crate::config::Settings;
use crate::directory::Directory;
use crate::driver::http::Http;
use crate::driver::ws::tunnel::PreRead;
use crate::driver::{self, Liveness, OutputAction};
use crate::error::{Error, Result};
use crate::event::{EventFilter, WebhookEvent};
use crate::light::LightChange;
use crate::models::{ModelLibrary, PrintMode};
use crate::objects::{
    Component, ComponentKind, Cover, CoverAction, Device, Identity, Input, Meter, Output,
    OutputChange, Sensor, TempProbe,
};
use crate::wake::WakeFlag;
use crate::webhook::install;
use crate::webhook::listener::Listener;
use crate::webhook::queue::EventQueue;
use crate::webhook::read_budget::ReadBudget;
use crate::webhook::routing::{LateSink, Shared};

/// The webhook event queue's counters ([`Controller::webhook_queue_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Events waiting to be pulled.
    pub waiting: usize,
    /// Events dropped so far: because the queue was full (the oldest of the device with the most events
    /// waiting go first, so a flooding device loses its own), or because their device sent more than 20 per
    /// second after a burst of 50. The log names the device.
    pub dropped: u64,
    /// Events not queued because the same device event had already come another way (a webhook, a
    /// `NotifyEvent` or a pushed state change, for a device with `Channel: auto`).
    pub duplicates: u64,
}

// Every method may be called from any thread: checked when the crate compiles, not by a test.
const _: fn() = || {
    fn shared_across_threads<T: Send + Sync>() {}
    shared_across_threads::<Controller>();
};

/// One failed device of a [`RefreshReport`].
#[derive(Debug)]
#[non_exhaustive]
pub struct RefreshFailure {
    /// The device's ID.
    pub device_id: i64,
    /// The device's name.
    pub device_name: String,
    /// What went wrong.
    pub error: Error,
}

/// The outcome of `refresh_all`: every device is tried; failures do not stop the others.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct RefreshReport {
    /// Devices refreshed successfully.
    pub refreshed: usize,
    /// Devices that failed, with their errors.
    pub failures: Vec<RefreshFailure>,
}

impl RefreshReport {
    /// True when every device was refreshed.
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Why [`Controller::get_device`] failed, with the device object as it stands after the failed read.
///
/// `device` is `Some` whenever the device exists (its `online` false and `last_error` set when it could not
/// be reached): the spec's `get_device` reports the error *and* the object, like C `sd_get_device`, Go
/// `GetDevice` and Python `get_device`. `?` turns it into the plain [`Error`].
#[derive(Debug)]
#[non_exhaustive]
pub struct GetDeviceError {
    /// What went wrong (`Timeout`, `Device`, `Offline`, `NotFound`, ...).
    pub error: Error,
    /// The device's object after the failure; `None` when there is no such device (`NotFound`) or the call
    /// was refused before any read.
    pub device: Option<Box<Device>>,
}

impl std::fmt::Display for GetDeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for GetDeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<GetDeviceError> for Error {
    fn from(e: GetDeviceError) -> Self {
        e.error
    }
}

/// Manages all configured devices. Every method may be called from any thread at the same time.
///
/// The naming rule, the same in Rust, C, Go, Python and sdctl: calls named `read_*` or `refresh_*` and the
/// spec's [`get_device`](Controller::get_device) do device I/O; every other getter (`device`, `output`,
/// `meters`, `component`, [`get_device_component`](Controller::get_device_component), `is_device_online`,
/// `print_device_status`, ...) returns the last known state at once. The supervisor refreshes devices in the
/// background every `RefreshInterval`. Dropping the controller closes it.
pub struct Controller {
    settings: Arc<Settings>,
    shared: Arc<Shared>,
    /// `Some` while open; `close` takes it. Commands fail with [`Error::Closed`] once it is gone (the worker
    /// senders in `shared` go with it), reads of the last known state keep working.
    running: Mutex<Option<Running>>,
    closing: Arc<AtomicBool>,
    http: Http,
    /// The agents of HTTPS devices, interrupted with `http` at close.
    tls_http: Vec<Http>,
    queue: Arc<EventQueue>,
    wake: Option<WakeFlag>,
    /// The firmware updates running (one at a time unless asked).
    updates: crate::actor::update::Updates,
    /// Each device's push channel (`Channel: auto`), by configuration index: `refresh_all` sends the status
    /// requests over them itself, so that each worker is woken once, by its answer.
    push_tunnels: Vec<Option<Arc<crate::driver::ws::tunnel::Tunnel>>>,
}

/// The parts of an open controller that `close` stops.
struct Running {
    /// The workers.
    threads: Vec<crate::ffi::thread::OsThread>,
    supervisor: Option<JoinHandle<()>>,
    /// Dropping it stops the supervisor.
    stop_supervisor: Option<Sender<()>>,
    listener: Option<Listener>,
    /// The push channel's threads (`Channel: auto`), when some device uses it.
    push: Option<crate::actor::push::Push>,
    /// `sd-mqtt` (`Channel: mqtt`), when some device uses it.
    mqtt: Option<crate::actor::mqtt::Mqtt>,
    /// `sd-find`, when some device is configured with a `MAC` (it may move).
    find: Option<crate::actor::find::Find>,
    /// `sd-coiot`, when Gen1 devices are configured (and `CoIoT` is not false).
    coiot: Option<crate::coiot::listener::Listener>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("source", &self.settings.source)
            .field("devices", &self.shared.slots.len())
            .finish()
    }
}

impl Controller {
    /// Starts everything (the builder's last step).
    pub(crate) fn start(
        settings: Settings,
        wake: Option<WakeFlag>,
        finder: Option<Box<dyn crate::discovery::Finder>>,
    ) -> Result<Controller> {
        let (devices, follows) = crate::plan::plan_following(&settings).map_err(Error::Init)?;
        for note in crate::plan::anchor_differences(&settings) {
            log::warn!("{note}");
        }
        // Shared with every worker's driver factory, which rebuilds a driver after a panic.
        let settings = Arc::new(settings);
        let closing = Arc::new(AtomicBool::new(false));
        let http = Http::new(&settings, closing.clone());
        let liveness = Liveness {
            ping_allowed: settings.ping_allowed,
            timeout: settings.response_timeout,
            closing: closing.clone(),
        };
        let queue = Arc::new(EventQueue::new(settings.webhooks.queue_capacity));
        let sink = Arc::new(LateSink::default());
        let ws_sink = Arc::new(crate::webhook::LateWs::default());
        let allowed: Option<crate::webhook::AllowedSources> = (settings.webhooks.enabled
            && settings.webhooks.only_from_devices)
            .then(|| Arc::new(RwLock::new(device_addresses(&devices))));
        let listener = if settings.webhooks.enabled {
            Some(Listener::start(
                &settings.webhooks,
                allowed.clone(),
                queue.clone(),
                wake.clone(),
                sink.clone(),
                ws_sink.clone(),
            )?)
        } else {
            None
        };
        let listen_port = listener.as_ref().map_or(0, |l| l.addr().port());
        // Bound before the drivers exist: a driver pointing its device's CoIoT peer at us needs the port.
        let mut coiot = crate::coiot::setup::Setup::new(&devices, &settings);
        let coiot_socket = coiot.socket.take();
        let coiot = Arc::new(coiot);
        // HTTPS devices: their TLS client configuration (verifier), for HTTPS and WSS alike.
        let mut problems = Vec::new();
        let mut trust_stores = Vec::new();
        let tls_configs: Vec<Option<Arc<crate::driver::tls::DeviceTls>>> = devices
            .iter()
            .zip(&settings.devices)
            .map(|(d, cfg)| {
                if !cfg.tls || d.simulate {
                    return None;
                }
                crate::driver::tls::trust_for(cfg, &d.name, &settings, &mut trust_stores)
                    .and_then(crate::driver::tls::client_config)
                    .map_err(|why| problems.push(crate::error::Problem::new(d.label(), why)))
                    .ok()
            })
            .collect();
        if !problems.is_empty() {
            return Err(Error::Init(problems));
        }
        let mut push_targets = push_targets(&devices, &settings, &tls_configs);
        // A sleeping device is never dialed: it calls us (the outbound WebSocket) when it wakes.
        push_targets.retain(|t| !devices[t.di].sleeping);
        // Each device's tunnel, by configuration index (`None`: no push channel).
        let mut tunnels = vec![None; devices.len()];
        for t in &push_targets {
            tunnels[t.di] = Some(t.tunnel.clone());
        }
        let push_tunnels = tunnels.clone();
        // The MQTT channel: each device's port (and, Gen2+, its tunnel), and the connection, up before the
        // workers' first contact goes through it.
        let mqtt_ctx: Arc<std::sync::OnceLock<Arc<crate::actor::push::Context>>> = Arc::default();
        let (mqtt_targets, ports) = mqtt_targets(&devices, &settings, &mut tunnels);
        let mut mqtt = None;
        if let (Some(m), Some(first)) = (&settings.mqtt, mqtt_targets.first()) {
            let link = first.port.link.clone();
            let started = crate::actor::mqtt::Mqtt::start(
                m.clone(),
                link.clone(),
                mqtt_targets,
                mqtt_ctx.clone(),
                settings.response_timeout,
            )
            .map_err(|e| Error::Io {
                context: "starting the MQTT thread".into(),
                source: e,
            })?;
            link.wait_settled(settings.response_timeout + std::time::Duration::from_secs(1));
            mqtt = Some(started);
        }
        let outbound_targets = outbound_targets(&devices, &settings, &mut tunnels);
        let outbound: Vec<bool> = settings
            .devices
            .iter()
            .map(|c| crate::sleep::outbound(&settings, c))
            .collect();
        let mut drivers = Vec::with_capacity(devices.len());
        // HTTPS devices each get an agent of their own, with their own verifier (`driver/tls.rs`).
        let mut tls_http = Vec::new();
        // Planned devices are in configuration order, so they pair with their configuration blocks.
        for (di, (d, cfg)) in devices.iter().zip(&settings.devices).enumerate() {
            let tunnel = tunnels[di].clone();
            let port = ports[di].clone();
            let credentials = driver::Credentials {
                username: cfg.username.clone(),
                password: cfg.password.clone(),
            };
            let http = match &tls_configs[di] {
                Some(tls) => {
                    let h = Http::with_tls(&settings, closing.clone(), tls.clone());
                    tls_http.push(h.clone());
                    h
                }
                None => http.clone(),
            };
            let (planned, settings) = (driver::Blueprint::of(d), settings.clone());
            let reports_outbound = outbound[di];
            let coiot = coiot.clone();
            // Built for the device's current address: the configured one at open, a new one after it moved
            // (the hooks' callback address is the one this machine uses towards that address).
            let mut factory: worker::Factory = Box::new(move |host: Option<&str>, at: u16| {
                let mut here = planned.device();
                if !here.simulate {
                    here.hostname = host.map(str::to_string);
                    here.port = at;
                }
                let mut hooks = install::plan(&here, &settings.webhooks, listen_port);
                if let Some(h) = hooks.as_mut() {
                    h.outbound = reports_outbound;
                }
                driver::for_device(
                    &here,
                    &settings,
                    &http,
                    hooks,
                    credentials.clone(),
                    driver::Links {
                        tunnel: tunnel.clone(),
                        mqtt: port.clone(),
                        coiot: coiot.driver_part(di, host, at, &settings),
                    },
                )
            });
            match factory(d.address.as_deref(), d.port) {
                Ok(drv) => drivers.push((drv, factory)),
                Err(e) => problems.push(crate::error::Problem::new(d.label(), e.to_string())),
            }
        }
        if !problems.is_empty() {
            return Err(Error::Init(problems));
        }
        // The push channel dials every device now: their workers' first contacts go over these connections
        // (one connection reads, subscribes and stays), and wait for them (`Tunnel::opened`).
        let push_ctx: crate::actor::push::Late = Arc::default();
        let mut push = None;
        if !push_targets.is_empty() {
            for t in push_targets.iter().filter(|t| t.early) {
                t.tunnel.expect_dial();
            }
            let started = crate::actor::push::Push::start(
                std::mem::take(&mut push_targets),
                push_ctx.clone(),
                settings.response_timeout,
            );
            match started {
                Ok(p) => push = Some(p),
                Err(e) => {
                    if let Some(mut m) = mqtt.take() {
                        m.stop();
                    }
                    return Err(Error::Io {
                        context: "starting the push channel threads".into(),
                        source: e,
                    });
                }
            }
        }
        let peers = Arc::new(crate::actor::peers::Peers::new(&devices));
        let (started_tx, started_rx) = crossbeam_channel::unbounded();
        let count = devices.len();
        let (mut slots, mut senders, mut threads) = (Vec::new(), Vec::new(), Vec::new());
        let mut inboxes = Vec::new();
        for (di, ((dev, (drv, factory)), follow)) in
            devices.into_iter().zip(drivers).zip(follows).enumerate()
        {
            let label = dev.label();
            let sleeps = dev.sleeping;
            let now = crate::actor::restart::real_now();
            let inbox = Arc::new(HookInbox::default());
            inboxes.push(inbox.clone());
            match worker::spawn(
                dev,
                drv,
                factory,
                now,
                worker::Links {
                    liveness: liveness.clone(),
                    inbox,
                    peers: peers.clone(),
                    refreshes: settings.refresh_interval.is_some(),
                    follow,
                    events: Some(worker::Events {
                        queue: queue.clone(),
                        wake: wake.clone(),
                        push: tunnels[di].is_some(),
                    }),
                    mac: settings.devices.get(di).and_then(|c| c.mac),
                    sleep: sleeps.then(|| settings.devices.get(di).and_then(|c| c.report_period)),
                },
                started_tx.clone(),
            ) {
                Ok(w) => {
                    slots.push(w.slot);
                    senders.push(w.tx);
                    threads.push(w.thread);
                }
                Err(e) => {
                    // Stop what already runs before reporting.
                    if let Some(mut p) = push.take() {
                        p.stop();
                    }
                    if let Some(mut m) = mqtt.take() {
                        m.stop();
                    }
                    drop(senders);
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(Error::Io {
                        context: format!("starting the worker thread of device {label}"),
                        source: e,
                    });
                }
            }
        }
        drop(started_tx);
        peers.connect(slots.clone());
        // Wait for every worker's first contact: it decides the components of a device whose configuration
        // left its shape open, so the lookups are built from what it found. A broken simulation file is the
        // caller's to fix now.
        let mut first_error = None;
        for (_, result) in started_rx.iter().take(count) {
            if let Err(e @ Error::Simulation { .. }) = result {
                first_error.get_or_insert(e);
            }
        }
        let found: Vec<Device> = slots
            .iter()
            .map(|s| (*worker::snapshot(s)).clone())
            .collect();
        let directory = Directory::new(&found);
        // The events a device's components ask for come from its push channel too, listener or not (from what
        // the first contact found: a device following its profile has that profile's components).
        // CoIoT statuses are a push channel of Gen1 devices: their events too are derived and deduplicated.
        let pushed: Vec<_> = found
            .iter()
            .zip(&tunnels)
            .zip(&coiot.links)
            .map(|((d, t), l)| {
                (t.is_some() || l.is_some()).then(|| {
                    crate::webhook::routing::Pushed::new(install::wanted_events(
                        d,
                        &settings.webhooks,
                    ))
                })
            })
            .collect();
        drop(found);
        let shared = Arc::new(Shared {
            directory,
            slots,
            hook_inboxes: inboxes,
            read_budget: ReadBudget::default(),
            senders: RwLock::new(Some(senders)),
            push: pushed,
            dedupe: Default::default(),
            allowed,
            ota: Default::default(),
        });
        let _ = sink.0.set(shared.clone());
        let controller = Controller {
            settings,
            shared,
            running: Mutex::new(Some(Running {
                threads,
                supervisor: None,
                stop_supervisor: None,
                listener,
                push,
                mqtt,
                find: None,
                coiot: None,
            })),
            closing,
            http: http.clone(),
            tls_http,
            queue,
            wake,
            updates: Default::default(),
            push_tunnels,
        };
        if let Some(e) = first_error {
            controller.close();
            return Err(e);
        }
        let ctx = Arc::new(crate::actor::push::Context {
            channel: crate::event::EventChannel::Push,
            shared: controller.shared.clone(),
            queue: controller.queue.clone(),
            wake: controller.wake.clone(),
        });
        // Notifications, telemetry and announcements reach the workers from now on (before, every device's
        // first contact read its state).
        let _ = mqtt_ctx.set(Arc::new(crate::actor::push::Context {
            channel: crate::event::EventChannel::Mqtt,
            shared: controller.shared.clone(),
            queue: controller.queue.clone(),
            wake: controller.wake.clone(),
        }));
        if !outbound_targets.is_empty() {
            let macs = outbound_targets
                .iter()
                .map(|t| controller.settings.devices.get(t.di).and_then(|c| c.mac))
                .collect();
            let sink = crate::actor::outbound::Outbound::new(outbound_targets, macs, ctx.clone());
            let _ = ws_sink.0.set(Arc::new(sink));
        }
        // Notifications and events reach the workers and the queue from now on.
        let _ = push_ctx.set(ctx.clone());
        if let Some(p) = controller
            .lock_running()
            .as_ref()
            .and_then(|r| r.push.as_ref())
        {
            p.wake();
        }
        if let Some(socket) = coiot_socket {
            let ids: Vec<i64> = (controller.shared.slots.iter())
                .map(|s| worker::snapshot(s).id)
                .collect();
            let targets = coiot.targets(&ids);
            let coiot_ctx = Arc::new(crate::actor::push::Context {
                channel: crate::event::EventChannel::Coiot,
                shared: controller.shared.clone(),
                queue: controller.queue.clone(),
                wake: controller.wake.clone(),
            });
            let listener = crate::coiot::listener::Listener::start(socket, targets, coiot_ctx)
                .map_err(|e| {
                    controller.close();
                    Error::Io {
                        context: "starting the CoIoT listener thread".into(),
                        source: e,
                    }
                })?;
            if let Some(r) = controller.lock_running().as_mut() {
                r.coiot = Some(listener);
            }
        }
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(1);
        let senders = controller.all_senders()?;
        let sleepers = senders
            .iter()
            .zip(&controller.settings.devices)
            .filter(|(_, c)| crate::sleep::sleeps(&controller.settings, c))
            .map(|(w, _)| w.clone())
            .collect();
        let interval = controller.settings.refresh_interval;
        let sup =
            supervisor::spawn(senders, sleepers, interval, stop_rx).map_err(|e| Error::Io {
                context: "starting the supervisor thread".into(),
                source: e,
            })?;
        if let Some(r) = controller.lock_running().as_mut() {
            r.supervisor = Some(sup);
            r.stop_supervisor = Some(stop_tx);
        }
        // Devices configured with a MAC are followed when they do not answer at their address.
        let macs: Vec<Option<crate::mac::Mac>> = controller
            .settings
            .devices
            .iter()
            // Devices behind the broker are reached by topic, never at an address.
            .map(|c| {
                c.mac.filter(|_| {
                    !c.simulate && controller.settings.channel_of(c) != crate::config::Channel::Mqtt
                })
            })
            .collect();
        if controller.settings.follow_moves && macs.iter().any(Option::is_some) {
            let finder = finder.unwrap_or_else(|| {
                Box::new(crate::discovery::MdnsFinder::new(
                    (*controller.settings.models).clone(),
                ))
            });
            let find = crate::actor::find::Find::start(
                controller.shared.clone(),
                macs,
                finder,
                crate::actor::restart::real_now(),
            )
            .map_err(|e| {
                controller.close();
                Error::Io {
                    context: "starting the thread that follows devices that moved".into(),
                    source: e,
                }
            })?;
            if let Some(r) = controller.lock_running().as_mut() {
                r.find = Some(find);
            }
        }
        log::info!(
            "smartdev opened {} device(s) from {}",
            count,
            controller.settings.source
        );
        Ok(controller)
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sender(&self, device: usize) -> Result<WorkerTx> {
        let guard = self
            .shared
            .senders
            .read()
            .unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .and_then(|s| s.get(device).cloned())
            .ok_or(Error::Closed)
    }

    fn all_senders(&self) -> Result<Vec<WorkerTx>> {
        let guard = self
            .shared
            .senders
            .read()
            .unwrap_or_else(|e| e.into_inner());
        guard.as_ref().cloned().ok_or(Error::Closed)
    }

    fn snapshot(&self, device: usize) -> Arc<Device> {
        worker::snapshot(&self.shared.slots[device])
    }

    fn ensure_open(&self) -> Result<()> {
        match self
            .shared
            .senders
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            Some(_) => Ok(()),
            None => Err(Error::Closed),
        }
    }

    /// Sends a refresh to one worker and waits for its answer.
    fn refresh_index(&self, device: usize) -> Result<()> {
        self.ask(device, |reply| Command::Refresh {
            reply: Some(reply),
            pre: None,
        })
    }

    /// Sends device `di`'s worker the command `command` builds around a reply channel, and waits for the answer.
    pub(crate) fn ask<T>(
        &self,
        di: usize,
        command: impl FnOnce(crossbeam_channel::Sender<Result<T>>) -> Command,
    ) -> Result<T> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.sender(di)?
            .send(command(reply))
            .map_err(|_| Error::Closed)?;
        rx.recv().map_err(|_| self.worker_gone(di))?
    }

    fn worker_gone(&self, device: usize) -> Error {
        let d = self.snapshot(device);
        Error::WorkerFailed {
            device: d.label(),
            message: d
                .last_error
                .clone()
                .unwrap_or_else(|| "the worker thread stopped".into()),
        }
    }

    /// The settings the controller was opened with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The model library in use.
    pub fn model_library(&self) -> &ModelLibrary {
        &self.settings.models
    }

    /// Text listing of the model library (`brief` or `detailed`), optionally for one model.
    pub fn print_model_library(&self, mode: PrintMode, model: Option<&str>) -> Result<String> {
        self.settings.models.print(mode, model)
    }

    /// Text listing of all devices (or one) with their components and custom attributes, as last read.
    pub fn print_device_status(&self, device: Option<&Identity>) -> Result<String> {
        let blocks: Vec<String> = match device {
            Some(id) => vec![crate::print::device_status(
                &self.snapshot(self.shared.directory.device(id)?),
            )],
            None => (0..self.shared.slots.len())
                .map(|i| crate::print::device_status(&self.snapshot(i)))
                .collect(),
        };
        Ok(blocks.join("\n"))
    }

    /// Reads the device now and returns its object (model, online state, status fields, components, custom
    /// attributes). Fails with a timeout, offline or device error when the device cannot be read.
    pub fn read_device(&self, device: impl Into<Identity>) -> Result<Device> {
        let device = &device.into();
        let i = self.shared.directory.device(device)?;
        self.refresh_index(i)?;
        Ok((*self.snapshot(i)).clone())
    }

    /// The spec's `get_device`: reads the device now (device I/O, like [`read_device`](Self::read_device))
    /// and returns its object. When the read fails, the error comes with the device's object as it stands
    /// after the failure ([`GetDeviceError::device`]: `online` false and `last_error` set when it could not be
    /// reached), so nothing has to be read twice. The same meaning as C `sd_get_device`, Go `GetDevice` and
    /// Python `get_device`.
    pub fn get_device(
        &self,
        device: impl Into<Identity>,
    ) -> std::result::Result<Device, GetDeviceError> {
        let device = &device.into();
        let i = self
            .shared
            .directory
            .device(device)
            .map_err(|error| GetDeviceError {
                error,
                device: None,
            })?;
        match self.refresh_index(i) {
            Ok(()) => Ok((*self.snapshot(i)).clone()),
            Err(error) => Err(GetDeviceError {
                error,
                device: Some(Box::new((*self.snapshot(i)).clone())),
            }),
        }
    }

    /// The spec's `get_device_component`: one component as last read (no device I/O), the same as
    /// [`component`](Self::component). C `sd_get_device_component`, Go `GetDeviceComponent` and Python
    /// `get_device_component` mean the same.
    pub fn get_device_component(
        &self,
        kind: ComponentKind,
        component: impl Into<Identity>,
    ) -> Result<Component> {
        self.component(kind, component)
    }

    /// The device's object as last read, without device I/O.
    pub fn device(&self, device: impl Into<Identity>) -> Result<Device> {
        let device = &device.into();
        let i = self.shared.directory.device(device)?;
        Ok((*self.snapshot(i)).clone())
    }

    /// Every device's object as last read, in configuration order.
    pub fn devices(&self) -> Vec<Device> {
        (0..self.shared.slots.len())
            .map(|i| (*self.snapshot(i)).clone())
            .collect()
    }

    /// One component as last read: `State` for inputs and outputs, readings for meters and probes.
    pub fn component(
        &self,
        kind: ComponentKind,
        component: impl Into<Identity>,
    ) -> Result<Component> {
        let (di, ci) = self.shared.directory.component(kind, &component.into())?;
        let d = self.snapshot(di);
        Ok(match kind {
            ComponentKind::Input => Component::Input(d.inputs[ci].clone()),
            ComponentKind::Output => Component::Output(d.outputs[ci].clone()),
            ComponentKind::Meter => Component::Meter(d.meters[ci].clone()),
            ComponentKind::TempProbe => Component::TempProbe(d.temp_probes[ci].clone()),
            ComponentKind::Cover => Component::Cover(d.covers[ci].clone()),
            ComponentKind::Sensor => Component::Sensor(d.sensors[ci].clone()),
        })
    }

    /// One input as last read.
    pub fn input(&self, input: impl Into<Identity>) -> Result<Input> {
        let input = &input.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Input, input)?;
        Ok(self.snapshot(di).inputs[ci].clone())
    }

    /// One output as last read.
    pub fn output(&self, output: impl Into<Identity>) -> Result<Output> {
        let output = &output.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Output, output)?;
        Ok(self.snapshot(di).outputs[ci].clone())
    }

    /// One meter as last read.
    pub fn meter(&self, meter: impl Into<Identity>) -> Result<Meter> {
        let meter = &meter.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Meter, meter)?;
        Ok(self.snapshot(di).meters[ci].clone())
    }

    /// One temperature probe as last read.
    pub fn temp_probe(&self, probe: impl Into<Identity>) -> Result<TempProbe> {
        let probe = &probe.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::TempProbe, probe)?;
        Ok(self.snapshot(di).temp_probes[ci].clone())
    }

    /// One cover as last read.
    pub fn cover(&self, cover: impl Into<Identity>) -> Result<Cover> {
        let cover = &cover.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Cover, cover)?;
        Ok(self.snapshot(di).covers[ci].clone())
    }

    /// One sensor as last read.
    pub fn sensor(&self, sensor: impl Into<Identity>) -> Result<Sensor> {
        let sensor = &sensor.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Sensor, sensor)?;
        Ok(self.snapshot(di).sensors[ci].clone())
    }

    /// All covers of all devices, as last read.
    pub fn covers(&self) -> Vec<Cover> {
        self.collect(|d| d.covers.clone())
    }

    /// All sensors of all devices, as last read.
    pub fn sensors(&self) -> Vec<Sensor> {
        self.collect(|d| d.sensors.clone())
    }

    // Names of 0.1.0, renamed by the naming rule (read_*/refresh_* do device I/O); kept for one release at least.

    /// One input as last read (renamed `input` in 0.2.0).
    #[deprecated(
        since = "0.2.0",
        note = "use `input` (same meaning: last known state, no device I/O)"
    )]
    pub fn get_input(&self, input: impl Into<Identity>) -> Result<Input> {
        self.input(input)
    }

    /// One output as last read (renamed `output` in 0.2.0).
    #[deprecated(
        since = "0.2.0",
        note = "use `output` (same meaning: last known state, no device I/O)"
    )]
    pub fn get_output(&self, output: impl Into<Identity>) -> Result<Output> {
        self.output(output)
    }

    /// One meter as last read (renamed `meter` in 0.2.0).
    #[deprecated(
        since = "0.2.0",
        note = "use `meter` (same meaning: last known state, no device I/O)"
    )]
    pub fn get_meter(&self, meter: impl Into<Identity>) -> Result<Meter> {
        self.meter(meter)
    }

    /// One temperature probe as last read (renamed `temp_probe` in 0.2.0).
    #[deprecated(
        since = "0.2.0",
        note = "use `temp_probe` (same meaning: last known state, no device I/O)"
    )]
    pub fn get_temp_probe(&self, probe: impl Into<Identity>) -> Result<TempProbe> {
        self.temp_probe(probe)
    }

    /// All inputs of all devices, as last read (renamed `inputs` in 0.2.0).
    #[deprecated(
        since = "0.2.0",
        note = "use `inputs` (same meaning: last known state, no device I/O)"
    )]
    pub fn get_inputs(&self) -> Vec<Input> {
        self.inputs()
    }

    /// All outputs of all devices, as last read (renamed `outputs` in 0.2.0).
    #[deprecated(
        since = "0.2.0",
        note = "use `outputs` (same meaning: last known state, no device I/O)"
    )]
    pub fn get_outputs(&self) -> Vec<Output> {
        self.outputs()
    }

    /// All meters of all devices, as last read (renamed `meters` in 0.2.0).
    #[deprecated(
        since = "0.2.0",
        note = "use `meters` (same meaning: last known state, no device I/O)"
    )]
    pub fn get_meters(&self) -> Vec<Meter> {
        self.meters()
    }

    /// All temperature probes of all devices, as last read (renamed `temp_probes` in 0.2.0).
    #[deprecated(
        since = "0.2.0",
        note = "use `temp_probes` (same meaning: last known state, no device I/O)"
    )]
    pub fn get_temp_probes(&self) -> Vec<TempProbe> {
        self.temp_probes()
    }

    /// Makes a cover open, close, stop or go to a position, and returns it as the device reports it right after
    /// the command (usually `opening`/`closing`; the move itself takes the motor's time). A position needs a
    /// calibrated cover: an uncalibrated one gives [`Error::Unsupported`] saying so.
    pub fn move_cover(&self, cover: impl Into<Identity>, action: CoverAction) -> Result<Cover> {
        if let CoverAction::Position(p) = action
            && p > 100
        {
            return Err(Error::InvalidArgument(format!(
                "cover position {p} is out of range; use 0 (closed) to 100 (open)"
            )));
        }
        let cover = &cover.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Cover, cover)?;
        // The cover as the command read it: the snapshot may already hold a read served from notifications
        // that were sent before the command (seen as a cover reported `open` right after a move to 30 %).
        self.ask(di, |reply| Command::Cover {
            index: ci,
            action,
            reply,
        })
    }

    /// Sets a light: on/off, brightness, colour temperature, RGB, white and the transition, each only if given
    /// (see [`LightChange`]), and returns the output as the device reported it right after. Out-of-range values
    /// and capabilities the light lacks (colour on a dimmer) are refused before anything is sent, with the range
    /// or the model in the message.
    pub fn set_light(&self, output: impl Into<Identity>, change: LightChange) -> Result<Output> {
        change.check()?;
        let output = &output.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Output, output)?;
        self.ask(di, |reply| Command::Light {
            index: ci,
            change,
            reply,
        })
    }

    /// All inputs of all devices, as last read.
    pub fn inputs(&self) -> Vec<Input> {
        self.collect(|d| d.inputs.clone())
    }

    /// All outputs of all devices, as last read.
    pub fn outputs(&self) -> Vec<Output> {
        self.collect(|d| d.outputs.clone())
    }

    /// All meters of all devices, as last read.
    pub fn meters(&self) -> Vec<Meter> {
        self.collect(|d| d.meters.clone())
    }

    /// All temperature probes of all devices, as last read.
    pub fn temp_probes(&self) -> Vec<TempProbe> {
        self.collect(|d| d.temp_probes.clone())
    }

    fn collect<T>(&self, f: impl Fn(&Device) -> Vec<T>) -> Vec<T> {
        (0..self.shared.slots.len())
            .flat_map(|i| f(&self.snapshot(i)))
            .collect()
    }

    /// Switches an output on (`true`) or off. `did_change` is true exactly when the state changed, as the device
    /// reports it.
    pub fn change_output(
        &self,
        output: impl Into<Identity>,
        desired: bool,
    ) -> Result<OutputChange> {
        let output = &output.into();
        self.apply_output(output, OutputAction::set(desired))
    }

    /// Switches an output to the opposite of its current state.
    pub fn toggle_output(&self, output: impl Into<Identity>) -> Result<OutputChange> {
        let output = &output.into();
        self.apply_output(output, OutputAction::Toggle)
    }

    fn apply_output(&self, output: &Identity, action: OutputAction) -> Result<OutputChange> {
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Output, output)?;
        self.ask(di, |reply| Command::Switch {
            index: ci,
            action,
            reply,
        })
    }

    /// Reads every device at once (all workers in parallel) and reports which failed. One failing device never
    /// stops the others.
    pub fn refresh_all(&self) -> Result<RefreshReport> {
        let senders = self.all_senders()?;
        let began = std::time::Instant::now();
        let mut pending = Vec::with_capacity(senders.len());
        for (i, tx) in senders.iter().enumerate() {
            let (reply, rx) = crossbeam_channel::bounded(1);
            // Over a push channel the request goes out from here, and the worker's command waits for its
            // answer unwoken: one wake-up per device, not one for the command and one for the answer.
            let pre = self
                .push_tunnels
                .get(i)
                .and_then(Option::as_ref)
                .and_then(|t| t.pre_read(tx.ringer()));
            let wake = pre.as_ref().map(PreRead::wake);
            let cmd = Command::Refresh {
                reply: Some(reply),
                pre,
            };
            let sent = match &wake {
                Some(wake) => tx.send_quiet(cmd).map(|()| wake.arm()),
                None => tx.send(cmd),
            };
            pending.push((i, sent.map(|()| (rx, wake))));
        }
        // A device silent for a whole timeout: its worker is woken to give the read up, as when it waits.
        let deadline = began + self.settings.response_timeout;
        let mut report = RefreshReport::default();
        for (i, sent) in pending {
            let result = match sent {
                Ok((rx, wake)) => {
                    let got = match wake {
                        Some(wake) => rx.recv_deadline(deadline).or_else(|_| {
                            wake.ring_now();
                            rx.recv()
                        }),
                        None => rx.recv(),
                    };
                    got.unwrap_or_else(|_| Err(self.worker_gone(i)))
                }
                Err(_) => Err(Error::Closed),
            };
            match result {
                Ok(()) => report.refreshed += 1,
                Err(error) => {
                    let d = self.snapshot(i);
                    report.failures.push(RefreshFailure {
                        device_id: d.id,
                        device_name: d.name.clone(),
                        error,
                    });
                }
            }
        }
        Ok(report)
    }

    /// Whether the device was online at its last contact (no device I/O).
    pub fn is_device_online(&self, device: impl Into<Identity>) -> Result<bool> {
        let device = &device.into();
        self.ensure_open()?;
        let i = self.shared.directory.device(device)?;
        Ok(self.snapshot(i).online)
    }

    /// Removes and returns the oldest queued webhook event, if any.
    pub fn pull_webhook_event(&self) -> Option<WebhookEvent> {
        self.queue.pull(&EventFilter::default())
    }

    /// Removes and returns the oldest queued event matching `filter` (by device and/or component).
    pub fn pull_webhook_event_matching(&self, filter: &EventFilter) -> Option<WebhookEvent> {
        self.queue.pull(filter)
    }

    /// Events waiting in the queue, and events dropped so far because it was full.
    pub fn webhook_queue_stats(&self) -> QueueStats {
        QueueStats {
            waiting: self.queue.len(),
            dropped: self.queue.dropped(),
            duplicates: self.shared.dedupe.dropped(),
        }
    }

    /// The address the webhook listener is bound to (its real port even when 0 was configured), when it runs.
    pub fn webhook_address(&self) -> Option<std::net::SocketAddr> {
        self.lock_running()
            .as_ref()
            .and_then(|r| r.listener.as_ref())
            .map(Listener::addr)
    }

    /// The address the Gen1 CoIoT listener is bound to (`0.0.0.0` and its real port, even when `CoIoTPort: 0`),
    /// while it runs: Gen1 devices are configured, `CoIoT` is not false and the port was free.
    pub fn coiot_address(&self) -> Option<std::net::SocketAddr> {
        self.lock_running()
            .as_ref()
            .and_then(|r| r.coiot.as_ref())
            .map(crate::coiot::listener::Listener::addr)
    }

    /// The wake flag given to `open`, if any.
    pub fn wake_flag(&self) -> Option<&WakeFlag> {
        self.wake.as_ref()
    }

    /// Stops the listener, the supervisor and every worker and joins their threads; closing twice is
    /// harmless. After close, calls that need a worker or the listener (`read_device`, `refresh_all`,
    /// `change_output`, `toggle_output`) fail with [`Error::Closed`] and `webhook_address` is `None`; reads of
    /// the last known state (`device`, `output`, `print_device_status`, ...), `settings`, the model
    /// library and pulling events already queued keep working.
    pub fn close(&self) {
        let Some(mut running) = self.lock_running().take() else {
            return;
        };
        // No more lookups (their moves are commands to the workers); a browse ends within 50 ms.
        if let Some(mut f) = running.find.take() {
            f.stop();
        }
        // No new webhooks first (they would send commands to the workers), then the threads.
        if let Some(mut l) = running.listener.take() {
            l.stop();
        }
        // No more notifications either: the push threads post to the workers, so they go before them.
        if let Some(mut p) = running.push.take() {
            p.stop();
        }
        if let Some(mut m) = running.mqtt.take() {
            m.stop();
        }
        if let Some(mut c) = running.coiot.take() {
            c.stop();
        }
        // Retry waits end early and requests on the wire are interrupted, so workers stuck on silent devices
        // return at once.
        self.closing.store(true, Ordering::Relaxed);
        self.http.shutdown();
        for h in &self.tls_http {
            h.shutdown();
        }
        drop(running.stop_supervisor.take());
        // Dropping the senders ends each worker's loop once in-flight commands are answered.
        drop(
            self.shared
                .senders
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        // The supervisor first: it holds senders too.
        let mut n = running.threads.len();
        if let Some(t) = running.supervisor.take() {
            let _ = t.join();
            n += 1;
        }
        for t in running.threads {
            let _ = t.join();
        }
        if n > 0 {
            log::info!("smartdev closed ({} thread(s) joined)", n);
        }
    }
}

/// The devices that get a push channel: Gen2+ (RPC) network devices whose `Channel` (or the root's) is `auto`.
fn push_targets(
    devices: &[Device],
    settings: &Settings,
    tls: &[Option<Arc<crate::driver::tls::DeviceTls>>],
) -> Vec<crate::actor::push::Target> {
    use crate::models::{ModelRef, Protocol};
    devices
        .iter()
        .zip(&settings.devices)
        .enumerate()
        .filter_map(|(di, (d, cfg))| {
            if cfg.channel.unwrap_or(settings.channel) != crate::config::Channel::Auto || d.simulate
            {
                return None;
            }
            // A device configured by its MAC alone gets its channel once it is found (`actor/push.rs`).
            if d.hostname.is_none() && cfg.mac.is_none() {
                return None;
            }
            let Some(ModelRef::Vendor(m)) = settings.models.resolve(&d.model) else {
                return None;
            };
            (m.protocol == Protocol::Rpc).then(|| crate::actor::push::Target {
                di,
                id: d.id,
                label: d.label(),
                password: cfg.password.as_ref().map(|p| p.expose().to_string()),
                output_type: output_component(m, d),
                tunnel: Default::default(),
                // An HTTPS device's push channel is WSS, verified as its HTTPS requests are.
                tls: tls.get(di).cloned().flatten(),
                initial: d.address.clone().map(|h| (h, d.port)),
                // A certificate to pin at first use is pinned by the worker's HTTPS contact (the trust file
                // write waits; the poller must not), and the channel follows.
                early: !tls
                    .get(di)
                    .and_then(Option::as_ref)
                    .is_some_and(|t| t.pins_first()),
                mac: cfg.mac,
            })
        })
        .collect()
}

/// The devices on the MQTT channel (`Channel: mqtt`, Gen2+ and Tasmota; the configuration was checked), each
/// with its `Port` on the one broker link, and (Gen2+) a tunnel for its requests, put in `tunnels`. The
/// second list gives each device's port by configuration index.
#[allow(clippy::type_complexity)]
fn mqtt_targets(
    devices: &[Device],
    settings: &Settings,
    tunnels: &mut [Option<Arc<crate::driver::ws::tunnel::Tunnel>>],
) -> (
    Vec<crate::actor::mqtt::Target>,
    Vec<Option<Arc<crate::mqtt::link::Port>>>,
) {
    use crate::models::{ModelRef, OutputKind, Protocol};
    use crate::mqtt::topics::Family;
    let mut ports = vec![None; devices.len()];
    let Some(m) = &settings.mqtt else {
        return (Vec::new(), ports);
    };
    let link = Arc::new(crate::mqtt::link::Link::new(
        m.client_id.clone(),
        format!("{}:{}", crate::hostname::url_host(&m.host), m.port),
    ));
    let mut out = Vec::new();
    for (di, (d, cfg)) in devices.iter().zip(&settings.devices).enumerate() {
        if settings.channel_of(cfg) != crate::config::Channel::Mqtt || d.simulate {
            continue;
        }
        let (family, output_type) = match settings.models.resolve(&d.model) {
            Some(ModelRef::Vendor(m)) if m.protocol == Protocol::Rpc => (
                Family::Rpc,
                match m.output_kind {
                    OutputKind::Switch => "switch",
                    OutputKind::Light => "light",
                },
            ),
            Some(ModelRef::Tasmota) => (Family::Tasmota, ""),
            _ => continue,
        };
        let Ok(topics) = crate::mqtt::topics::for_device(cfg, family) else {
            continue;
        };
        let port = Arc::new(crate::mqtt::link::Port::new(link.clone(), topics));
        ports[di] = Some(port.clone());
        let rpc = (family == Family::Rpc).then(|| {
            let tunnel: Arc<crate::driver::ws::tunnel::Tunnel> = Arc::default();
            tunnels[di] = Some(tunnel.clone());
            crate::actor::push::Target {
                di,
                id: d.id,
                label: d.label(),
                password: None,
                output_type,
                tunnel,
                tls: None,
                initial: None,
                early: false,
                mac: None,
            }
        });
        out.push(crate::actor::mqtt::Target {
            di,
            id: d.id,
            label: d.label(),
            port,
            rpc,
        });
    }
    (out, ports)
}

/// The devices that report through the outbound WebSocket (`sleep::outbound`), each sharing the tunnel of its
/// push channel if it has one (its driver reads the reports from the tunnel's mirror); `tunnels` gets the new
/// ones.
fn outbound_targets(
    devices: &[Device],
    settings: &Settings,
    tunnels: &mut [Option<Arc<crate::driver::ws::tunnel::Tunnel>>],
) -> Vec<crate::actor::push::Target> {
    use crate::models::ModelRef;
    let mut out = Vec::new();
    for (di, (d, cfg)) in devices.iter().zip(&settings.devices).enumerate() {
        if !crate::sleep::outbound(settings, cfg) {
            continue;
        }
        let Some(ModelRef::Vendor(m)) = settings.models.resolve(&d.model) else {
            continue;
        };
        let tunnel = tunnels[di].get_or_insert_with(Default::default).clone();
        out.push(crate::actor::push::Target {
            di,
            id: d.id,
            label: d.label(),
            password: None,
            output_type: output_component(m, d),
            tunnel,
            // The device connects to us: nothing is dialed, so no client TLS.
            tls: None,
            initial: None,
            early: false,
            mac: cfg.mac,
        });
    }
    out
}

/// The Gen2+ component type of a device's outputs in the profile it is in (`switch`, `light`, `cct`, `rgb`,
/// `rgbw`).
fn output_component(m: &crate::models::ModelInfo, d: &Device) -> &'static str {
    m.shape_for(d.profile.as_deref())
        .unwrap_or_else(|_| m.default_shape())
        .output_component()
}

/// The addresses of the configured devices (what `AllowedSources: devices` accepts).
fn device_addresses(devices: &[Device]) -> Vec<std::net::IpAddr> {
    use std::net::ToSocketAddrs;
    let mut out = Vec::new();
    for d in devices {
        let Some(host) = &d.hostname else { continue };
        match (host.trim_matches(['[', ']']), d.port).to_socket_addrs() {
            Ok(addrs) => out.extend(addrs.map(|a| a.ip())),
            Err(e) => log::warn!(
                "device {}: cannot resolve {host} for AllowedSources: {e}",
                d.label()
            ),
        }
    }
    out
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.close();
    }
}
