//! `sdctl`: the command-line face of smartdev. Run without `--config` it uses an embedded demo of simulated
//! devices, whose files live in one per-user folder (see `demo_dir`).

mod args;
mod emulate;
mod energy;
mod firmware;

use std::mem::ManuallyDrop;
use std::path::PathBuf;
use std::process::ExitCode;

use args::{Args, Command};
use smartdev::config::LogSettings;
use smartdev::logging::{self, Verbosity};
use smartdev::{Controller, ControllerBuilder, Error, ModelLibrary, PrintMode, Settings, WakeFlag};

const DEMO: &str = include_str!("demo.yaml");
const DEMO_SCHEMA: &str = include_str!("demo-schema.yaml");

/// Exit code for usage and configuration errors.
const USAGE_ERROR: u8 = 2;
/// Exit code for failed operations (offline, timeout, device error).
const FAILED: u8 = 1;

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    // `emulate` has its own grammar (device specs), so it is dispatched before the common options.
    if raw.first().map(String::as_str) == Some("emulate") {
        return emulate::run(&raw[1..]);
    }
    let args = match args::parse(raw) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sdctl: {e}\n\n{}", args::USAGE);
            return ExitCode::from(USAGE_ERROR);
        }
    };
    match run(&args) {
        Ok(Done::Yes) => ExitCode::SUCCESS,
        // What failed was already shown (an offline device in the status listing).
        Ok(Done::Shown) => ExitCode::from(FAILED),
        Ok(Done::Refused) => ExitCode::from(USAGE_ERROR),
        Err(e) => {
            eprintln!("sdctl: {e}");
            ExitCode::from(exit_code(&e))
        }
    }
}

/// How a command ended when it did not end in an error still to be printed.
enum Done {
    /// Everything worked.
    Yes,
    /// Something failed and the output already says what.
    Shown,
    /// The configuration is invalid and the output already says why (exit code of a usage error).
    Refused,
}

fn exit_code(e: &Error) -> u8 {
    if e.is_usage() { USAGE_ERROR } else { FAILED }
}

/// The controller builder for the command line's schemas and model library (the library's one way to open).
fn builder(args: &Args) -> Result<ControllerBuilder, Error> {
    let mut builder = Controller::builder();
    if args.config.is_none() {
        builder = builder.schema_yaml(DEMO_SCHEMA, "<demo schema>")?;
    }
    for s in &args.schemas {
        builder = builder.schema_file(s)?;
    }
    if let Some(m) = &args.models {
        builder = builder.models_file(m)?;
    }
    Ok(builder)
}

fn load(args: &Args) -> Result<Settings, Error> {
    let loader = builder(args)?;
    match &args.config {
        Some(path) => loader.load_file(path),
        None => {
            let mut settings = loader.load_yaml(DEMO)?;
            settings.simulation_folder = demo_dir();
            eprintln!(
                "sdctl: no --config: embedded demo, simulated devices in {}",
                settings.simulation_folder.display()
            );
            Ok(settings)
        }
    }
}

/// Where the embedded demo keeps its simulation files, the same folder wherever sdctl runs:
/// `$SMARTDEV_DEMO_DIR` when set, else `$XDG_STATE_HOME/smartdev/demo`, else `~/.local/state/smartdev/demo`,
/// else (no usable home) `smartdev-demo-<user>` in the temporary directory. Created if missing.
fn demo_dir() -> PathBuf {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = env("SMARTDEV_DEMO_DIR") {
        // Asked for explicitly: used as it is (a problem with it is reported when the demo opens).
        return PathBuf::from(dir);
    }
    let mut candidates = Vec::new();
    // The XDG base-directory rules ignore a relative XDG_STATE_HOME.
    if let Some(state) = env("XDG_STATE_HOME").map(PathBuf::from)
        && state.is_absolute()
    {
        candidates.push(state.join("smartdev").join("demo"));
    }
    if let Some(home) = env("HOME") {
        candidates.push(PathBuf::from(home).join(".local/state/smartdev/demo"));
    }
    let user = env("USER")
        .or_else(|| env("LOGNAME"))
        .map_or_else(|| "user".to_string(), |u| u.to_string_lossy().into_owned());
    let fallback = std::env::temp_dir().join(format!("smartdev-demo-{user}"));
    candidates
        .into_iter()
        .find(|dir| std::fs::create_dir_all(dir).is_ok())
        .unwrap_or(fallback)
}

fn init_logging(args: &Args, settings: &Settings) -> Result<(), Error> {
    let mut log = settings.logging.clone().unwrap_or(LogSettings {
        logfile: None,
        logfile_verbosity: Verbosity::None,
        console_verbosity: Verbosity::Warning,
        thread_ids: false,
    });
    if args.verbose {
        log.console_verbosity = Verbosity::Detailed;
    }
    logging::init(&log).map(|_| ())
}

fn print_json<T: serde::Serialize>(value: &T) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::InvalidArgument(format!("cannot render JSON: {e}")))?;
    print_text(&text);
    Ok(())
}

/// Prints one result. A reader that went away (`sdctl get device 1 | head`) is not an error worth a panic.
fn print_text(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

fn run(args: &Args) -> Result<Done, Error> {
    let command = args.command.as_ref().expect("parse sets a command");
    match command {
        Command::Help => {
            println!("{}", args::USAGE);
            return Ok(Done::Yes);
        }
        Command::Version => {
            println!("sdctl {}", smartdev::VERSION);
            return Ok(Done::Yes);
        }
        Command::Models { detailed, model } => {
            let models = match &args.models {
                Some(m) => ModelLibrary::from_file(m)?,
                None => ModelLibrary::embedded(),
            };
            let mode = if *detailed {
                PrintMode::Detailed
            } else {
                PrintMode::Brief
            };
            // The text checks the filter (unknown model → usage error) for both outputs.
            let text = models.print(mode, model.as_deref())?;
            if args.json {
                let chosen: Vec<&smartdev::models::ModelInfo> = models
                    .models()
                    .iter()
                    .filter(|m| model.as_deref().is_none_or(|id| models.get(id) == Some(*m)))
                    .collect();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&chosen).unwrap_or_else(|_| "[]".into())
                );
            } else {
                println!("{text}");
            }
            return Ok(Done::Yes);
        }
        Command::Check => return check(args),
        Command::Trust { device, expect } => {
            let settings = load(args)?;
            init_logging(args, &settings)?;
            let change = smartdev::trust_certificate(&settings, device, expect.as_deref())?;
            if args.json {
                print_json(&serde_json::json!({
                    "Device": change.device,
                    "Previous": change.previous,
                    "Accepted": change.accepted,
                    "TrustFile": change.file.display().to_string(),
                }))?;
            } else {
                print_text(&format!(
                    "{}: certificate SHA-256 {} trusted (was {}) in {}",
                    change.device,
                    change.accepted,
                    change.previous.as_deref().unwrap_or("none"),
                    change.file.display()
                ));
            }
            return Ok(Done::Yes);
        }
        Command::Discover { timeout } => return discover(args, *timeout),
        _ => {}
    }
    let mut settings = load(args)?;
    init_logging(args, &settings)?;
    // Only `events` (or `--listen`) runs the webhook listener; listening is the point of `events`, so it runs
    // even when the file leaves it off. Every other command opens without it: next to a running application
    // (or `sdctl events`) using the same file it would find the port taken, and without a listener no hooks
    // are planned, so the application's hooks on the devices are neither rewritten nor removed.
    settings.webhooks.enabled = args.listen || matches!(command, Command::Events { .. });
    if let Command::Events { count, timeout } = command {
        return events(settings, *count, *timeout);
    }
    // A one-shot command reads what it needs itself: no background refresh (and no "retrying" promises), and
    // no CoIoT listener (it would hold UDP 5683 from a running application).
    settings.refresh_interval = None;
    one_shot_channels(&mut settings);
    let prints_state = matches!(
        command,
        Command::Status(_)
            | Command::GetDevice(_)
            | Command::ReadDevice(_)
            | Command::GetComponent(..)
    );
    if prints_state && !args.verbose {
        // These commands end with one line per offline device saying why; the open's own warning about it
        // ("offline at start") would only repeat it.
        log::set_max_level(log::LevelFilter::Error);
    }
    let path = settings.webhooks.path.clone();
    // The process exits when the command returns, and the kernel then closes every socket and ends every thread
    // at once. So the controller is never closed here: its orderly close joins one worker per device in turn
    // (about 60 ms of a 1,000-device `status`, BENCHMARKS "Issue 30"), and nothing needs it, as each command's
    // writes (trust file, simulation files) are done before its call returns.
    let ctl = ManuallyDrop::new(builder(args)?.open(settings)?);
    if let Some(addr) = ctl.webhook_address() {
        eprintln!("sdctl: listening for webhooks on http://{addr}{path}");
    }
    match command {
        Command::Status(device) => {
            // Open has just read every device: the listing is fresh, and an offline device shows as offline with
            // its last error (the exit code says it too).
            let id = device.as_deref().map(|d| args.identity(d));
            let shown = match &id {
                Some(id) => vec![ctl.device(id)?],
                None => ctl.devices(),
            };
            if args.json {
                match &id {
                    Some(_) => print_json(&shown[0])?,
                    None => print_json(&shown)?,
                }
            } else {
                println!("{}", ctl.print_device_status(id.as_ref())?);
            }
            let offline: Vec<&smartdev::Device> = shown.iter().filter(|d| !d.online).collect();
            if !offline.is_empty() {
                for d in offline {
                    eprintln!("sdctl: {}", self::offline(d));
                }
                return Ok(Done::Shown);
            }
        }
        Command::GetDevice(d) => {
            let dev = ctl.device(args.identity(d))?;
            print_device(args, &ctl, &dev)?;
            if !dev.online {
                return Err(offline(&dev));
            }
        }
        Command::ReadDevice(d) => {
            let id = args.identity(d);
            match ctl.read_device(&id) {
                Ok(dev) => print_device(args, &ctl, &dev)?,
                Err(e) if e.is_usage() => return Err(e),
                Err(e) => {
                    // The read failed: the device's object as last known still says what happened.
                    let dev = ctl.device(&id)?;
                    print_device(args, &ctl, &dev)?;
                    return Err(if dev.online { e } else { offline(&dev) });
                }
            }
        }
        Command::GetComponent(kind, c) => {
            let component = ctl.component(*kind, args.identity(c))?;
            print_json(&component)?;
            let dev = ctl.device(component.device_id())?;
            if !dev.online {
                return Err(offline(&dev));
            }
        }
        Command::Set { output, action } => {
            let id = args.identity(output);
            let change = match action.as_str() {
                "on" => ctl.change_output(&id, true)?,
                "off" => ctl.change_output(&id, false)?,
                _ => ctl.toggle_output(&id)?,
            };
            if args.json {
                print_json(&change)?;
            } else {
                let o = ctl.output(&id)?;
                println!(
                    "{} (ID: {}): {}{}",
                    o.name,
                    o.id,
                    if change.state { "on" } else { "off" },
                    if change.did_change {
                        " (changed)"
                    } else {
                        " (unchanged)"
                    }
                );
            }
        }
        Command::Firmware {
            device,
            update,
            beta,
            timeout,
        } => firmware::run(
            &ctl,
            args.identity(device),
            *update,
            *beta,
            *timeout,
            args.json,
        )?,
        Command::Light { output, change } => {
            let o = ctl.set_light(args.identity(output), *change)?;
            if args.json {
                print_json(&o)?;
            } else {
                println!("{}", describe_light(&o));
            }
        }
        Command::Energy {
            meter,
            from,
            to,
            csv,
        } => energy::run(&ctl, args.identity(meter), from, to, *csv, args.json)?,
        Command::Cover { cover, action } => {
            let c = ctl.move_cover(args.identity(cover), *action)?;
            if args.json {
                print_json(&c)?;
            } else {
                println!("{}", describe_cover(&c));
            }
        }
        _ => unreachable!("handled above"),
    }
    Ok(Done::Yes)
}

/// Default listening time of `discover`, in seconds.
const DISCOVER_SECONDS: f64 = 3.0;

/// `sdctl discover`: without `--config` the free function (no configuration needed); with it, a controller
/// opened without background work marks the devices the configuration has.
fn discover(args: &Args, timeout: Option<f64>) -> Result<Done, Error> {
    let secs = timeout.unwrap_or(DISCOVER_SECONDS).min(600.0);
    let mut options = smartdev::DiscoverOptions::new(std::time::Duration::from_secs_f64(secs));
    if args.interfaces.iter().any(|i| i == "all") {
        options.interfaces = smartdev::discovery::Interfaces::All;
    } else if !args.interfaces.is_empty() {
        options.interfaces = smartdev::discovery::Interfaces::Named(args.interfaces.clone());
    }
    let found = if args.config.is_some() {
        let mut settings = load(args)?;
        init_logging(args, &settings)?;
        settings.webhooks.enabled = false;
        settings.refresh_interval = None;
        one_shot_channels(&mut settings);
        if !args.verbose {
            // An offline configured device is no news while looking for devices.
            log::set_max_level(log::LevelFilter::Error);
        }
        let ctl = builder(args)?.open(settings)?;
        let found = ctl.discover_with(&options);
        ctl.close();
        found?
    } else {
        if args.verbose {
            let log = LogSettings {
                logfile: None,
                logfile_verbosity: Verbosity::None,
                console_verbosity: Verbosity::Detailed,
                thread_ids: false,
            };
            logging::init(&log)?;
        }
        eprintln!("sdctl: listening for devices for {secs} s (mDNS, then one HTTP request each)");
        smartdev::discover_with(&options)?
    };
    if args.json {
        print_json(&found)?;
    } else if args.yaml {
        print_text(smartdev::discovery::yaml(&found).trim_end());
    } else {
        print_text(smartdev::discovery::table(&found).trim_end());
    }
    Ok(Done::Yes)
}

/// A device object: JSON with `--json`, else its `status` text block (as last read).
fn print_device(args: &Args, ctl: &Controller, dev: &smartdev::Device) -> Result<(), Error> {
    if args.json {
        print_json(dev)
    } else {
        let text = ctl.print_device_status(Some(&smartdev::Identity::Id(dev.id)))?;
        print_text(&text);
        Ok(())
    }
}

/// The one line `sdctl: device <label>: offline; last error: <why>` for a device that is offline.
fn offline(dev: &smartdev::Device) -> Error {
    let message = match dev.last_error.as_deref() {
        Some(why) if why != "offline" => format!("offline; last error: {why}"),
        _ => "offline".to_string(),
    };
    Error::Device {
        device: dev.label(),
        message,
    }
}

/// `Blind (ID: 1): opening, position 40 %`; what the device has not reported is said to be unknown.
/// `Lamp (ID: 3): on, brightness 40 %, colour 3000 K`: what the light reports; a part it does not report is
/// left out, and an unknown state or brightness says so.
fn describe_light(o: &smartdev::Output) -> String {
    let mut parts = vec![match o.state {
        Some(true) => "on".to_string(),
        Some(false) => "off".to_string(),
        None => "state unknown".to_string(),
    }];
    parts.push(match o.brightness {
        Some(b) => format!("brightness {b:.0} %"),
        None => "brightness unknown".to_string(),
    });
    if let Some(k) = o.color_temperature {
        parts.push(format!("colour {k:.0} K"));
    }
    if let Some(rgb) = o.rgb {
        parts.push(format!("RGB {}", smartdev::light::format_rgb(rgb)));
    }
    if let Some(w) = o.white {
        parts.push(format!("white {w:.0} %"));
    }
    format!("{} (ID: {}): {}", o.name, o.id, parts.join(", "))
}

fn describe_cover(c: &smartdev::Cover) -> String {
    let state = c.state.map_or("state unknown", |s| s.as_str());
    let position = match (c.position, c.calibrated) {
        (Some(p), _) => format!(", position {p} %"),
        (None, Some(false)) => ", not calibrated (no position)".to_string(),
        (None, _) => ", position unknown".to_string(),
    };
    format!("{} (ID: {}): {state}{position}", c.name, c.id)
}

/// Runs the listener and prints one JSON line per event until `count` events or `timeout` seconds.
fn events(settings: Settings, count: Option<u64>, timeout: Option<f64>) -> Result<Done, Error> {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let path = settings.webhooks.path.clone();
    let wake = WakeFlag::new();
    let ctl = Controller::builder().wake(wake.clone()).open(settings)?;
    if let Some(addr) = ctl.webhook_address() {
        eprintln!("sdctl: listening for webhooks on http://{addr}{path}");
    }
    // Parsing accepts any finite seconds; a timeout beyond what a clock can add is no timeout.
    let deadline = timeout
        .and_then(|t| Duration::try_from_secs_f64(t).ok())
        .and_then(|d| Instant::now().checked_add(d));
    let mut seen = 0u64;
    let mut out = std::io::stdout().lock();
    while count.is_none_or(|c| seen < c) {
        let left = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        if deadline.is_some() && left.is_zero() {
            break;
        }
        if !wake.wait(left) {
            continue;
        }
        // Clear first, then drain: an event arriving in between sets the flag again.
        wake.clear();
        while count.is_none_or(|c| seen < c) {
            let Some(e) = ctl.pull_webhook_event() else {
                break;
            };
            let line =
                serde_json::to_string(&e).map_err(|e| Error::InvalidArgument(e.to_string()))?;
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
            seen += 1;
        }
    }
    ctl.close();
    match count {
        Some(c) if seen < c => {
            let waited = timeout
                .map(|t| format!(" within {t} s"))
                .unwrap_or_default();
            eprintln!(
                "sdctl: received {seen} of {c} webhook event{}{waited}; stopped waiting (raise --timeout to wait longer)",
                if c == 1 { "" } else { "s" }
            );
            Ok(Done::Shown)
        }
        _ => Ok(Done::Yes),
    }
}

/// `check --json`: `{"Source", "Valid", "Problems": [{"Path", "Message"}], "Notes": [...]}` on stdout; an invalid
/// configuration still exits 2.
fn check_json(args: &Args) -> Result<Done, Error> {
    let as_json = |p: &smartdev::Problem| serde_json::json!({"Path": p.path, "Message": p.message});
    let (source, problems, notes, channels) = match load(args) {
        Ok(s) => (
            s.source.clone(),
            s.check(),
            s.anchor_differences(),
            s.device_channels(),
        ),
        Err(e) if !e.problems().is_empty() => (
            args.config
                .as_ref()
                .map(|c| c.display().to_string())
                .unwrap_or_default(),
            e.problems().to_vec(),
            Vec::new(),
            Vec::new(),
        ),
        Err(e) => return Err(e),
    };
    let valid = problems.is_empty();
    print_json(&serde_json::json!({
        "Source": source,
        "Valid": valid,
        "Problems": problems.iter().map(as_json).collect::<Vec<_>>(),
        "Notes": notes.iter().map(as_json).collect::<Vec<_>>(),
        "Channels": channels
            .iter()
            .map(|(name, channel)| serde_json::json!({"Device": name, "Channel": channel}))
            .collect::<Vec<_>>(),
    }))?;
    Ok(if valid { Done::Yes } else { Done::Refused })
}

/// A one-shot command keeps each device's channel: over the push channel open reads a Gen2+ device on the one
/// connection it makes (device information, status and subscription together), cheaper than HTTP's two. It
/// reads once: no CoIoT listener (it would hold UDP 5683 for nothing).
fn one_shot_channels(settings: &mut smartdev::Settings) {
    settings.coiot.enabled = false;
}

/// Validates the configuration and the installation rules without starting anything; prints every problem.
fn check(args: &Args) -> Result<Done, Error> {
    if args.json {
        return check_json(args);
    }
    let settings = load(args)?;
    let problems = settings.check();
    for note in settings.anchor_differences() {
        eprintln!("sdctl: note: {note}");
    }
    if problems.is_empty() {
        println!(
            "{}: valid ({} device(s), layout {:?})",
            settings.source,
            settings.devices.len(),
            settings.layout
        );
        // One line per channel: which devices use it (the broker named, never its password).
        let channels = settings.device_channels();
        for channel in ["mqtt", "auto", "http", "simulated"] {
            let names: Vec<&str> = channels
                .iter()
                .filter(|(_, c)| *c == channel)
                .map(|(n, _)| n.as_str())
                .collect();
            if names.is_empty() {
                continue;
            }
            let how = match (channel, &settings.mqtt) {
                ("mqtt", Some(m)) => format!(
                    "mqtt (broker {}:{}{}, client id {}{})",
                    m.host,
                    m.port,
                    if m.tls { " over TLS" } else { "" },
                    m.client_id,
                    m.user
                        .as_ref()
                        .map(|u| format!(", user {u}"))
                        .unwrap_or_default()
                ),
                ("auto", _) => "auto (WebSocket, HTTP while it is down)".to_string(),
                (c, _) => c.to_string(),
            };
            println!("  channel {how}: {}", names.join(", "));
        }
        Ok(Done::Yes)
    } else {
        Err(Error::Init(problems))
    }
}
