//! Reconciling smartdev's webhooks on a Gen2+ device (`Webhook.List/Create/Update/Delete`): its own hooks
//! are made to match the plan, duplicates removed, everything else left alone. A hook that calls our listener
//! (same host, port and path) is ours whatever its name: sc-smart-device's (`<component>: <event>`) are
//! adopted, so an event never arrives twice.

use serde_json::{Value, json};

use super::Rpc;
use crate::driver::json::text;
use crate::error::{Error, Result};
use crate::objects::Device;
use crate::webhook::install::NAME_PREFIX;

impl Rpc {
    /// Makes smartdev's hooks on the device (named `smartdev:`…) match the plan: creates what is missing,
    /// updates what differs, deletes only its own stale ones. Other software's hooks are never touched.
    #[inline(never)]
    pub(super) fn reconcile_hooks(&mut self, dev: &mut Device) -> Result<()> {
        let Some(plan) = self.hooks.clone() else {
            return Ok(());
        };
        if plan.outbound {
            self.install_outbound(dev, &plan.server)?;
        }
        if self.hooks_need_list() {
            // Which of the wanted events the device can send.
            self.learn_supported(dev);
        }
        let mut wanted = Vec::new();
        let mut skipped: Vec<&str> = Vec::new();
        for w in &plan.wanted {
            if dev.supported_webhooks.contains(&w.event) {
                wanted.push(w);
            } else if !skipped.contains(&w.event.as_str()) {
                skipped.push(&w.event);
            }
        }
        if !skipped.is_empty() {
            // One line per device: the events it does not list in Webhook.ListSupported.
            log::warn!(
                "device {}: does not send {}; those hooks are skipped (it lists: {})",
                dev.label(),
                skipped.join(", "),
                if dev.supported_webhooks.is_empty() {
                    "nothing".to_string()
                } else {
                    dev.supported_webhooks.join(", ")
                }
            );
        }
        let list = self.call(dev, "Webhook.List", None)?;
        let calls_us = |h: &Value| {
            h.get("urls").and_then(Value::as_array).is_some_and(|urls| {
                urls.iter()
                    .filter_map(Value::as_str)
                    .any(|u| u == plan.base || u.starts_with(&format!("{}?", plan.base)))
            })
        };
        let ours: Vec<Value> = list
            .get("hooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|h| {
                text(h, &["name"]).is_some_and(|n| n.starts_with(NAME_PREFIX)) || calls_us(h)
            })
            .cloned()
            .collect();
        // Each hook on the device serves at most one wanted hook: by name first, then (an adopted one) by event
        // and channel.
        let mut used = vec![false; ours.len()];
        let mut matched: Vec<Option<usize>> = Vec::with_capacity(wanted.len());
        for w in &wanted {
            let by_name = ours.iter().enumerate().position(|(i, h)| {
                !used[i] && text(h, &["name"]).as_deref() == Some(w.name.as_str())
            });
            if let Some(i) = by_name {
                used[i] = true;
            }
            matched.push(by_name);
        }
        for (k, w) in wanted.iter().enumerate() {
            if matched[k].is_some() {
                continue;
            }
            let adopt = ours.iter().enumerate().position(|(i, h)| {
                !used[i]
                    && !text(h, &["name"]).is_some_and(|n| n.starts_with(NAME_PREFIX))
                    && text(h, &["event"]).as_deref() == Some(w.event.as_str())
                    && h.get("cid").and_then(Value::as_u64) == Some(w.channel as u64)
            });
            if let Some(i) = adopt {
                used[i] = true;
                log::info!(
                    "device {}: adopting hook {} (it calls our listener) as '{}'",
                    dev.label(),
                    crate::text::quote(&text(&ours[i], &["name"]).unwrap_or_default(), 60),
                    w.name
                );
            }
            matched[k] = adopt;
        }
        for (k, w) in wanted.iter().enumerate() {
            let desired = json!({"cid": w.channel, "enable": true, "event": w.event, "name": w.name, "urls": [w.url]});
            let existing = matched[k].map(|i| &ours[i]);
            match existing {
                Some(h)
                    if ["cid", "enable", "event", "name", "urls"]
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
            // Everything of ours not serving a wanted hook goes: stale ones, a second hook of the same name (a
            // create whose answer was lost, in an older version), an old library's hook nothing adopted.
            if !used[i] {
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
