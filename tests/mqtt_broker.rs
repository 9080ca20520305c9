//! The test broker harness itself (`tests/common/mosquitto.rs`): a real Mosquitto on a free loopback port,
//! with a login, with TLS from a throwaway CA, killed and started again on the same port, and gone after drop.

mod common;

use std::time::Duration;

use common::mosquitto::{Broker, BrokerOptions};

const LIMIT: Duration = Duration::from_secs(10);

/// Publishes a retained message and reads it back with `mosquitto_sub`.
fn round_trip(b: &Broker, topic: &str) {
    b.publish(topic, "hello", true);
    assert_eq!(b.take(topic, 1, LIMIT), vec![format!("{topic} hello")]);
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_plain_broker_carries_messages_and_survives_a_restart() {
    let mut b = Broker::start();
    round_trip(&b, "t/one");
    let port = b.port;
    b.kill();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "killed broker still accepts"
    );
    b.restart();
    assert_eq!(b.port, port);
    // Persistence is off: the retained message died with the broker.
    assert!(b.take("t/one", 1, Duration::from_secs(1)).is_empty());
    round_trip(&b, "t/two");
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_broker_with_a_login_refuses_anonymous_clients() {
    let b = Broker::start_with(BrokerOptions {
        login: Some(("smartdev".into(), "s3cret".into())),
        ..Default::default()
    });
    round_trip(&b, "t/login");
    let anonymous = std::process::Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &b.port.to_string(),
            "-t",
            "x",
            "-m",
            "y",
        ])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!anonymous.success(), "anonymous publish accepted");
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_tls_broker_is_reached_through_its_test_ca() {
    let b = Broker::start_with(BrokerOptions {
        tls: true,
        ..Default::default()
    });
    round_trip(&b, "t/tls");
    let pem = std::fs::read_to_string(b.ca_file()).unwrap();
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_dropped_broker_leaves_no_process_and_no_files() {
    let b = Broker::start();
    let port = b.port;
    let dir = b.ca_file().parent().unwrap().to_path_buf();
    assert!(dir.exists());
    drop(b);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(!dir.exists(), "{} left behind", dir.display());
}
