//! Installing our outbound WebSocket server on a Gen2+ device (`Ws.SetConfig`), for devices that report there
//! (`sleep::outbound`): a sleeping device connects to it when it wakes and pushes its status.

use serde_json::{Value, json};

use super::Rpc;
use crate::driver::json::{flag, text};
use crate::error::Result;
use crate::objects::Device;

impl Rpc {
    /// Points the device's outbound WebSocket at `server` (`ws://host:port/path`), unless it already is and
    /// is enabled. The firmware applies a new setting after a restart: the answer's `restart_required` is
    /// reported on the device (`RestartRequired`) and logged; smartdev does not restart the device.
    pub(super) fn install_outbound(&mut self, dev: &mut Device, server: &str) -> Result<()> {
        let current = self.call(dev, "Ws.GetConfig", None)?;
        if flag(&current, &["enable"]) == Some(true)
            && text(&current, &["server"]).as_deref() == Some(server)
        {
            return Ok(());
        }
        // `ssl_ca` matters only for wss://; "*" (no validation) is what peers set for a plain ws:// server.
        let params = json!({"config": {"enable": true, "server": server, "ssl_ca": "*"}});
        let answer = self.call(dev, "Ws.SetConfig", Some(params))?;
        let restart = answer
            .get("restart_required")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if restart {
            dev.restart_required = Some(true);
        }
        log::info!(
            "device {}: outbound WebSocket set to {server}{}",
            dev.label(),
            if restart {
                "; the device applies it after a restart (RestartRequired)"
            } else {
                ""
            }
        );
        Ok(())
    }
}
