//! MQTT: the packets (`packet.rs`, MQTT 3.1.1, pure). The broker connection and the devices' topics build on it.

pub(crate) mod packet;
