//! Warnings a user must see, captured from the log: a model mismatch (both models, once) and a full webhook
//! table on a device. (Own test binary: it installs a capturing logger.)

mod common;

use std::sync::{Mutex, Once};

use common::emu::start;
use common::raw_http::request;
use smartdev::Identity;
use smartdev::emulator::DeviceSpec;

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    /// Like the loggers smartdev sets up (logging::init, the C callback): the HTTP client's own records are
    /// left out, because it logs request URLs and Tasmota's protocol puts credentials in the query.
    fn enabled(&self, m: &log::Metadata) -> bool {
        !m.target().starts_with("ureq")
    }
    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        LINES
            .lock()
            .unwrap()
            .push(format!("{} {}", record.level(), record.args()));
    }
    fn flush(&self) {}
}

fn capture() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
    });
}

fn warnings_containing(text: &str) -> Vec<String> {
    LINES
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("WARN") && l.contains(text))
        .cloned()
        .collect()
}

#[test]
fn a_full_webhook_table_is_a_clear_warning_and_open_still_succeeds() {
    capture();
    let emu = smartdev::emulator::Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &smartdev::ModelLibrary::embedded(),
    )
    .unwrap();
    // Another application filled the device's 20 hook slots.
    for n in 0..20 {
        let body = serde_json::json!({"id": n, "method": "Webhook.Create", "params": {"cid": 0, "enable": true,
            "event": "switch.on", "name": format!("other-{n}"), "urls": ["http://10.0.0.9/x"]}})
        .to_string();
        let r = request(emu.port(0), "POST", "/rpc", Some(&body));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let ctl = common::emu::open(
        &emu,
        &["Name: Full, Model: ShellyPlus1PM, Outputs: [{Name: FO, Webhooks: true}]"],
        "  ShellyWebhooks: {Enabled: true, Port: 0}\n",
    )
    .expect("a full hook table never fails open");
    assert!(ctl.device(Identity::name("Full")).unwrap().online);
    let w = warnings_containing("webhook limit");
    assert_eq!(w.len(), 1, "{:#?}", LINES.lock().unwrap());
    assert!(
        w[0].contains("Full (ID: 1)") && w[0].contains("smartdev:output:1:switch.on"),
        "{}",
        w[0]
    );
    assert_eq!(
        emu.webhooks(0).len(),
        20,
        "nothing of anyone else's was deleted"
    );
}

#[test]
fn mismatch_is_warned_once_with_both_models() {
    capture();
    let mut wrong = DeviceSpec::new("ShellyPlus1PM");
    wrong.reported_model = Some("SNSW-102P16EU".into());
    let t = start(
        vec![
            wrong,
            DeviceSpec::new("Shelly1PMG3"),
            DeviceSpec::new("ShellyPlugS"),
        ],
        &[
            "Name: Wrong, Model: ShellyPlus1PM",
            "Name: Right, Model: Shelly1PMG3",
            "Name: Family, Model: Shelly1PMG3",
        ],
        "",
    );
    t.ctl.refresh_all().unwrap();
    t.ctl.refresh_all().unwrap();
    let lines = LINES.lock().unwrap().clone();
    let warns: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("WARN") && l.contains("reports itself"))
        .collect();
    assert_eq!(warns.len(), 2, "{lines:#?}");
    // Devices start in parallel, so find each warning by its device.
    let wrong = warns
        .iter()
        .find(|l| l.contains("Wrong (ID: 1)"))
        .expect("warning for Wrong");
    assert!(
        wrong.contains("configured as ShellyPlus1PM") && wrong.contains("\"SNSW-102P16EU\""),
        "{wrong}"
    );
    assert!(wrong.contains("expects SNSW-001P16EU"), "{wrong}");
    let family = warns
        .iter()
        .find(|l| l.contains("Family (ID: 3)"))
        .expect("warning for Family");
    assert!(family.contains("\"SHPLG-S\" (Gen1)"), "{family}");
    let d = t.ctl.device(Identity::name("Wrong")).unwrap();
    assert_eq!(d.reported_model.as_deref(), Some("SNSW-102P16EU"));
}

#[test]
fn credentials_never_reach_the_log_the_objects_or_the_errors() {
    capture();
    const SECRET: &str = "Very-S3cret-pw";
    let specs = ["ShellyPlus1PM", "Shelly2.5", "Tasmota"]
        .into_iter()
        .map(|m| {
            let mut s = DeviceSpec::new(m);
            s.password = Some(SECRET.into());
            s
        })
        .chain(["ShellyPlus1PM", "Tasmota"].into_iter().map(|m| {
            let mut s = DeviceSpec::new(m);
            s.password = Some("other-pw".into());
            s
        }))
        .collect();
    let emu =
        smartdev::emulator::Emulator::start(specs, &smartdev::ModelLibrary::embedded()).unwrap();
    let mut settings = common::emu::settings(
        &emu,
        &[
            &format!("Name: R, Model: ShellyPlus1PM, Password: {SECRET}"),
            &format!("Name: G, Model: Shelly2.5, Password: {SECRET}"),
            &format!("Name: T, Model: Tasmota, Password: {SECRET}, Outputs: [{{Name: TO}}]"),
            &format!("Name: RW, Model: ShellyPlus1PM, Password: {SECRET}"),
            &format!("Name: TW, Model: Tasmota, Password: {SECRET}, Outputs: [{{Name: TWO}}]"),
        ],
        "",
    );
    settings.allow_debug_logging = true;
    let ctl = smartdev::Controller::open(settings, None).unwrap();
    let mut texts = Vec::new();
    let _ = ctl
        .refresh_all()
        .map(|r| texts.extend(r.failures.iter().map(|f| f.error.to_string())));
    for n in 1..=5 {
        if let Err(e) = ctl.read_device(Identity::Id(n)) {
            texts.push(e.to_string());
        }
    }
    let _ = ctl.change_output(Identity::name("TO"), true);
    texts.push(serde_json::to_string(&ctl.devices()).unwrap());
    texts.push(ctl.print_device_status(None).unwrap());
    texts.push(format!("{:?}", ctl.settings()));
    let log = LINES.lock().unwrap().join("\n");
    assert!(
        log.contains("RPC Shelly.GetStatus"),
        "debug logging was on: {log}"
    );
    assert!(
        texts.iter().any(|t| t.contains("authentication failed")),
        "{texts:?}"
    );
    let leaks: Vec<&str> = log.lines().filter(|l| l.contains(SECRET)).collect();
    assert!(leaks.is_empty(), "the log holds the password: {leaks:#?}");
    for t in &texts {
        assert!(!t.contains(SECRET), "{t}");
    }
}

#[test]
fn a_flapping_device_logs_each_transition_once_and_leaks_nothing() {
    capture();
    let emu = smartdev::emulator::Emulator::start(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &smartdev::ModelLibrary::embedded(),
    )
    .unwrap();
    let mut settings = common::emu::settings(
        &emu,
        &["Name: Flap, ID: 4242, Model: ShellyPlus1PM"],
        // Each refused HTTP request is a transition; an established push socket would outlive the refusals.
        "  RefreshInterval: 0.05\n  Channel: http\n",
    );
    settings.response_timeout = std::time::Duration::from_millis(300);
    settings.retry_count = 0;
    let ctl = std::sync::Arc::new(smartdev::Controller::open(settings, None).unwrap());
    // Other tests in this binary run workers too: count this device's own.
    let workers_before = common::threads_named("sd-dev-4242").len();
    assert_eq!(workers_before, 1);
    emu.set_fault(
        0,
        smartdev::emulator::Fault::Flapping(std::time::Duration::from_millis(200)),
    );
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let caller = {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            let mut calls = 0;
            while std::time::Instant::now() < end {
                let t = std::time::Instant::now();
                let _ = ctl.read_device(Identity::Id(4242));
                // Not a speed claim: a call that takes this long is stuck.
                assert!(
                    t.elapsed() < std::time::Duration::from_secs(3),
                    "a call got stuck"
                );
                calls += 1;
            }
            calls
        })
    };
    assert!(caller.join().unwrap() > 10);
    emu.set_fault(0, smartdev::emulator::Fault::None);
    assert_eq!(
        common::threads_named("sd-dev-4242").len(),
        workers_before,
        "no thread leak"
    );
    let transitions: Vec<String> = LINES
        .lock()
        .unwrap()
        .iter()
        .filter(|l| {
            l.contains("device Flap (ID: 4242)")
                && (l.contains("went offline") || l.contains("is online"))
        })
        .cloned()
        .collect();
    assert!(transitions.len() >= 6, "it flapped: {transitions:#?}");
    for pair in transitions.windows(2) {
        let kinds = (
            pair[0].contains("went offline"),
            pair[1].contains("went offline"),
        );
        assert!(
            kinds.0 != kinds.1,
            "each transition is logged once: {pair:#?}"
        );
    }
    ctl.close();
    assert!(common::threads_named("sd-dev-4242").is_empty());
}
