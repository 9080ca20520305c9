//! Name and ID lookups of devices and components, built once at open after every device's first contact (which
//! decides the components of a device whose configuration leaves its shape open); fixed for the controller's life.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::objects::{ComponentKind, Device, Identity};

/// Where a component lives: device position and component position.
pub(crate) type Place = (usize, usize);

/// Name and ID lookups, built once at open (the configuration is fixed for the controller's life).
#[derive(Default)]
pub(crate) struct Directory {
    pub(crate) device_by_id: HashMap<i64, usize>,
    pub(crate) device_by_name: HashMap<String, usize>,
    pub(crate) by_id: HashMap<(ComponentKind, i64), Place>,
    pub(crate) by_name: HashMap<(ComponentKind, String), Place>,
}

impl Directory {
    pub(crate) fn new(devices: &[Device]) -> Self {
        let mut d = Directory::default();
        for (di, dev) in devices.iter().enumerate() {
            d.device_by_id.insert(dev.id, di);
            d.device_by_name.insert(dev.name.clone(), di);
            let mut add = |kind, list: Vec<(i64, &String)>| {
                for (ci, (id, name)) in list.into_iter().enumerate() {
                    d.by_id.insert((kind, id), (di, ci));
                    d.by_name.insert((kind, name.clone()), (di, ci));
                }
            };
            add(
                ComponentKind::Input,
                dev.inputs.iter().map(|c| (c.id, &c.name)).collect(),
            );
            add(
                ComponentKind::Output,
                dev.outputs.iter().map(|c| (c.id, &c.name)).collect(),
            );
            add(
                ComponentKind::Meter,
                dev.meters.iter().map(|c| (c.id, &c.name)).collect(),
            );
            add(
                ComponentKind::TempProbe,
                dev.temp_probes.iter().map(|c| (c.id, &c.name)).collect(),
            );
            add(
                ComponentKind::Cover,
                dev.covers.iter().map(|c| (c.id, &c.name)).collect(),
            );
            add(
                ComponentKind::Sensor,
                dev.sensors.iter().map(|c| (c.id, &c.name)).collect(),
            );
        }
        d
    }

    pub(crate) fn device(&self, id: &Identity) -> Result<usize> {
        match id {
            Identity::Id(i) => self.device_by_id.get(i),
            Identity::Name(n) => self.device_by_name.get(n),
        }
        .copied()
        .ok_or_else(|| Error::NotFound {
            kind: "device",
            identity: id.to_string(),
            hint: match id {
                Identity::Name(n) => {
                    crate::suggest::hint(n, self.device_by_name.keys().map(String::as_str))
                }
                Identity::Id(_) => String::new(),
            },
        })
    }

    pub(crate) fn component(&self, kind: ComponentKind, id: &Identity) -> Result<Place> {
        match id {
            Identity::Id(i) => self.by_id.get(&(kind, *i)),
            Identity::Name(n) => self.by_name.get(&(kind, n.clone())),
        }
        .copied()
        .ok_or_else(|| Error::NotFound {
            kind: kind.as_str(),
            identity: id.to_string(),
            hint: match id {
                Identity::Name(n) => crate::suggest::hint(
                    n,
                    self.by_name
                        .keys()
                        .filter(|(k, _)| *k == kind)
                        .map(|(_, name)| name.as_str()),
                ),
                Identity::Id(_) => String::new(),
            },
        })
    }
}
