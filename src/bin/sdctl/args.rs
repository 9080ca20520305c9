//! Command-line parsing for sdctl (no parser crate: the grammar is small).

use std::path::PathBuf;

use smartdev::{ComponentKind, CoverAction, Identity, LightChange};

pub const USAGE: &str = "\
usage: sdctl [--config FILE] [--schema FILE]... [--models FILE] [--json] [--name] [--listen] [--verbose] <command>

commands:
  status [DEVICE]                          read and print every device (or one); exit 1 if one is offline
  models [--detailed] [MODEL]              print the model library
  read device ID|NAME                      read a device now and print it (text; JSON with --json)
  get device ID|NAME                       print a device as last read (sdctl reads every device once when it
                                           starts): text, JSON with --json
  get input|output|meter|temp-probe|cover|sensor ID|NAME
                                           print one component as JSON, as last read; a value the device has
                                           not reported is null, never false or 0. read/get of an offline
                                           device print its object too, then exit 1 saying why it is offline
  set OUTPUT on|off|toggle                 switch an output; prints the new state and whether it changed
  cover COVER open|close|stop|position N   move a cover (N: 0 closed to 100 open; needs a calibrated cover);
                                           prints its state right after the command
  light OUTPUT [on|off] [--brightness P] [--temp K] [--rgb RRGGBB] [--white P] [--transition S]
                                           set a light: brightness and white in % (0–100), colour temperature
                                           in K (within the light's range), colour as hex RRGGBB, transition in
                                           s; prints the light as the device reports it right after
  check                                    validate the configuration and print every problem
  trust DEVICE [SHA256]                    accept the TLS certificate an HTTPS device presents now in place
                                           of the one pinned at first use (after it was refused as changed);
                                           with SHA256, only a certificate with that fingerprint
  events [--count N] [--timeout SECS]      run the webhook listener (even when the configuration leaves
                                           it off) and print one JSON line per event
  discover [--timeout SECS] [--yaml]       find Shelly and Tasmota devices on the local network (mDNS, then
                                           one HTTP request each): a table, JSON with --json, or with --yaml
                                           device blocks to paste into a configuration. Listens 3 s by
                                           default; with --config, marks the devices already configured
  firmware DEVICE [check]                  print the firmware it runs and the newer versions on offer
  firmware DEVICE update [--beta] [--timeout SECS]
                                           install the latest stable (or beta) firmware and follow the device
                                           through its restart, one line per step; waits at most SECS (600)
  energy METER [--from TIME] [--to TIME] [--csv]
                                           read the meter's own interval records (Shelly energy meters):
                                           one line per interval with a total, CSV with --csv, JSON with
                                           --json. TIME: RFC 3339 (2026-11-25T00:00:00Z, or +01:00), a date
                                           (UTC), now, or before now (-24h, -90m, -7d); default the last 24 h
  emulate DEVICE...                        serve emulated devices on 127.0.0.1 (sdctl emulate --help)

options:
  --config FILE   configuration (YAML, either layout); without it an embedded demo of simulated devices is
                  used, with its files in $SMARTDEV_DEMO_DIR, else $XDG_STATE_HOME/smartdev/demo, else
                  ~/.local/state/smartdev/demo
  --schema FILE   validation-dictionary extension with custom attributes (repeatable)
  --models FILE   model library to use instead of the built-in one
  --json          print JSON instead of text (every command but emulate; events always prints JSON)
  --name          treat DEVICE/OUTPUT/COVER/... arguments as names even when they look like numbers
  --listen        run the webhook listener for this command too, and install the configured hooks on the
                  devices with its port, as an application would. Without it only events listens: the
                  other commands leave the hooks on the devices as they are and never take the port, so
                  they work next to a running application (or sdctl events) using the same file
  --yaml          discover only: print configuration blocks instead of a table
  --interface IF  discover only: query on this network interface (repeatable; 'all' for every one).
                  Default: the interfaces with a private or link-local address
  --verbose       log detailed messages to stderr

An argument that is an integer is an ID, otherwise a name.
exit codes: 0 ok, 1 operation failed (offline, timeout, device error), 2 usage or configuration error";

/// What to do.
#[derive(Debug, PartialEq)]
pub enum Command {
    Status(Option<String>),
    Models {
        detailed: bool,
        model: Option<String>,
    },
    GetDevice(String),
    ReadDevice(String),
    GetComponent(ComponentKind, String),
    Set {
        output: String,
        action: String,
    },
    Cover {
        cover: String,
        action: CoverAction,
    },
    Light {
        output: String,
        change: LightChange,
    },
    Check,
    Trust {
        device: String,
        expect: Option<String>,
    },
    Events {
        count: Option<u64>,
        timeout: Option<f64>,
    },
    Discover {
        timeout: Option<f64>,
    },
    Firmware {
        device: String,
        update: bool,
        beta: bool,
        timeout: Option<f64>,
    },
    Energy {
        meter: String,
        from: String,
        to: String,
        csv: bool,
    },
    Help,
    Version,
}

/// Parsed command line.
#[derive(Debug, Default)]
pub struct Args {
    pub config: Option<PathBuf>,
    pub schemas: Vec<PathBuf>,
    pub models: Option<PathBuf>,
    pub json: bool,
    pub force_name: bool,
    /// Run the webhook listener (and install hooks) for commands other than `events` too.
    pub listen: bool,
    pub verbose: bool,
    /// `discover --yaml`.
    pub yaml: bool,
    /// `discover --interface`, in order.
    pub interfaces: Vec<String>,
    pub command: Option<Command>,
}

impl Args {
    /// `ID` when the text is an integer (unless `--name`), otherwise a name.
    pub fn identity(&self, text: &str) -> Identity {
        match text.parse::<i64>() {
            Ok(id) if !self.force_name => Identity::Id(id),
            _ => Identity::Name(text.to_string()),
        }
    }
}

/// Parses the arguments after the program name.
pub fn parse(raw: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut args = Args::default();
    let mut words = Vec::new();
    let mut detailed = false;
    let mut count = None;
    let mut timeout = None;
    let mut beta = false;
    let mut light = LightChange::new();
    let mut light_options = false;
    let (mut from, mut to, mut csv) = (None, None, false);
    // `--config=FILE` is the same as `--config FILE`.
    let expanded: Vec<String> = raw
        .into_iter()
        .flat_map(|a| match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => vec![k.to_string(), v.to_string()],
            _ => vec![a],
        })
        .collect();
    let mut it = expanded.into_iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--config" | "-c" => args.config = Some(value("--config")?.into()),
            "--schema" => args.schemas.push(value("--schema")?.into()),
            "--models" => args.models = Some(value("--models")?.into()),
            "--json" => args.json = true,
            "--name" => args.force_name = true,
            "--listen" => args.listen = true,
            "--verbose" | "-v" => args.verbose = true,
            "--yaml" => args.yaml = true,
            "--interface" => args.interfaces.push(value("--interface")?),
            "--detailed" => detailed = true,
            "--beta" => beta = true,
            "--csv" => csv = true,
            "--from" => from = Some(value("--from")?),
            "--to" => to = Some(value("--to")?),
            "--count" => {
                let v = value("--count")?;
                count = Some(
                    v.parse()
                        .map_err(|_| format!("--count needs a whole number, not '{v}'"))?,
                );
            }
            "--timeout" => {
                let v = value("--timeout")?;
                let secs: f64 = v
                    .parse()
                    .map_err(|_| format!("--timeout needs seconds, not '{v}'"))?;
                if !(secs.is_finite() && secs >= 0.0) {
                    return Err(format!("--timeout needs seconds ≥ 0, not '{v}'"));
                }
                timeout = Some(secs);
            }
            "--brightness" | "--white" | "--transition" => {
                let v = value(&a)?;
                let n: f64 = v
                    .parse()
                    .ok()
                    .filter(|n: &f64| n.is_finite())
                    .ok_or_else(|| format!("{a} needs a number, not '{v}'"))?;
                light = match a.as_str() {
                    "--brightness" => light.brightness(n),
                    "--white" => light.white(n),
                    _ => light.transition(n),
                };
                light_options = true;
            }
            "--temp" => {
                let v = value("--temp")?;
                let k = v.parse().map_err(|_| {
                    format!("--temp needs a colour temperature in whole K, e.g. 3000, not '{v}'")
                })?;
                light = light.temperature(k);
                light_options = true;
            }
            "--rgb" => {
                let v = value("--rgb")?;
                light = light.rgb(smartdev::light::parse_rgb(&v).map_err(|e| e.to_string())?);
                light_options = true;
            }
            "--help" | "-h" => args.command = Some(Command::Help),
            "--version" | "-V" => args.command = Some(Command::Version),
            s if s.starts_with('-') && s.len() > 1 && s.parse::<i64>().is_err() => {
                return Err(format!("unknown option '{s}'"));
            }
            _ => words.push(a),
        }
    }
    if args.command.is_some() {
        return Ok(args);
    }
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let command = match w.as_slice() {
        [] => return Err("a command is needed".into()),
        ["help"] => Command::Help,
        ["status"] => Command::Status(None),
        ["status", d] => Command::Status(Some(d.to_string())),
        ["models"] => Command::Models {
            detailed,
            model: None,
        },
        ["models", m] => Command::Models {
            detailed,
            model: Some(m.to_string()),
        },
        ["get", "device", id] => Command::GetDevice(id.to_string()),
        ["read", "device", id] => Command::ReadDevice(id.to_string()),
        ["read", ..] => return Err("read needs a device ID or name, e.g. read device 3".into()),
        ["get", kind, id] => match kind.parse::<ComponentKind>() {
            Ok(k) => Command::GetComponent(k, id.to_string()),
            Err(_) => {
                return Err(format!(
                    "cannot get '{kind}'; use device, input, output, meter, temp-probe, cover or sensor"
                ));
            }
        },
        ["get", ..] => return Err("get needs a kind and an ID or name, e.g. get output 3".into()),
        ["set", output, action] => match *action {
            "on" | "off" | "toggle" => Command::Set {
                output: output.to_string(),
                action: action.to_string(),
            },
            other => return Err(format!("set needs on, off or toggle, not '{other}'")),
        },
        ["set", ..] => {
            return Err("set needs an output and on|off|toggle, e.g. set 'Pool Pump' on".into());
        }
        ["cover", cover, action] => {
            let action = match *action {
                "open" => CoverAction::Open,
                "close" => CoverAction::Close,
                "stop" => CoverAction::Stop,
                "position" => {
                    return Err(
                        "cover position needs a number, e.g. cover Blind position 40".into(),
                    );
                }
                other => {
                    return Err(format!(
                        "cover needs open, close, stop or position N, not '{other}'"
                    ));
                }
            };
            Command::Cover {
                cover: cover.to_string(),
                action,
            }
        }
        ["cover", cover, "position", n] => Command::Cover {
            cover: cover.to_string(),
            action: CoverAction::Position(position(n)?),
        },
        ["cover", ..] => {
            return Err(
                "cover needs a cover and open|close|stop|position N, e.g. cover Blind position 40"
                    .into(),
            );
        }
        ["light", output] => Command::Light {
            output: output.to_string(),
            change: light,
        },
        ["light", output, on @ ("on" | "off")] => Command::Light {
            output: output.to_string(),
            change: light.on(*on == "on"),
        },
        ["light", ..] => {
            return Err(
                "light needs an output, then on or off and/or --brightness P, --temp K, --rgb RRGGBB, --white P, --transition S; e.g. light Lamp on --brightness 40"
                    .into(),
            );
        }
        ["check"] => Command::Check,
        ["trust", d] => Command::Trust {
            device: d.to_string(),
            expect: None,
        },
        ["trust", d, fp] => Command::Trust {
            device: d.to_string(),
            expect: Some(fp.to_string()),
        },
        ["events"] => Command::Events { count, timeout },
        ["discover"] => Command::Discover { timeout },
        ["firmware", device] | ["firmware", device, "check"] => Command::Firmware {
            device: device.to_string(),
            update: false,
            beta,
            timeout,
        },
        ["firmware", device, "update"] => Command::Firmware {
            device: device.to_string(),
            update: true,
            beta,
            timeout,
        },
        ["firmware", ..] => {
            return Err(
                "firmware needs a device and check or update, e.g. firmware Kitchen update --beta"
                    .into(),
            );
        }
        ["energy", meter] => Command::Energy {
            meter: meter.to_string(),
            from: from.clone().unwrap_or_else(|| "-24h".into()),
            to: to.clone().unwrap_or_else(|| "now".into()),
            csv,
        },
        ["energy", ..] => {
            return Err(
                "energy needs one meter, e.g. energy 'Grid A' --from -24h (quote a name with spaces)"
                    .into(),
            );
        }
        [cmd, ..] => return Err(format!("unknown command or wrong arguments: '{cmd}'")),
    };
    if detailed && !matches!(command, Command::Models { .. }) {
        return Err("--detailed only applies to models".into());
    }
    if light_options && !matches!(command, Command::Light { .. }) {
        return Err(
            "--brightness, --temp, --rgb, --white and --transition only apply to light".into(),
        );
    }
    if count.is_some() && !matches!(command, Command::Events { .. }) {
        return Err("--count only applies to events".into());
    }
    let updating = matches!(command, Command::Firmware { update: true, .. });
    if timeout.is_some()
        && !updating
        && !matches!(command, Command::Events { .. } | Command::Discover { .. })
    {
        return Err("--timeout only applies to events, discover and firmware update".into());
    }
    let energy = matches!(command, Command::Energy { .. });
    if (from.is_some() || to.is_some() || csv) && !energy {
        return Err("--from, --to and --csv only apply to energy".into());
    }
    if csv && args.json {
        return Err("energy prints either --csv or --json, not both".into());
    }
    if beta && !updating {
        return Err("--beta only applies to firmware update".into());
    }
    let discovering = matches!(command, Command::Discover { .. });
    if (args.yaml || !args.interfaces.is_empty()) && !discovering {
        return Err("--yaml and --interface only apply to discover".into());
    }
    if args.yaml && args.json {
        return Err("discover prints either --json or --yaml, not both".into());
    }
    args.command = Some(command);
    Ok(args)
}

/// A cover position: a whole number from 0 (closed) to 100 (open).
fn position(text: &str) -> Result<u8, String> {
    match text.parse::<i64>() {
        Ok(p) if (0..=100).contains(&p) => Ok(p as u8),
        Ok(p) => Err(format!(
            "cover position {p} is out of range; use 0 (closed) to 100 (open)"
        )),
        Err(_) => Err(format!(
            "cover position needs a whole number, not '{text}'; use 0 (closed) to 100 (open)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str]) -> Result<Args, String> {
        parse(s.iter().map(|x| x.to_string()))
    }

    #[test]
    fn commands_and_options() {
        let a = p(&["--json", "--config", "c.yaml", "status"]).unwrap();
        assert!(a.json);
        assert_eq!(a.config.unwrap(), PathBuf::from("c.yaml"));
        assert_eq!(a.command, Some(Command::Status(None)));
        let a = p(&["get", "temp-probe", "2"]).unwrap();
        assert_eq!(
            a.command,
            Some(Command::GetComponent(ComponentKind::TempProbe, "2".into()))
        );
        assert_eq!(a.identity("2"), Identity::Id(2));
        let a = p(&["--name", "set", "7", "toggle"]).unwrap();
        assert_eq!(a.identity("7"), Identity::Name("7".into()));
        assert!(!a.listen);
        assert!(p(&["status", "--listen"]).unwrap().listen);
        let a = p(&["models", "--detailed", "--config=x.yaml"]).unwrap();
        assert_eq!(
            a.command,
            Some(Command::Models {
                detailed: true,
                model: None
            })
        );
        assert_eq!(a.config.unwrap(), PathBuf::from("x.yaml"));
        let a = p(&["--json", "cover", "Blind", "position", "40"]).unwrap();
        assert_eq!(
            a.command,
            Some(Command::Cover {
                cover: "Blind".into(),
                action: CoverAction::Position(40)
            })
        );
        let a = p(&["cover", "3", "stop"]).unwrap();
        assert_eq!(
            a.command,
            Some(Command::Cover {
                cover: "3".into(),
                action: CoverAction::Stop
            })
        );
        assert_eq!(
            p(&["get", "sensor", "Bath"]).unwrap().command,
            Some(Command::GetComponent(ComponentKind::Sensor, "Bath".into()))
        );
    }

    #[test]
    fn mistakes_are_explained() {
        assert!(p(&[]).unwrap_err().contains("command"));
        assert!(
            p(&["set", "x", "up"])
                .unwrap_err()
                .contains("on, off or toggle")
        );
        assert!(
            p(&["get", "thing", "1"])
                .unwrap_err()
                .contains("cannot get 'thing'")
        );
        assert!(p(&["--bogus", "status"]).unwrap_err().contains("--bogus"));
        assert!(p(&["--config"]).unwrap_err().contains("needs a value"));
        assert!(
            p(&["events", "--count", "x"])
                .unwrap_err()
                .contains("--count")
        );
        assert!(
            p(&["status", "--count", "2"])
                .unwrap_err()
                .contains("only applies to events")
        );
        assert!(
            p(&["cover", "Blind", "position", "150"])
                .unwrap_err()
                .contains("use 0 (closed) to 100 (open)")
        );
        assert!(
            p(&["cover", "Blind", "position", "-1"])
                .unwrap_err()
                .contains("out of range")
        );
        assert!(
            p(&["cover", "Blind", "position", "half"])
                .unwrap_err()
                .contains("whole number")
        );
        assert!(
            p(&["cover", "Blind", "position"])
                .unwrap_err()
                .contains("needs a number")
        );
        assert!(
            p(&["cover", "Blind", "up"])
                .unwrap_err()
                .contains("not 'up'")
        );
        assert!(
            p(&["cover", "Blind"])
                .unwrap_err()
                .contains("e.g. cover Blind")
        );
        assert!(
            p(&["status", "--yaml"])
                .unwrap_err()
                .contains("only apply to discover")
        );
        assert!(
            p(&["discover", "--yaml", "--json"])
                .unwrap_err()
                .contains("not both")
        );
        let a = p(&[
            "discover",
            "--timeout",
            "2",
            "--yaml",
            "--interface",
            "eth0",
        ])
        .unwrap();
        assert_eq!(a.command, Some(Command::Discover { timeout: Some(2.0) }));
        assert!(a.yaml);
        assert_eq!(a.interfaces, ["eth0"]);
        let a = p(&["events", "--count", "3", "--timeout", "1.5"]).unwrap();
        assert_eq!(
            a.command,
            Some(Command::Events {
                count: Some(3),
                timeout: Some(1.5)
            })
        );
    }
}
