//! A tour of the Rust API against simulated devices: `cargo run --example basic`.

use smartdev::{
    ComponentKind, ConfigLoader, Controller, Identity, PrintMode, Rule, ValidationDictionary,
    ValueType,
};

const CONFIG: &str = "
SmartDevices:
  SimulationFileFolder: simulation_files/example
  Devices:
    - Name: Garage
      Model: ShellyPlus2PM
      Simulate: true
      Outputs: [{Name: Door Light, Group: Lights}, {Name: Compressor, Group: Tools}]
    - Name: Plug
      Model: Tasmota
      Simulate: true
      Outputs: [{Name: Kettle}]
      Meters: [{Name: Kettle Meter, MockRate: 0.5}]
";

fn main() -> smartdev::Result<()> {
    // Custom attributes must be defined before a configuration may use them.
    let mut dict = ValidationDictionary::builtin();
    dict.define(
        "SmartDevices.Devices.Outputs.Group",
        Rule::optional(ValueType::String),
    )?;
    let settings = ConfigLoader::new().with_dictionary(dict).load_str(CONFIG)?;
    let ctl = Controller::open(settings, None)?;

    println!(
        "{}\n",
        ctl.print_model_library(PrintMode::Detailed, Some("ShellyPlus2PM"))?
    );
    let change = ctl.change_output(Identity::name("Kettle"), true)?;
    println!(
        "Kettle: on={} did_change={}",
        change.state, change.did_change
    );
    let compressor = ctl.component(ComponentKind::Output, Identity::name("Compressor"))?;
    println!(
        "Compressor as JSON: {}",
        serde_json::to_string(&compressor).unwrap_or_default()
    );

    std::thread::sleep(std::time::Duration::from_millis(500));
    let report = ctl.refresh_all()?;
    println!(
        "refreshed {} device(s), {} failure(s)",
        report.refreshed,
        report.failures.len()
    );
    let meter = ctl.meter(Identity::name("Kettle Meter"))?;
    println!("Kettle meter: {:?} W, {:?} Wh\n", meter.power, meter.energy);
    println!("{}", ctl.print_device_status(None)?);
    ctl.close();
    Ok(())
}
