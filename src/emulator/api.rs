//! The [`Emulator`] controls for profiles, covers, lights, inputs and sensors (faults, outputs and meters are in
//! `mod.rs`). Index errors panic like slice indexing; requests that a real device could refuse return errors.

use super::{CoverReport, Emulator, InputType, Press, or_panic};
use crate::models::SensorQuantity;

impl Emulator {
    /// Switches a Shelly device to another profile (e.g. `cover`, `switch`, `roller`, `monophase`), as a user
    /// does in the app: the device reboots, its outputs, inputs, covers and meters start over (uptime too);
    /// webhooks and sensors stay. An unknown name is an error listing the model's profiles.
    pub fn set_profile(&self, device: usize, profile: &str) -> crate::Result<()> {
        self.dev(device)
            .set_profile(profile)
            .map_err(crate::Error::InvalidArgument)
    }

    /// The profile a device runs in (`None` for models without profiles).
    pub fn profile(&self, device: usize) -> Option<String> {
        self.dev(device).profile()
    }

    /// A cover's (Gen2+ `cover:N`, Gen1 roller, Tasmota shutter) state and position now.
    pub fn cover(&self, device: usize, cover: usize) -> CoverReport {
        or_panic(self.dev(device).cover(cover))
    }

    /// Marks a cover calibrated (positioning allowed, position reported) or not. Covers start calibrated.
    pub fn set_cover_calibrated(&self, device: usize, cover: usize, calibrated: bool) {
        or_panic(self.dev(device).set_cover_calibrated(cover, calibrated));
    }

    /// Puts a cover at `position` percent open (0–100), stopping any movement.
    pub fn set_cover_position(&self, device: usize, cover: usize, position: f64) {
        or_panic(self.dev(device).set_cover_position(cover, position));
    }

    /// Sets reading `n` of `quantity` (°C, %RH or V; `None`: the sensor does not answer). Readings are counted
    /// per quantity in device order: built-in sensors (an H&T's `temperature:0`), probes, then
    /// [`super::DeviceSpec::sensors`] (a DHT22 counts once as temperature and once as humidity).
    pub fn set_sensor(
        &self,
        device: usize,
        quantity: SensorQuantity,
        n: usize,
        value: Option<f64>,
    ) {
        or_panic(self.dev(device).set_sensor(quantity, n, value));
    }

    /// A battery device's charge in percent (`devicepower:0`).
    pub fn set_battery(&self, device: usize, percent: f64) {
        or_panic(self.dev(device).set_battery(percent));
    }

    /// Configures an input as a switch or a button (like RPC `Input.SetConfig`).
    pub fn set_input_type(&self, device: usize, input: usize, input_type: InputType) {
        or_panic(self.dev(device).set_input_type(input, input_type));
    }

    /// Presses a button input: fires the installed webhooks of the press's event (see
    /// [`Emulator::fire_event`]) and returns how many calls were delivered. An error when the input is
    /// configured as a switch (it sends no button events).
    pub fn press_button(&self, device: usize, input: usize, press: Press) -> crate::Result<usize> {
        self.dev(device)
            .press(input, press)
            .map_err(crate::Error::InvalidArgument)
    }

    /// Switches a light output and sets its brightness (0–100) as a local dimmer would.
    pub fn set_light(&self, device: usize, light: usize, on: bool, brightness: u8) {
        or_panic(self.dev(device).set_light(light, on, brightness));
    }

    /// A light output's state and brightness.
    pub fn light(&self, device: usize, light: usize) -> (bool, u8) {
        or_panic(self.dev(device).light(light))
    }

    /// Sets a light output's colour as a local control would: colour temperature in K (within the light's
    /// range), red/green/blue, white 0–255; `None` keeps a part.
    pub fn set_light_color(
        &self,
        device: usize,
        light: usize,
        ct: Option<u32>,
        rgb: Option<[u8; 3]>,
        white: Option<u8>,
    ) {
        or_panic(self.dev(device).set_light_color(light, ct, rgb, white));
    }

    /// A light output's colour as the device holds it: colour temperature in K, red/green/blue and white
    /// (0–255); each is what the light reports only where it has that capability.
    pub fn light_color(&self, device: usize, light: usize) -> (u32, [u8; 3], u8) {
        or_panic(self.dev(device).light_color(light))
    }

    /// A meter's mains frequency in Hz (default 50).
    pub fn set_frequency(&self, device: usize, meter: usize, hz: f64) {
        or_panic(self.dev(device).set_frequency(meter, hz));
    }

    /// For each open WebSocket connection of a device, whether its server socket has `TCP_NODELAY` set (every
    /// emulator socket does, so pipelined answers do not wait for delayed ACKs).
    pub fn ws_nodelay(&self, device: usize) -> Vec<bool> {
        self.dev(device).ws.nodelay()
    }
}
