//! Opening through the builder, and what still works after close.

mod common;

#[test]
fn the_builder_takes_schema_models_and_wake_and_loads_and_opens() {
    let dir = common::TempDir::new("builder");
    let schema = "SmartDevices:\n  type: dict\n  schema:\n    Devices:\n      type: list\n      schema:\n        type: dict\n        schema:\n          Room: {type: string}\n";
    let yaml = format!(
        "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0\n  ShellyWebhooks: {{Enabled: true, Host: 127.0.0.1, Port: 0}}\n  Devices:\n    - {{Name: A, Model: Shelly1, Simulate: true, Room: Hall}}\n",
        dir.path().display()
    );
    // Without the extension the custom attribute is refused.
    assert!(smartdev::Controller::builder().load_yaml(&yaml).is_err());
    let wake = smartdev::WakeFlag::new();
    let ctl = smartdev::Controller::builder()
        .schema_yaml(schema, "<test schema>")
        .unwrap()
        .models(smartdev::ModelLibrary::embedded())
        .wake(wake.clone())
        .open_yaml(&yaml)
        .unwrap();
    assert_eq!(ctl.devices()[0].custom["Room"], "Hall");
    assert!(ctl.wake_flag().is_some());
    assert!(ctl.webhook_address().is_some());
    // A bad extension is an error naming its source.
    let e = smartdev::Controller::builder()
        .schema_yaml("SmartDevices: [", "<broken schema>")
        .err()
        .expect("a broken schema is refused");
    assert!(e.to_string().contains("<broken schema>"), "{e}");
}

#[test]
fn after_close_commands_fail_with_closed_and_last_known_reads_still_work() {
    let dir = common::TempDir::new("after-close");
    let ctl = smartdev::Controller::builder()
        .open_yaml(&format!(
            "SmartDevices:\n  SimulationFileFolder: '{}'\n  RefreshInterval: 0\n  ShellyWebhooks: {{Enabled: true, Host: 127.0.0.1, Port: 0}}\n  Devices:\n    - {{Name: A, Model: Shelly1, Simulate: true, Outputs: [{{Name: Lamp}}]}}\n",
            dir.path().display()
        ))
        .unwrap();
    let id = smartdev::Identity::name("A");
    let lamp = smartdev::Identity::name("Lamp");
    ctl.close();
    ctl.close(); // harmless
    assert!(matches!(ctl.read_device(&id), Err(smartdev::Error::Closed)));
    assert!(matches!(ctl.refresh_all(), Err(smartdev::Error::Closed)));
    assert!(matches!(
        ctl.change_output(&lamp, true),
        Err(smartdev::Error::Closed)
    ));
    assert!(ctl.webhook_address().is_none());
    assert_eq!(ctl.device(&id).unwrap().name, "A");
    assert_eq!(ctl.output(&lamp).unwrap().state, Some(false));
    assert!(ctl.print_device_status(None).unwrap().contains("A (ID: 1)"));
    assert!(ctl.pull_webhook_event().is_none());
}
