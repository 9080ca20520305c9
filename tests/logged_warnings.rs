//! Warnings a user must see, captured from the log: a model mismatch (both models, once) and a full webhook
//! table on a device. (Own test binary: it installs a capturing logger.)

mod common;

use std::sync::{Mutex, Once};

use common::emu::start;
use smartdev::Identity;
use smartdev::emulator::DeviceSpec;

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
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
        let mut s = std::net::TcpStream::connect(("127.0.0.1", emu.port(0))).unwrap();
        use std::io::{Read, Write};
        let req = format!(
            "POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut a = String::new();
        s.read_to_string(&mut a).unwrap();
        assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    }
    let ctl = common::emu::open(
        &emu,
        &["Name: Full, Model: ShellyPlus1PM, Outputs: [{Name: FO, Webhooks: true}]"],
        "  ShellyWebhooks: {Enabled: true, Port: 0}\n",
    )
    .expect("a full hook table never fails open");
    assert!(ctl.device(&Identity::name("Full")).unwrap().online);
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
        wrong.contains("configured as ShellyPlus1PM") && wrong.contains("'SNSW-102P16EU'"),
        "{wrong}"
    );
    assert!(wrong.contains("expects SNSW-001P16EU"), "{wrong}");
    let family = warns
        .iter()
        .find(|l| l.contains("Family (ID: 3)"))
        .expect("warning for Family");
    assert!(family.contains("'SHPLG-S' (Gen1)"), "{family}");
    let d = t.ctl.device(&Identity::name("Wrong")).unwrap();
    assert_eq!(d.reported_model.as_deref(), Some("SNSW-102P16EU"));
}
