//! MQTT: the packets (`packet.rs`, MQTT 3.1.1, pure), each device's topics (`topics.rs`, pure), and the
//! connection's shared handle (`link.rs`: what drivers publish through, what they wait on).

pub(crate) mod link;
pub(crate) mod packet;
pub(crate) mod topics;
