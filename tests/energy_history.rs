//! Energy history from the meters' own memory (issue 28): a Pro 3EM's `EMData` over days with paging, an EM
//! Gen3's `EM1Data` channel, a Gen1 3EM's CSV, a gap reported as a gap, the retention limit, meters that keep no
//! history refused, and the bounds (an empty range; a device answering endless or huge pages). The emulator's
//! manual clock moves over days; nothing sleeps.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::hostile::{Behaviour, Hostile, answer};
use smartdev::emulator::{DeviceSpec, EmuClock, Emulator};
use smartdev::{Controller, EnergyHistory, Error, HistoryEntry, ModelLibrary};

const DAY: i64 = 86_400;

/// A manual-clock emulator of `model` and a controller over HTTP (request counts are HTTP's), with the clock's
/// start in Unix seconds (at most a second before the emulator's).
fn rig(model: &str, block: &str) -> (Emulator, EmuClock, Controller, i64) {
    let t0 = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let clock = EmuClock::manual();
    let emu = Emulator::start_with_clock(
        vec![DeviceSpec::new(model)],
        &ModelLibrary::embedded(),
        clock.clone(),
    )
    .unwrap();
    let ctl = common::emu::open(&emu, &[block], "  Channel: http\n").unwrap();
    (emu, clock, ctl, t0)
}

/// The first whole hour at least an hour after `t0`: every record from there on is complete.
fn hour_after(t0: i64) -> i64 {
    (t0 / 3600 + 2) * 3600
}

fn days(n: i64) -> Duration {
    Duration::from_secs((n * DAY) as u64)
}

fn starts(h: &EnergyHistory) -> Vec<i64> {
    h.records().map(|r| r.start).collect()
}

#[test]
fn a_three_phase_meter_over_days_is_read_page_by_page() {
    let (emu, clock, ctl, t0) = rig("ShellyPro3EM", "Name: Grid, Model: ShellyPro3EM");
    emu.set_load(0, 0, 600.0);
    emu.set_load(0, 1, 1200.0);
    emu.set_load(0, 2, -300.0);
    clock.advance(days(3));
    let from = hour_after(t0) + DAY;
    let meter = ctl.device("Grid").unwrap().meters[1].name.clone();
    emu.reset_counts(0);
    let h = ctl
        .energy_history(meter.as_str(), from, from + DAY)
        .unwrap();

    assert_eq!(h.meter, meter);
    assert_eq!(
        h.channels.len(),
        3,
        "a 3-phase meter records its phases together"
    );
    assert_eq!(h.gaps().count(), 0, "{:?}", h.gaps().collect::<Vec<_>>());
    let s = starts(&h);
    assert_eq!(s.len(), 1440, "one record a minute for a day");
    assert_eq!(s[0], from);
    assert!(s.windows(2).all(|w| w[1] - w[0] == 60), "in time order");
    let r = h.records().nth(100).unwrap();
    assert_eq!(r.period, 60);
    common::emu::near(r.channels[0].energy, 10.0, 0.001); // 600 W for a minute
    common::emu::near(r.channels[1].energy, 20.0, 0.001);
    common::emu::near(r.channels[2].energy, 0.0, 0.001);
    common::emu::near(r.channels[2].returned_energy, 5.0, 0.001);
    common::emu::near(r.channels[0].max_voltage, 230.1, 0.01);
    assert!(
        r.channels[1].max_current.unwrap() > 5.0,
        "{:?}",
        r.channels[1]
    );
    let total = h.total_energy();
    common::emu::near(total[0], 14_400.0, 0.5);
    common::emu::near(total[1], 28_800.0, 0.5);
    common::emu::near(h.total_returned_energy()[2], 7_200.0, 0.5);

    // 1,440 records (and the 10 minutes before `from`) do not fit one page: next_record_ts was followed.
    let pages = emu.counts(0)["rpc EMData.GetData"];
    assert!((2..=4).contains(&pages), "{pages} pages");
}

#[test]
fn a_gap_is_reported_as_a_gap_not_as_zero() {
    let (emu, clock, ctl, t0) = rig("ShellyPro3EM", "Name: Grid, Model: ShellyPro3EM");
    clock.advance(days(1));
    let from = hour_after(t0);
    emu.set_history_gap(0, from + 600, from + 1800);
    let h = ctl.energy_history("Grid", from, from + 3600).unwrap_err();
    // "Grid" is the device; the history is asked of a meter.
    assert!(matches!(h, Error::NotFound { kind: "meter", .. }), "{h}");

    let meter = ctl.device("Grid").unwrap().meters[0].name.clone();
    let h = ctl
        .energy_history(meter.as_str(), from, from + 3600)
        .unwrap();
    let gaps: Vec<_> = h.gaps().map(|g| (g.start - from, g.end - from)).collect();
    assert_eq!(gaps, [(600, 1800)]);
    assert_eq!(h.records().count(), 40);
    match &h.entries[10] {
        HistoryEntry::Gap(g) => assert_eq!(g.start, from + 600),
        other => panic!("{other:?}"),
    }
    // The sum covers only recorded time (100 W default load, 40 minutes), and says so through `gaps`.
    common::emu::near(h.total_energy()[0], 40.0 * 100.0 / 60.0, 0.01);
    let json = serde_json::to_value(&h).unwrap();
    assert_eq!(json["Entries"][10]["Kind"], "Gap");
    assert!(json["Entries"][10].get("Channels").is_none());
}

#[test]
fn records_older_than_the_retention_are_gone() {
    let (emu, clock, ctl, t0) = rig("ShellyPro3EM", "Name: Grid, Model: ShellyPro3EM");
    emu.set_history_retention(0, days(1));
    clock.advance(days(2) + Duration::from_secs(7200));
    let meter = ctl.device("Grid").unwrap().meters[0].name.clone();
    let from = hour_after(t0);
    let h = ctl
        .energy_history(meter.as_str(), from, from + 2 * DAY)
        .unwrap();
    let first = h.records().next().unwrap().start;
    let gap = h.gaps().next().unwrap();
    assert_eq!((gap.start, gap.end), (from, first));
    // The clock is at t0 + 50 h (within a second): one day kept means records from t0 + 26 h on.
    assert!(
        (first - (t0 + 26 * 3600)).abs() <= 120,
        "kept one day only: first record {} s after t0",
        first - t0
    );
    // From there to the range's end (before the clock), every minute is recorded.
    assert_eq!(h.gaps().count(), 1);
    assert_eq!(h.records().count() as i64, (from + 2 * DAY - first) / 60);
}

#[test]
fn a_single_channel_meter_reads_its_em1data() {
    let (emu, clock, ctl, t0) = rig("ShellyEMG3", "Name: Shed, Model: ShellyEMG3");
    emu.set_load(0, 1, 2400.0);
    clock.advance(days(1));
    let meters = ctl.device("Shed").unwrap().meters;
    let from = hour_after(t0);
    let h = ctl
        .energy_history(meters[1].name.as_str(), from, from + 7200)
        .unwrap();
    assert_eq!(h.channels, [meters[1].name.clone()]);
    assert_eq!(h.records().count(), 120);
    common::emu::near(h.total_energy()[0], 4800.0, 0.05);
    assert_eq!(emu.counts(0)["rpc EM1Data.GetData"], 1);
    let other = ctl
        .energy_history(meters[0].name.as_str(), from, from + 7200)
        .unwrap();
    common::emu::near(other.total_energy()[0], 200.0, 0.05); // the default 100 W
}

#[test]
fn a_gen1_3em_reads_its_csv() {
    let (emu, clock, ctl, t0) = rig("Shelly3EM", "Name: Old, Model: Shelly3EM");
    emu.set_load(0, 2, 600.0);
    clock.advance(days(1));
    let meter = ctl.device("Old").unwrap().meters[2].name.clone();
    let from = hour_after(t0);
    let h = ctl
        .energy_history(meter.as_str(), from, from + 3 * 3600)
        .unwrap();
    assert_eq!(h.records().count(), 18, "one row per 10 minutes");
    assert!(h.records().all(|r| r.period == 600));
    assert_eq!(h.gaps().count(), 0);
    common::emu::near(h.total_energy()[0], 1800.0, 0.1);
    let r = h.records().next().unwrap();
    common::emu::near(r.channels[0].min_voltage, 230.1, 0.01);
    assert_eq!(r.channels[0].min_current, None, "the CSV has no current");
    assert_eq!(emu.counts(0)["GET /emeter/2/em_data.csv"], 1);
}

#[test]
fn meters_without_history_are_refused_not_empty() {
    let clock = EmuClock::manual();
    let emu = Emulator::start_with_clock(
        vec![DeviceSpec::new("ShellyPlus1PM"), DeviceSpec::new("Tasmota")],
        &ModelLibrary::embedded(),
        clock,
    )
    .unwrap();
    let dir = common::TempDir::new("energy-nohistory");
    let yaml = format!(
        "SmartDevices:\n{}  RefreshInterval: 0\n  SimulationFileFolder: '{}'\n  Devices:\n    - {{Name: Pump, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}}}\n    - {{Name: Plug, Model: Tasmota, Hostname: 127.0.0.1, Port: {}, Outputs: [{{Name: Heater}}], Meters: [{{Name: Heater Meter}}]}}\n    - {{Name: Sim, Model: ShellyPro3EM, Simulate: true}}\n",
        common::emu::FAST,
        dir.path().display(),
        emu.port(0),
        emu.port(1)
    );
    let ctl = Controller::open(smartdev::Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    let mut meters: Vec<String> = vec!["Heater Meter".into()];
    meters.push(ctl.device("Pump").unwrap().meters[0].name.clone());
    meters.push(ctl.device("Sim").unwrap().meters[0].name.clone());
    for m in &meters {
        let before = ctl.meter(m.as_str()).unwrap();
        match ctl.energy_history(m.as_str(), 0, 3600) {
            Err(e @ Error::NoHistory { .. }) => {
                let text = e.to_string();
                assert!(text.contains("this device keeps no history"), "{text}");
                assert!(text.contains("Energy counter"), "names the fix: {text}");
            }
            other => panic!("{m}: {other:?}"),
        }
        assert_eq!(ctl.meter(m.as_str()).unwrap(), before);
    }
    assert!(ctl.device("Pump").unwrap().last_error.is_none());
}

#[test]
fn an_empty_range_is_refused_with_a_message() {
    let (_emu, _clock, ctl, t0) = rig("ShellyEMG3", "Name: Shed, Model: ShellyEMG3");
    let meter = ctl.device("Shed").unwrap().meters[0].name.clone();
    for (from, to) in [(t0, t0), (t0 + 60, t0)] {
        match ctl.energy_history(meter.as_str(), from, to) {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("not before") && m.contains("earlier"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn hostile_pages_stop_within_bounds() {
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyEMG3")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let fake = Hostile::start(emu.port(0));
    let yaml = format!(
        "SmartDevices:\n  ResponseTimeout: 1\n  RetryCount: 0\n  PingAllowed: false\n  RefreshInterval: 0\n  Channel: http\n  Devices:\n    - {{Name: Shed, Model: ShellyEMG3, Hostname: 127.0.0.1, Port: {}}}\n",
        fake.port()
    );
    let ctl = Controller::open(smartdev::Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    let meter = ctl.device("Shed").unwrap().meters[0].name.clone();
    let (from, to) = (1_700_000_000, 1_700_000_000 + DAY);

    // Always the same page, always "more from 1_700_000_600": the second page does not move on.
    let endless = format!(
        r#"{{"id":1,"src":"x","result":{{"keys":["total_act_energy"],"data":[{{"ts":{from},"period":60,"values":[[1.0]]}}],"next_record_ts":{}}}}}"#,
        from + 600
    );
    fake.set(Behaviour::Raw(answer(200, endless.as_bytes())));
    let before = fake.requests();
    match ctl.energy_history(meter.as_str(), from, to) {
        Err(Error::Device { message, .. }) => {
            assert!(message.contains("does not move"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.requests() - before, 2);

    // A 20 MB page is cut at the body limit.
    fake.set(Behaviour::Huge(20 << 20));
    match ctl.energy_history(meter.as_str(), from, to) {
        Err(Error::Device { message, .. }) => assert!(message.contains("KiB"), "{message}"),
        other => panic!("{other:?}"),
    }

    // Sane again: the same controller reads the (empty) history.
    fake.set(Behaviour::Sane);
    let h = ctl.energy_history(meter.as_str(), from, to).unwrap();
    assert_eq!(h.gaps().count(), 1);
}

#[test]
fn sdctl_energy_prints_lines_csv_and_json() {
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyProEM50")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    emu.set_load(0, 0, 1200.0);
    emu.backfill_history(0, Duration::from_secs(7200));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let from = (now / 60) * 60 - 3600;
    emu.set_history_gap(0, from + 600, from + 900);
    let dir = common::TempDir::new("energy-cli");
    dir.write(
        "e.yaml",
        &format!(
            "SmartDevices:\n  PingAllowed: false\n  Devices:\n    - {{Name: Mains, Model: ShellyProEM50, Hostname: 127.0.0.1, Port: {}, Meters: [{{Name: House}}, {{Name: Car}}]}}\n",
            emu.port(0)
        ),
    );
    // The start with an offset (+01:00), the end as UTC.
    let start = smartdev::rfc3339(from + 3600).replace('Z', "+01:00");
    let end = smartdev::rfc3339(from + 1800);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--config", "e.yaml", "energy", "House", "--from", &start, "--to", &end,
        ];
        args.extend_from_slice(extra);
        std::process::Command::new(env!("CARGO_BIN_EXE_sdctl"))
            .args(&args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 25 + 1 + 2, "{text}");
    assert!(
        lines[0].starts_with("House (Mains): energy history from ") && lines[0].contains("+00:00")
    );
    assert!(
        lines[1].contains("1 min  House 20.00 Wh, 230.1–230.1 V"),
        "{}",
        lines[1]
    );
    assert!(
        lines[11].contains("5 min  no record") && lines[11].contains("energy unknown"),
        "{}",
        lines[11]
    );
    assert!(
        lines[27].starts_with("Total of 25 records: House 500.00 Wh"),
        "{}",
        lines[27]
    );
    assert_eq!(
        lines[28],
        "Not recorded: 5 min in 1 gap (not counted in the total)"
    );

    let o = run(&["--csv"]);
    let csv = String::from_utf8_lossy(&o.stdout).into_owned();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 1 + 26, "{csv}");
    assert!(
        rows[0].starts_with(
            "Start (UTC),Seconds,Recorded,House Energy (Wh),House Returned Energy (Wh)"
        )
    );
    assert!(rows[1].contains(",60,yes,20,"), "{}", rows[1]);
    assert!(
        rows[11].contains(",300,no,,"),
        "a gap is empty, not 0: {}",
        rows[11]
    );

    let o = run(&["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["Entries"].as_array().unwrap().len(), 26);
    assert_eq!(v["From"], smartdev::rfc3339(from));

    let o = std::process::Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args([
            "--config",
            "e.yaml",
            "energy",
            "House",
            "--from",
            "yesterday",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--from") && err.contains("-24h"), "{err}");
}

#[test]
fn the_emulator_lists_its_runs_with_get_records() {
    let (emu, clock, _ctl, t0) = rig("ShellyPro3EM", "Name: Grid, Model: ShellyPro3EM");
    clock.advance(Duration::from_secs(4 * 3600));
    let from = hour_after(t0);
    emu.set_history_gap(0, from + 600, from + 900);
    let url = format!("http://127.0.0.1:{}/rpc", emu.port(0));
    let frame = serde_json::json!({"id": 1, "method": "EMData.GetRecords", "params": {"id": 0, "ts": from}});
    let mut answer = ureq::post(&url).send_json(&frame).unwrap();
    let v: serde_json::Value = answer.body_mut().read_json().unwrap();
    let blocks = v["result"]["data_blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 2, "{v}");
    assert_eq!(
        blocks[0],
        serde_json::json!({"ts": from, "period": 60, "records": 10})
    );
    assert_eq!(blocks[1]["ts"], from + 900);
}
