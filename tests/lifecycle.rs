//! Close stops and joins every thread; the controller is usable from threads racing with close.
//! (One test in this binary, so thread counts are not disturbed by other tests.)

mod common;

use std::sync::Arc;

use common::{TempDir, threads_named};
use smartdev::{Controller, Error, Identity, Settings};

#[test]
fn close_joins_every_thread_and_later_calls_fail_cleanly() {
    let dir = TempDir::new("close");
    let mut yaml = format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0.01\n  Devices:\n",
        dir.path().display()
    );
    for d in 0..20 {
        yaml.push_str(&format!(
            "    - {{ID: {}, Model: ShellyPlus1PM, Simulate: true}}\n",
            700 + d
        ));
    }
    let ctl = Arc::new(Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap());
    assert_eq!(threads_named("sd-dev-7").len(), 20);
    // A new thread names itself when it starts running, which may be just after open returns.
    let named = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(5));
        threads_named("sd-supervisor").len() == 1
    });
    assert!(named, "the supervisor thread runs");

    // A caller keeps switching while another thread closes.
    let busy = {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            let mut closed = false;
            for _ in 0..10_000 {
                match ctl.toggle_output(Identity::Id(1)) {
                    Ok(_) => {}
                    Err(Error::Closed) => {
                        closed = true;
                        break;
                    }
                    Err(e) => panic!("unexpected error {e}"),
                }
            }
            closed
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    ctl.close();
    assert!(busy.join().unwrap(), "the busy caller saw Closed");
    assert!(
        threads_named("sd-dev-").is_empty(),
        "{:?}",
        threads_named("sd-")
    );
    assert!(threads_named("sd-supervisor").is_empty());

    assert!(matches!(ctl.refresh_all(), Err(Error::Closed)));
    assert!(matches!(
        ctl.change_output(Identity::Id(1), true),
        Err(Error::Closed)
    ));
    assert!(matches!(
        ctl.read_device(Identity::Id(700)),
        Err(Error::Closed)
    ));
    assert!(matches!(
        ctl.is_device_online(Identity::Id(700)),
        Err(Error::Closed)
    ));
    ctl.close();

    // Dropping an open controller closes it too.
    let again = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    assert_eq!(threads_named("sd-dev-7").len(), 20);
    drop(again);
    assert!(threads_named("sd-").is_empty());

    // Closing while every worker waits on a device that never answers: requests are interrupted, the
    // waiting caller gets its answer, and every thread is joined.
    let emu = smartdev::emulator::Emulator::start(
        (0..10)
            .map(|_| smartdev::emulator::DeviceSpec::new("ShellyPlus1PM"))
            .collect(),
        &smartdev::ModelLibrary::embedded(),
    )
    .unwrap();
    for d in 0..10 {
        emu.set_fault(d, smartdev::emulator::Fault::Blackhole);
    }
    let mut yaml = String::from(
        "SmartDevices:\n  ResponseTimeout: 1\n  RetryCount: 5\n  PingAllowed: false\n  Devices:\n",
    );
    for d in 0..10 {
        yaml.push_str(&format!(
            "    - {{ID: {}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}}}\n",
            800 + d,
            emu.port(d)
        ));
    }
    let ctl = Arc::new(Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap());
    let waiting = {
        let ctl = ctl.clone();
        std::thread::spawn(move || ctl.refresh_all())
    };
    // Let every worker get stuck in its request.
    let stuck = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        (0..10).all(|d| emu.total_requests(d) >= 2)
    });
    assert!(stuck);
    ctl.close();
    assert!(
        threads_named("sd-dev-8").is_empty(),
        "{:?}",
        threads_named("sd-")
    );
    let report = waiting.join().unwrap().unwrap();
    assert_eq!(
        report.failures.len(),
        10,
        "every interrupted device reports its failure"
    );
}
