//! Which topics a device on the MQTT channel uses, as its firmware names them (pure: no I/O).
//!
//! - Shelly Gen2+ (`topic_prefix` = `MqttTopic`, default the device id `<model id>-<mac>`): requests to
//!   `<prefix>/rpc`, answers to us on `<ClientId>/<device ID>/rpc` (our `src` is `<ClientId>/<device ID>`, so
//!   one wildcard subscription takes every device's answers and the topic names the device), notifications on
//!   `<prefix>/events/rpc`, availability on `<prefix>/online` (`true`, and `false` as its last will).
//! - Tasmota (`%topic%` = `MqttTopic`, default `tasmota_` + the MAC's last 6 hex digits; `FullTopic` =
//!   `MqttFullTopic`, default `%prefix%/%topic%/`): commands to `cmnd/…/<Command>`, answers on
//!   `stat/…/RESULT` and `stat/…/STATUS<n>`, telemetry on `tele/…/STATE` and `tele/…/SENSOR`, availability
//!   on `tele/…/LWT` (`Online`, `Offline` as its retained last will).

use crate::config::DeviceConfig;
use crate::mqtt::packet::valid_topic;

/// The default Tasmota `FullTopic`.
pub(crate) const TASMOTA_FULL_TOPIC: &str = "%prefix%/%topic%/";

/// What a message on one of a device's topics is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Gen2+ `<prefix>/online` or Tasmota `tele/…/LWT`.
    Online,
    /// Gen2+ `<prefix>/events/rpc`.
    Events,
    /// Tasmota `stat/…/<last level>` (`RESULT`, `STATUS0`, `STATUS10`, `POWER1`…).
    Stat(String),
    /// Tasmota `tele/…/<last level>` (`STATE`, `SENSOR`; others are ignored).
    Tele(String),
}

/// A device family that speaks MQTT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// Shelly Gen2+ (JSON-RPC).
    Rpc,
    /// Tasmota.
    Tasmota,
}

/// One device's topics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Topics {
    pub(crate) family: Family,
    /// Gen2+ `topic_prefix`; Tasmota `%topic%`.
    pub(crate) topic: String,
    /// Tasmota `FullTopic` (with `%prefix%` and `%topic%`).
    pub(crate) full: String,
}

impl Topics {
    /// Gen2+ topics for `prefix`.
    pub(crate) fn rpc(prefix: &str) -> Topics {
        Topics {
            family: Family::Rpc,
            topic: prefix.to_string(),
            full: String::new(),
        }
    }

    /// Tasmota topics for `%topic%` and `FullTopic` (`None`: the default).
    pub(crate) fn tasmota(topic: &str, full: Option<&str>) -> Topics {
        Topics {
            family: Family::Tasmota,
            topic: topic.to_string(),
            full: full.unwrap_or(TASMOTA_FULL_TOPIC).to_string(),
        }
    }

    /// Tasmota: the full topic for `prefix` (`cmnd`, `stat`, `tele`), ending in `/`.
    fn tasmota_base(&self, prefix: &str) -> String {
        let mut t = self
            .full
            .replace("%prefix%", prefix)
            .replace("%topic%", &self.topic);
        if !t.ends_with('/') {
            t.push('/');
        }
        t
    }

    /// Gen2+: where requests go.
    pub(crate) fn request(&self) -> String {
        format!("{}/rpc", self.topic)
    }

    /// Tasmota: where `command` goes (`cmnd/<topic>/<command>`).
    pub(crate) fn command(&self, command: &str) -> String {
        format!("{}{command}", self.tasmota_base("cmnd"))
    }

    /// What we subscribe to for this device: exact topics, and (Tasmota) bases whose last level is a
    /// wildcard.
    pub(crate) fn routes(&self) -> Vec<Route> {
        match self.family {
            Family::Rpc => vec![
                Route::Exact(format!("{}/online", self.topic), Kind::Online),
                Route::Exact(format!("{}/events/rpc", self.topic), Kind::Events),
            ],
            Family::Tasmota => vec![
                Route::Exact(format!("{}LWT", self.tasmota_base("tele")), Kind::Online),
                Route::Level(self.tasmota_base("stat"), Level::Stat),
                Route::Level(self.tasmota_base("tele"), Level::Tele),
            ],
        }
    }
}

/// How a subscription routes messages to its device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// This very topic.
    Exact(String, Kind),
    /// Any one level under this base (which ends in `/`): subscribed as `<base>+`.
    Level(String, Level),
}

/// Which Tasmota prefix a [`Route::Level`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Stat,
    Tele,
}

impl Route {
    /// The subscription filter.
    pub(crate) fn filter(&self) -> String {
        match self {
            Route::Exact(t, _) => t.clone(),
            Route::Level(base, _) => format!("{base}+"),
        }
    }
}

/// Our `src` for device `id`: answers come on `<src>/rpc`.
pub(crate) fn src(client_id: &str, id: i64) -> String {
    format!("{client_id}/{id}")
}

/// The filter that takes every device's answers: `<ClientId>/+/rpc`.
pub(crate) fn answers_filter(client_id: &str) -> String {
    format!("{client_id}/+/rpc")
}

/// The device ID an answer topic `<ClientId>/<ID>/rpc` names.
pub(crate) fn answer_device(client_id: &str, topic: &str) -> Option<i64> {
    let rest = topic.strip_prefix(client_id)?.strip_prefix('/')?;
    rest.strip_suffix("/rpc")?.parse().ok()
}

/// A device's topics from its configuration: `MqttTopic`, else the default its firmware uses, which needs the
/// MAC. `Err`: why there is none, or why the configured one cannot be used, with the fix.
pub(crate) fn for_device(cfg: &DeviceConfig, family: Family) -> Result<Topics, String> {
    let mac_hex = cfg.mac.map(|m| {
        m.bytes()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<String>()
    });
    let topic = match (&cfg.mqtt_topic, family, mac_hex) {
        (Some(t), _, _) => t.clone(),
        // Firmware's device id: the model id in lower case, a dash, the MAC in lower-case hex.
        (None, Family::Rpc, Some(mac)) => format!(
            "{}-{}",
            cfg.model
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .collect::<String>()
                .to_ascii_lowercase(),
            mac.to_ascii_lowercase()
        ),
        (None, Family::Tasmota, Some(mac)) => format!("tasmota_{}", &mac[6..]),
        (None, Family::Rpc, None) => {
            return Err("Channel mqtt needs MqttTopic (the device's topic_prefix, shown in its MQTT settings) or its MAC (the default prefix is <model id>-<mac>)".into());
        }
        (None, Family::Tasmota, None) => {
            return Err("Channel mqtt needs MqttTopic (the device's Topic, shown by its MQTT settings or the command Topic) or its MAC (the default is tasmota_ and the MAC's last 6 hex digits)".into());
        }
    };
    // A topic level of ours must not be a wildcard, and `<prefix>/rpc` must stay one topic.
    if !valid_topic(&topic) || topic.starts_with('$') || topic.ends_with('/') {
        return Err(format!(
            "MqttTopic '{}' is not a usable MQTT topic: no '+', '#' or NUL, not starting with '$', not ending with '/'",
            crate::text::clip(&topic, 80)
        ));
    }
    let topics = match family {
        Family::Rpc => Topics::rpc(&topic),
        Family::Tasmota => {
            if let Some(full) = &cfg.mqtt_full_topic
                && (!full.contains("%prefix%")
                    || !full.contains("%topic%")
                    || !valid_topic(full)
                    || full.starts_with('$'))
            {
                return Err(format!(
                    "MqttFullTopic '{}' must contain %prefix% and %topic% and no '+', '#' or NUL (Tasmota's default is %prefix%/%topic%/)",
                    crate::text::clip(full, 80)
                ));
            }
            Topics::tasmota(&topic, cfg.mqtt_full_topic.as_deref())
        }
    };
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(model: &str, mac: Option<&str>, topic: Option<&str>) -> DeviceConfig {
        DeviceConfig {
            model: model.into(),
            mac: mac.map(|m| crate::mac::Mac::parse(m).unwrap()),
            mqtt_topic: topic.map(str::to_string),
            ..DeviceConfig::default()
        }
    }

    #[test]
    fn default_topics_are_the_firmware_ids() {
        let t = for_device(
            &cfg("ShellyPlus1PM", Some("A8:03:2A:B1:23:45"), None),
            Family::Rpc,
        )
        .unwrap();
        assert_eq!(t.request(), "shellyplus1pm-a8032ab12345/rpc");
        let t = for_device(
            &cfg("Tasmota", Some("A8:03:2A:B1:23:45"), None),
            Family::Tasmota,
        )
        .unwrap();
        assert_eq!(t.command("Power1"), "cmnd/tasmota_B12345/Power1");
        let e = for_device(&cfg("ShellyPlus1PM", None, None), Family::Rpc).unwrap_err();
        assert!(e.contains("MqttTopic") && e.contains("MAC"), "{e}");
    }

    #[test]
    fn configured_topics_are_checked_and_full_topic_is_honoured() {
        for bad in ["a/+/b", "a/#", "$SYS/x", "a/"] {
            let e = for_device(&cfg("Tasmota", None, Some(bad)), Family::Tasmota).unwrap_err();
            assert!(e.contains("not a usable MQTT topic"), "{bad}: {e}");
        }
        let mut c = cfg("Tasmota", None, Some("plug"));
        c.mqtt_full_topic = Some("home/%topic%/%prefix%".into());
        let t = for_device(&c, Family::Tasmota).unwrap();
        assert_eq!(t.command("Status0"), "home/plug/cmnd/Status0");
        assert_eq!(
            t.routes().iter().map(Route::filter).collect::<Vec<_>>(),
            ["home/plug/tele/LWT", "home/plug/stat/+", "home/plug/tele/+"]
        );
        c.mqtt_full_topic = Some("home/%topic%".into());
        assert!(for_device(&c, Family::Tasmota).is_err());
    }

    #[test]
    fn answers_name_their_device() {
        assert_eq!(answer_device("smartdev-1", "smartdev-1/17/rpc"), Some(17));
        assert_eq!(answer_device("smartdev-1", "smartdev-2/17/rpc"), None);
        assert_eq!(answer_device("smartdev-1", "smartdev-1/x/rpc"), None);
        assert_eq!(answer_device("smartdev-1", "smartdev-1/17/rpcx"), None);
        assert!(crate::mqtt::packet::matches(
            &answers_filter("smartdev-1"),
            &format!("{}/rpc", src("smartdev-1", 17))
        ));
    }
}
