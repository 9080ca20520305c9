//! `sdctl emulate`: runs emulated devices (and the admin endpoint) until killed.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use smartdev::ModelLibrary;
use smartdev::discovery::Interfaces;
use smartdev::emulator::{AddonSensor, AuthMode, DeviceSpec, Emulator, MqttSpec};
use smartdev::models::{SensorQuantity, is_tasmota};

pub const USAGE: &str = "\
usage: sdctl emulate [--admin-port P] [--models FILE] [--listen-on ADDR] [--announce [--interface IF]...] DEVICE...

  --listen-on ADDR  127.0.0.1 (default) or 0.0.0.0: every address of this host (reachable from the network!)
  --announce        announce every device over mDNS like the real one (Gen2+: _shelly._tcp and _http._tcp
                    with TXT gen, app, ver; Gen1: _http._tcp as shelly1pm-<MAC>; Tasmota: _http._tcp with
                    devicetype=tasmota), so `sdctl discover` finds them. Sends multicast: off by default.
                    Ids and MACs follow from the DEVICE list, the same in every run (a configuration keeps
                    working): give id= or mac= when several emulate processes announce on one network
  --interface IF    with --announce: announce on this interface (repeatable; 'all' for every one, loopback
                    included). Default: the interfaces with a private or link-local address

DEVICE is MODEL[:PORT][,profile=P][,outputs=N][,meters=N][,shutters=N][,travel=SECONDS][,probes=A;B]
          [,sensors=NAME:QUANTITY;...][,id=X][,mac=M][,reports=MODEL][,latency=MS][,password=P][,user=U][,fw=1|2]
          [,nonce_life=SECONDS][,sleep=SECONDS][,md5][,oldauth][,version=V][,stable=V][,beta=V][,tls][,es]
          [,mqtt=HOST:PORT[,topic=T][,mqtt_user=U,mqtt_pass=P][,mqtt_ca=FILE]]
          [,mcast][,coap]
  MODEL       a model id of the library (see `sdctl models`) or Tasmota
  PORT        port on 127.0.0.1 (default: a free one); Shelly1:80 serves a Gen1 device on port 80, which
              some Gen1 clients insist on (needs root or CAP_NET_BIND_SERVICE)
  profile     Shelly models with profiles: the profile to start in, e.g. cover (2PM), roller (Shelly 2.5),
              monophase (Pro 3EM); `sdctl models --detailed` lists them (default: the model's default)
  outputs, meters
              Tasmota only: relay and meter counts (default 1, or two per shutter; meters default to outputs)
  shutters    Tasmota only: shutters, each on two consecutive relays (ShutterOpen1, ShutterPosition1 50, ...)
  travel      seconds a cover, roller or shutter takes from closed to open (default 20)
  probes      add-on temperature probe names, separated by ';' (quote it in the shell)
  sensors     more add-on sensors, NAME:QUANTITY separated by ';': temperature (a DS18B20), humidity (a DHT22:
              temperature and humidity; on Tasmota name it AM2301, SI7021 or BME280), voltage (Gen2+ voltmeter)
  id          the device id to report
  mac         the MAC to report, e.g. a8-03-2a-b1-23-45 or A8032AB12345 (default: derived from the id)
  reports     the model /shelly reports instead of the library's (Shelly only)
  latency     milliseconds added before every answer
  password    enable authentication like the real device: Gen1 HTTP Basic, Gen2+ HTTP Digest (user admin,
              realm = device id), Tasmota user=&password= parameters
  user        Gen1 and Tasmota: the user name (default admin)
  fw          Gen2+: nonce rules of firmware 2.x (2, default: reusable nonces with rising nc, 32 slots, 429)
              or before 2.0 (1: numeric nonces, one request each)
  nonce_life  Gen2+: nonce lifetime in seconds (default 3600)
  sleep       Gen2+: a battery device that sleeps (refuses HTTP) and wakes every SECONDS to push its status to
              the outbound WebSocket server its Ws.SetConfig names (e.g. ShellyHTG3,sleep=7200)
  md5         Gen2+: digest with algorithm=MD5 instead of SHA-256
  oldauth     Tasmota: answer missing credentials with 200 like firmware before 8.2.3 (default 401)
  version     the firmware version it runs (default: Gen2+ 1.7.5, Gen1 1.14.0, Tasmota 13.4.0)
  stable, beta
              newer firmware on offer (Tasmota: stable is what Upgrade 1 installs); an update downloads for 1 s,
              restarts for 2 s, then runs it
  tls         serve HTTPS and WSS with a self-signed certificate for localhost and 127.0.0.1; its
              SHA-256 fingerprint is printed (configure it as CertSha256, or let first use pin it)
  es          Gen2+: report Enhanced Security (enhanced_security: true) as firmware 2.0 does; alone it
              does not mean HTTPS
  mqtt        also be the MQTT client of this broker, as the firmware is (it keeps serving HTTP). Gen2+:
              client id = device id, will <prefix>/online false, RPC on <prefix>/rpc answered on <src>/rpc,
              notifications on <prefix>/events/rpc. Gen1: shellies/<id>/online, relay/<n>[/power|/energy],
              input/<n>, relay/<n>/command, every 30 s. Tasmota: will tele/<topic>/LWT Offline, commands on
              cmnd/<topic>/..., answers on stat/<topic>/..., telemetry every TelePeriod (300 s). Reconnects
              after 1 s doubling to 30 s when the broker goes away
  topic       with mqtt: Gen2+ the topic prefix (default the device id), Gen1 the <id> of shellies/<id>
              (default the device id), Tasmota the topic (default tasmota_XXXXXX)
  mqtt_user, mqtt_pass
              with mqtt: the broker login
  mqtt_ca     with mqtt: connect over TLS, checking the broker against the CA certificates in this PEM file
  mcast       Gen1: send CoIoT statuses to the multicast group 224.0.1.187:5683 while no CoIoT peer is set
              (/settings?coiot_peer=); without it only a peer gets them (with 127.0.0.1: loopback only)
  coap        Gen1: answer CoAP GET cit/d and cit/s on UDP 5683 at the device's address, as firmware does;
              one such device per address (--listen-on 127.0.0.2 'Shelly1:80,coap')

Prints `MODEL <id> http://127.0.0.1:<port>` per device (tls: `https://…` and `sha256=<fingerprint>`) and `admin http://127.0.0.1:<port>`, then serves until
killed. The admin endpoint (JSON) controls faults, latency, inputs, outputs, loads, probes, webhooks, profiles,
covers, sensors and lights:
  GET /devices   POST /devices/<i>/fault?kind=none|blackhole|refuse|http500|malformed|truncated|flapping&ms=P
  POST /devices/<i>/latency?ms=N   GET /devices/<i>/counts   POST /devices/<i>/output?id=N&state=true
  POST /devices/<i>/input?id=N&state=..   POST /devices/<i>/load?id=N&watts=W
  POST /devices/<i>/history?backfill_s=S[&gap_from=T&gap_to=T] (energy meters: S seconds of records at the
       present load; none between the Unix times T; records are otherwise kept one per minute as time passes)
  POST /devices/<i>/probe?id=N[&celsius=T]   POST /devices/<i>/fire?event=E&id=CID   GET /devices/<i>/webhooks
  POST /devices/<i>/password[?value=P] (no value: auth off)   GET /devices/<i>/auth (auth counters)
  GET|POST /devices/<i>/mac[?value=M] (another device at the address: it reports MAC M from now on)
  GET|POST /devices/<i>/profile[?name=P] (switching reboots the device)
  GET /devices/<i>/cover?id=N   POST /devices/<i>/cover?id=N[&calibrated=true|false][&position=P]
  POST /devices/<i>/sensor?quantity=temperature|humidity|voltage&id=N[&value=V]   POST /devices/<i>/battery?percent=P
  POST /devices/<i>/input_type?id=N&type=switch|button   POST /devices/<i>/press?id=N[&kind=single|double|triple|long]
  GET|POST /devices/<i>/light?id=N[&state=true&brightness=P&ct=K&rgb=RRGGBB&white=0-255]
  POST /devices/<i>/frequency?id=N&hz=F
  GET|POST /devices/<i>/announce[?on=true|false] (mDNS records; withdraw or restore the announcement)
  GET|POST /devices/<i>/cert[?ca=true][&expired=true][&names=A;B] (tls devices: the fingerprint, or a new
       certificate: self-signed, or signed by the emulator's CA whose PEM GET /ca returns)
  POST /devices/<i>/move[?address=A][&port=P] (the device leaves its address, as after a DHCP lease change:
       a new address keeps the port unless P is given; no address: a free port; GET /devices/<i> says where)
  GET /devices/<i>/mqtt   POST /devices/<i>/mqtt?action=drop|pause|resume (cut the broker connection
       without DISCONNECT: the broker publishes the will, the device reconnects; stay away; come back)
  GET|POST /devices/<i>/firmware[?version=V][&stable=V][&beta=V][&outcome=succeed|refuse|never|old|fail]
       [&download_ms=N][&restart_ms=N] (firmware on offer, an empty one: none; how the next updates end)";

const USAGE_ERROR: u8 = 2;
const FAILED: u8 = 1;

/// One device argument plus its start-up latency.
#[derive(Debug, PartialEq)]
struct Device {
    spec: DeviceSpec,
    latency: Option<Duration>,
}

#[derive(Debug, Default, PartialEq)]
struct Options {
    admin_port: u16,
    models: Option<String>,
    devices: Vec<Device>,
    help: bool,
    listen_on: Option<std::net::Ipv4Addr>,
    announce: bool,
    interfaces: Vec<String>,
}

fn number<T: std::str::FromStr>(what: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{what} must be a number, got '{v}'"))
}

/// `NAME:QUANTITY;NAME:QUANTITY`.
fn sensors(v: &str) -> Result<Vec<AddonSensor>, String> {
    v.split(';')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (name, q) = p
                .rsplit_once(':')
                .ok_or_else(|| format!("sensor '{p}' is not NAME:QUANTITY"))?;
            let q: SensorQuantity = q.parse().map_err(|e: smartdev::Error| e.to_string())?;
            Ok(AddonSensor::new(name, q))
        })
        .collect()
}

fn parse_device(text: &str) -> Result<Device, String> {
    let mut parts = text.split(',');
    let head = parts.next().unwrap_or("");
    let (model, port) = match head.split_once(':') {
        Some((m, p)) => (m, number::<u16>("the port", p)?),
        None => (head, 0),
    };
    if model.is_empty() {
        return Err(format!("device '{text}' has no model"));
    }
    let mut spec = DeviceSpec::new(model);
    spec.port = port;
    let mut latency = None;
    let mut mqtt: Option<MqttSpec> = None;
    // The options that refine `mqtt=`, in any order around it.
    let mut topic = None;
    let mut mqtt_user = None;
    let mut mqtt_pass = None;
    let mut mqtt_ca = None;
    for opt in parts {
        match opt {
            "md5" => {
                spec.digest_md5 = true;
                continue;
            }
            "oldauth" => {
                spec.tasmota_old_auth = true;
                continue;
            }
            "tls" => {
                spec.tls = true;
                continue;
            }
            "es" => {
                spec.enhanced_security = true;
                continue;
            }
            "mcast" => {
                spec.coiot_multicast = true;
                continue;
            }
            "coap" => {
                spec.coap = true;
                continue;
            }
            _ => {}
        }
        let (k, v) = opt.split_once('=').ok_or_else(|| {
            format!(
                "device option '{opt}' is not KEY=VALUE (or md5, oldauth, tls, es, mcast, coap)"
            )
        })?;
        match k {
            "profile" if !v.is_empty() => spec.profile = Some(v.to_string()),
            "shutters" => spec.shutters = number("shutters", v)?,
            "travel" => {
                let secs: f64 = number("travel", v)?;
                if !(secs.is_finite() && secs > 0.0 && secs <= 3600.0) {
                    return Err(format!(
                        "travel must be between 0 and 3600 seconds, got '{v}'"
                    ));
                }
                spec.cover_travel = Duration::from_secs_f64(secs);
            }
            "sensors" => spec.sensors = sensors(v)?,
            "outputs" => spec.outputs = Some(number("outputs", v)?),
            "meters" => spec.meters = Some(number("meters", v)?),
            "probes" => {
                spec.probes = v
                    .split(';')
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            "id" if !v.is_empty() => spec.id = Some(v.to_string()),
            "mac" => {
                smartdev::Mac::parse(v)?;
                spec.mac = Some(v.to_string());
            }
            "reports" if !v.is_empty() => spec.reported_model = Some(v.to_string()),
            "latency" => latency = Some(Duration::from_millis(number("latency", v)?)),
            "password" => spec.password = Some(v.to_string()).filter(|p| !p.is_empty()),
            "user" if !v.is_empty() => spec.username = Some(v.to_string()),
            "fw" => {
                spec.auth_mode = match v {
                    "1" => AuthMode::Fw1,
                    "2" => AuthMode::Fw2,
                    _ => return Err(format!("fw must be 1 or 2, got '{v}'")),
                }
            }
            "sleep" => {
                let secs: u64 = number("sleep", v)?;
                if secs == 0 {
                    return Err("sleep must be at least 1 second".into());
                }
                spec.sleep = Some(Duration::from_secs(secs));
            }
            "version" if !v.is_empty() => spec.firmware.version = Some(v.to_string()),
            "stable" if !v.is_empty() => spec.firmware.stable = Some(v.to_string()),
            "beta" if !v.is_empty() => spec.firmware.beta = Some(v.to_string()),
            "mqtt" => mqtt = Some(MqttSpec::new(v)),
            "topic" => topic = Some(v.to_string()),
            "mqtt_user" => mqtt_user = Some(v.to_string()),
            "mqtt_pass" => mqtt_pass = Some(v.to_string()),
            "mqtt_ca" => mqtt_ca = Some(std::path::PathBuf::from(v)),
            "nonce_life" => {
                let secs: u64 = number("nonce_life", v)?;
                if secs == 0 {
                    return Err("nonce_life must be at least 1 second".into());
                }
                spec.nonce_lifetime = Duration::from_secs(secs);
            }
            _ => {
                return Err(format!(
                    "unknown device option '{opt}'; use profile, outputs, meters, shutters, travel, probes, \
                     sensors, id, mac, reports, latency, password, user, fw, nonce_life, sleep, md5, oldauth, \
                     version, stable, beta, tls, es, mqtt, topic, mqtt_user, mqtt_pass, mqtt_ca, mcast or coap"
                ));
            }
        }
    }
    match mqtt.as_mut() {
        Some(m) => {
            m.topic = topic.filter(|t| !t.is_empty());
            m.user = mqtt_user.filter(|u| !u.is_empty());
            m.password = mqtt_pass;
            m.ca_file = mqtt_ca;
            if m.password.is_some() && m.user.is_none() {
                return Err(
                    "mqtt_pass needs mqtt_user (MQTT sends a password only with a user)".into(),
                );
            }
        }
        None if topic.is_some()
            || mqtt_user.is_some()
            || mqtt_pass.is_some()
            || mqtt_ca.is_some() =>
        {
            return Err(
                "topic, mqtt_user, mqtt_pass and mqtt_ca need mqtt=HOST:PORT (the broker)".into(),
            );
        }
        None => {}
    }
    spec.mqtt = mqtt;
    Ok(Device { spec, latency })
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag {
            "-h" | "--help" => o.help = true,
            "--admin-port" => o.admin_port = number("--admin-port", &value("--admin-port")?)?,
            "--models" => o.models = Some(value("--models")?),
            "--listen-on" => {
                let v = value("--listen-on")?;
                match v.parse::<std::net::Ipv4Addr>() {
                    Ok(ip) if ip.is_loopback() || ip.is_unspecified() => o.listen_on = Some(ip),
                    _ => return Err(format!("--listen-on needs 127.0.0.1 or 0.0.0.0, not '{v}'")),
                }
            }
            "--announce" => o.announce = true,
            "--interface" => o.interfaces.push(value("--interface")?),
            f if f.starts_with('-') => return Err(format!("unknown option '{f}'")),
            _ => o.devices.push(parse_device(a)?),
        }
    }
    if o.devices.is_empty() && !o.help {
        return Err("name at least one DEVICE to emulate".into());
    }
    if !o.interfaces.is_empty() && !o.announce {
        return Err("--interface only applies with --announce".into());
    }
    Ok(o)
}

/// Runs `sdctl emulate` with the arguments after `emulate`; returns only on errors (or `--help`).
pub fn run(args: &[String]) -> ExitCode {
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sdctl emulate: {e}\n\n{USAGE}");
            return ExitCode::from(USAGE_ERROR);
        }
    };
    if o.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let models = match &o.models {
        Some(path) => match ModelLibrary::from_file(path) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("sdctl emulate: {e}");
                return ExitCode::from(USAGE_ERROR);
            }
        },
        None => ModelLibrary::embedded(),
    };
    // Unknown models are usage errors; ports in use are failures.
    if let Some(d) = o
        .devices
        .iter()
        .find(|d| !is_tasmota(&d.spec.model) && models.get(&d.spec.model).is_none())
    {
        let hint = models.suggest(&d.spec.model);
        let hint = if hint.is_empty() {
            String::new()
        } else {
            format!(" (did you mean {}?)", hint.join(", "))
        };
        eprintln!(
            "sdctl emulate: unknown model '{}'{hint}; see `sdctl models`",
            d.spec.model
        );
        return ExitCode::from(USAGE_ERROR);
    }
    let specs = o.devices.iter().map(|d| d.spec.clone()).collect();
    let address = o.listen_on.unwrap_or(std::net::Ipv4Addr::LOCALHOST);
    let emu = match Emulator::start_listening_on(specs, &models, o.admin_port, address) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("sdctl emulate: {e}");
            return ExitCode::from(FAILED);
        }
    };
    if o.announce {
        let interfaces = if o.interfaces.iter().any(|i| i == "all") {
            Interfaces::All
        } else if o.interfaces.is_empty() {
            Interfaces::Private
        } else {
            Interfaces::Named(o.interfaces.clone())
        };
        if let Err(e) = emu.start_announcing(&interfaces) {
            eprintln!("sdctl emulate: {e}");
            return ExitCode::from(FAILED);
        }
    }
    let mut out = std::io::stdout().lock();
    for (i, d) in o.devices.iter().enumerate() {
        if let Some(l) = d.latency {
            emu.set_latency(i, l);
        }
        match emu.certificate_sha256(i) {
            Some(fp) => writeln!(
                out,
                "{} {} https://127.0.0.1:{} sha256={fp}",
                d.spec.model,
                emu.device_id(i),
                emu.port(i)
            ),
            None => writeln!(
                out,
                "{} {} http://127.0.0.1:{}",
                d.spec.model,
                emu.device_id(i),
                emu.port(i)
            ),
        }
        .ok();
    }
    let _ = writeln!(out, "admin http://127.0.0.1:{}", emu.admin_port());
    let _ = out.flush();
    drop(out);
    // Serve until killed; the default signal handling ends the process.
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn devices_and_options_parse() {
        let o = parse(&args(
            "--admin-port=9000 --models lib.json Shelly2PMG3:18001,probes=Roof;Pool,latency=50 \
             Tasmota,outputs=3,meters=2,id=tasmota-A1B2C3 ShellyPlus1PM,reports=X,version=1.4.4,stable=1.5.0,beta=1.6.0-b1",
        ))
        .unwrap();
        assert_eq!(o.admin_port, 9000);
        assert_eq!(o.models.as_deref(), Some("lib.json"));
        let d = &o.devices;
        assert_eq!(
            (d[0].spec.model.as_str(), d[0].spec.port),
            ("Shelly2PMG3", 18001)
        );
        assert_eq!(d[0].spec.probes, ["Roof", "Pool"]);
        assert_eq!(d[0].latency, Some(Duration::from_millis(50)));
        assert_eq!((d[1].spec.outputs, d[1].spec.meters), (Some(3), Some(2)));
        assert_eq!(d[1].spec.id.as_deref(), Some("tasmota-A1B2C3"));
        assert_eq!(d[2].spec.reported_model.as_deref(), Some("X"));
        assert_eq!(d[0].spec.password, None);
        let fw = &d[2].spec.firmware;
        assert_eq!(
            (
                fw.version.as_deref(),
                fw.stable.as_deref(),
                fw.beta.as_deref()
            ),
            (Some("1.4.4"), Some("1.5.0"), Some("1.6.0-b1"))
        );
    }

    #[test]
    fn tls_options_parse() {
        let o = parse(&args("ShellyPlus1PM,tls,es,password=p Shelly1PMG3")).unwrap();
        let d = &o.devices;
        assert!(d[0].spec.tls && d[0].spec.enhanced_security);
        assert_eq!(d[0].spec.password.as_deref(), Some("p"));
        assert!(!d[1].spec.tls && !d[1].spec.enhanced_security);
        assert!(
            parse(&args("ShellyPlus1PM,tsl"))
                .unwrap_err()
                .contains("tls, es")
        );
    }

    #[test]
    fn mqtt_options_parse() {
        let o = parse(&args(
            "ShellyPlus1PM,mqtt=127.0.0.1:1883 Tasmota,topic=plug,mqtt=broker:8883,mqtt_user=u,mqtt_pass=p,mqtt_ca=/tmp/ca.pem Shelly1PMG3",
        ))
        .unwrap();
        let d = &o.devices;
        let m = d[0].spec.mqtt.as_ref().unwrap();
        assert_eq!(m.server, "127.0.0.1:1883");
        assert_eq!((m.topic.as_deref(), m.user.as_deref()), (None, None));
        let m = d[1].spec.mqtt.as_ref().unwrap();
        assert_eq!(m.server, "broker:8883");
        assert_eq!(m.topic.as_deref(), Some("plug"));
        assert_eq!(
            (m.user.as_deref(), m.password.as_deref()),
            (Some("u"), Some("p"))
        );
        assert_eq!(
            m.ca_file.as_deref(),
            Some(std::path::Path::new("/tmp/ca.pem"))
        );
        assert!(d[2].spec.mqtt.is_none());
        let e = parse(&args("ShellyPlus1PM,topic=x")).unwrap_err();
        assert!(e.contains("need mqtt=HOST:PORT"), "{e}");
        let e = parse(&args("ShellyPlus1PM,mqtt=h:1,mqtt_pass=p")).unwrap_err();
        assert!(e.contains("mqtt_pass needs mqtt_user"), "{e}");
        assert!(USAGE.contains("mqtt=HOST:PORT[,topic=T]"));
    }

    #[test]
    fn auth_options_parse() {
        let o = parse(&args(
            "ShellyPlus1PM,password=secret,fw=1,nonce_life=5,md5 Shelly1,password=p,user=bob              Tasmota,password=t,oldauth ShellyPlus1PM,fw=2,password=",
        ))
        .unwrap();
        let d = &o.devices;
        assert_eq!(d[0].spec.password.as_deref(), Some("secret"));
        assert_eq!(d[0].spec.auth_mode, AuthMode::Fw1);
        assert_eq!(d[0].spec.nonce_lifetime, Duration::from_secs(5));
        assert!(d[0].spec.digest_md5);
        assert_eq!(d[1].spec.username.as_deref(), Some("bob"));
        assert!(d[2].spec.tasmota_old_auth);
        assert_eq!(d[3].spec.auth_mode, AuthMode::Fw2);
        assert_eq!(d[3].spec.password, None, "an empty password means no auth");
        assert_eq!(d[3].spec.nonce_lifetime, Duration::from_secs(3600));
        let ht = super::parse_device("ShellyHTG3,sleep=60").unwrap();
        assert_eq!(ht.spec.sleep, Some(Duration::from_secs(60)));
        assert!(super::parse_device("ShellyHTG3,sleep=0").is_err());
        for (a, want) in [
            ("ShellyPlus1PM,fw=3", "fw must be 1 or 2"),
            ("ShellyPlus1PM,nonce_life=0", "at least 1 second"),
            ("ShellyPlus1PM,nonce_life=x", "must be a number"),
        ] {
            let e = parse(&args(a)).unwrap_err();
            assert!(e.contains(want), "{a}: {e}");
        }
    }

    #[test]
    fn profile_shutter_and_sensor_options_parse() {
        let o = parse(&args(
            "Shelly2PMG3,profile=cover,travel=12.5 Tasmota,shutters=2 Shelly1G3,sensors=Bath:humidity;Tank:voltage",
        ))
        .unwrap();
        let d = &o.devices;
        assert_eq!(d[0].spec.profile.as_deref(), Some("cover"));
        assert_eq!(d[0].spec.cover_travel, Duration::from_millis(12_500));
        assert_eq!(d[1].spec.shutters, 2);
        assert_eq!(
            d[2].spec.sensors,
            [
                AddonSensor::new("Bath", SensorQuantity::Humidity),
                AddonSensor::new("Tank", SensorQuantity::Voltage)
            ]
        );
        for (a, want) in [
            ("Tasmota,shutters=x", "must be a number"),
            ("Shelly2PMG3,travel=0", "between 0 and 3600"),
            ("Shelly1G3,sensors=Bath", "NAME:QUANTITY"),
            ("Shelly1G3,sensors=Bath:pressure", "unknown"),
        ] {
            let e = parse(&args(a)).unwrap_err();
            assert!(e.contains(want), "{a}: {e}");
        }
        assert!(USAGE.contains("profile=P") && USAGE.contains("shutters"));
    }

    #[test]
    fn usage_errors_are_clear() {
        for (a, want) in [
            ("", "at least one DEVICE"),
            ("--admin-port", "needs a value"),
            ("--admin-port x Tasmota", "must be a number"),
            ("Tasmota:99999", "port must be a number"),
            ("Tasmota,colour=red", "unknown device option"),
            ("Tasmota,outputs", "KEY=VALUE"),
            ("--fast Tasmota", "unknown option"),
            (":80", "no model"),
            ("ShellyPlus1PM,mac=A8032AB1234", "AA:BB:CC:DD:EE:FF"),
        ] {
            let e = parse(&args(a)).unwrap_err();
            assert!(e.contains(want), "{a}: {e}");
        }
        assert!(parse(&args("--help")).unwrap().help);
        let o = parse(&args(
            "--announce --interface veth0 --listen-on 0.0.0.0 ShellyPlus1PM",
        ))
        .unwrap();
        assert!(o.announce);
        assert_eq!(o.interfaces, ["veth0"]);
        assert_eq!(o.listen_on, Some(std::net::Ipv4Addr::UNSPECIFIED));
        assert!(
            parse(&args("--interface veth0 Tasmota"))
                .unwrap_err()
                .contains("--announce")
        );
        assert!(
            parse(&args("--listen-on 10.0.0.1 Tasmota"))
                .unwrap_err()
                .contains("0.0.0.0")
        );
    }

    #[test]
    fn a_mac_option_chooses_the_device_mac() {
        let o = parse(&args("ShellyPlus1PM,mac=a8-03-2a-b1-23-45")).unwrap();
        assert_eq!(o.devices[0].spec.mac.as_deref(), Some("a8-03-2a-b1-23-45"));
    }
}
