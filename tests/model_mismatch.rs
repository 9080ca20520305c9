//! A device that reports another model than the configured one: a clear warning with both, once, and the
//! reported model as a device field. (Own test binary: it installs a capturing logger.)

mod common;

use std::sync::Mutex;

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

#[test]
fn mismatch_is_warned_once_with_both_models() {
    log::set_logger(&Capture).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
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
