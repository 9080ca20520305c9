//! Gives the shared library (cdylib) an soname carrying its ABI version, so a program linked against
//! smartdev 0.2 asks the dynamic loader for `libsmartdev.so.0.2` and never silently runs against an
//! incompatible release. Semver for 0.x: every minor release may break the ABI, so the soname is
//! `libsmartdev.so.0.MINOR`; from 1.0 on it is `libsmartdev.so.MAJOR`. `bindings/c/install.sh` installs
//! `libsmartdev.so.X.Y.Z` with the `libsmartdev.so.<ABI>` and `libsmartdev.so` symlinks. Linux (ELF) only.
//!
//! Also sets `cfg(smartdev_no_netns)` when the tests cannot create network namespaces (not root, no `ip`,
//! not Linux): the tests on a virtual network (`tests/common/netns.rs`) are then `#[ignore]`d with that
//! reason, so `cargo test` reports them as ignored instead of passing them without running them (the stable
//! test harness has no skip at run time). Checked when this script runs (a build from scratch, or after
//! `touch build.rs`); a binary built as root and run as another user fails those tests, saying so.
//! Likewise `cfg(smartdev_no_mosquitto)` when Mosquitto is not installed (tests against a real broker).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(smartdev_no_netns)");
    if let Err(why) = netns_usable() {
        println!("cargo:rustc-cfg=smartdev_no_netns");
        println!(
            "cargo:warning=tests on network namespaces will be ignored: {why} (they need root and ip(8))"
        );
    }
    println!("cargo:rustc-check-cfg=cfg(smartdev_no_mosquitto)");
    if !mosquitto_installed() {
        println!("cargo:rustc-cfg=smartdev_no_mosquitto");
        println!(
            "cargo:warning=tests against a real MQTT broker will be ignored: mosquitto is not installed (apt-get install mosquitto mosquitto-clients; .ci/run does)"
        );
    }
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        return;
    }
    let major =
        std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    let minor =
        std::env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets CARGO_PKG_VERSION_MINOR");
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsmartdev.so.{abi}");
}

/// Whether the broker tests can run: `mosquitto`, `mosquitto_passwd`, `mosquitto_pub` and `mosquitto_sub` are
/// on the PATH (or in /usr/sbin, where Debian puts the broker).
fn mosquitto_installed() -> bool {
    let path = std::env::var("PATH").unwrap_or_default() + ":/usr/sbin:/usr/bin";
    [
        "mosquitto",
        "mosquitto_passwd",
        "mosquitto_pub",
        "mosquitto_sub",
    ]
    .iter()
    .all(|b| {
        path.split(':')
            .any(|d| std::path::Path::new(d).join(b).is_file())
    })
}

/// Whether tests can create network namespaces: Linux, root, and `ip` (iproute2).
fn netns_usable() -> Result<(), String> {
    if std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default() != "linux" {
        return Err("not Linux".into());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1));
    if euid != Some("0") {
        return Err("not root".into());
    }
    match std::process::Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("no ip(8); install iproute2".into()),
    }
}
