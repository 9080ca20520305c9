//! Reconciling smartdev's webhooks on a Gen2+ device (`Webhook.List/Create/Update/Delete`): its own hooks
//! are made to match the plan, duplicates removed, everything else left alone.

use serde_json::{Value, json};

use super::Rpc;
use crate::driver::json::text;
use crate::error::{Error, Result};
use crate::objects::Device;
use crate::webhook::install::NAME_PREFIX;

impl Rpc {
    /// Makes smartdev's hooks on the device (named `smartdev:`…) match the plan: creates what is missing,
    /// updates what differs, deletes only its own stale ones. Other software's hooks are never touched.
    pub(super) fn reconcile_hooks(&mut self, dev: &mut Device) -> Result<()> {
        let Some(plan) = self.hooks.clone() else {
            return Ok(());
        };
        let mut wanted = Vec::new();
        for w in &plan.wanted {
            if dev.supported_webhooks.contains(&w.event) {
                wanted.push(w);
            } else {
                log::warn!(
                    "device {}: webhook event '{}' is not supported by the device; skipped",
                    dev.label(),
                    w.event
                );
            }
        }
        let list = self.call(dev, "Webhook.List", None)?;
        let ours: Vec<Value> = list
            .get("hooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|h| text(h, &["name"]).is_some_and(|n| n.starts_with(NAME_PREFIX)))
            .cloned()
            .collect();
        for w in &wanted {
            let desired = json!({"cid": w.channel, "enable": true, "event": w.event, "name": w.name, "urls": [w.url]});
            let existing = ours
                .iter()
                .find(|h| text(h, &["name"]).as_deref() == Some(w.name.as_str()));
            match existing {
                Some(h)
                    if ["cid", "enable", "event", "urls"]
                        .iter()
                        .all(|k| h.get(*k) == desired.get(*k)) => {}
                Some(h) => {
                    let mut update = desired.clone();
                    update["id"] = h.get("id").cloned().unwrap_or(Value::Null);
                    self.call(dev, "Webhook.Update", Some(update))?;
                }
                None => {
                    self.call(dev, "Webhook.Create", Some(desired)).map_err(|e| match e {
                        Error::Rpc { code: -108, device, .. } => Error::Device {
                            device,
                            message: format!(
                                "the device's webhook limit is reached, so '{}' could not be created; delete hooks you no longer need",
                                w.name
                            ),
                        },
                        other => other,
                    })?;
                }
            }
        }
        for (i, h) in ours.iter().enumerate() {
            let name = text(h, &["name"]).unwrap_or_default();
            // A second hook of the same name (a create whose answer was lost, in an older version) fires
            // every event twice: only the first one is kept.
            let duplicate = ours[..i]
                .iter()
                .any(|o| text(o, &["name"]).as_deref() == Some(name.as_str()));
            if duplicate || !wanted.iter().any(|w| w.name == name) {
                let id = h.get("id").cloned().unwrap_or(Value::Null);
                self.call(dev, "Webhook.Delete", Some(json!({ "id": id })))?;
            }
        }
        log::debug!(
            "device {}: {} webhook(s) in place",
            dev.label(),
            wanted.len()
        );
        Ok(())
    }
}
