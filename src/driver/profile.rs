//! Device profiles: what a device says it is (`/shelly` `profile`, Gen1 `/settings` `mode`) against what the
//! configuration planned. Where the configuration left the shape open, the profile reported at the first
//! contact at open decides the components (`plan::Follow`); after that, and wherever the configuration named a
//! shape, a device that is not what was planned is reported, never guessed at: the planned components it does
//! not have stay unknown and operations on them fail with the reason.

use crate::error::{Error, Result};
use crate::models::{ModelInfo, Shape};
use crate::objects::{ComponentKind, Device};
use crate::plan::Follow;

/// Records the profile a device reported and returns its shape. With `follow` (the first contact at open of a
/// device whose configuration left its shape open) the device takes that profile's components; otherwise sets
/// (or clears) `Device::config_mismatch` and warns once per change when the shape differs from the planned
/// components.
pub(crate) fn detect(
    dev: &mut Device,
    model: &ModelInfo,
    reported: Option<&str>,
    follow: Option<&Follow>,
) -> Shape {
    match reported.filter(|r| !r.is_empty()) {
        Some(name) => detect_profile(dev, model, name, follow),
        // Models with one shape (and older firmware) do not say; the planned shape stands.
        None => planned_shape(dev, model),
    }
}

/// [`detect`] for a device that reports a profile. Out of line, as it logs: a worker's deepest frame at its
/// first contact decides how much of its stack stays resident, and most devices report none.
#[inline(never)]
fn detect_profile(
    dev: &mut Device,
    model: &ModelInfo,
    name: &str,
    follow: Option<&Follow>,
) -> Shape {
    let shape = match model.shape(name) {
        Some(s) => s,
        None => {
            if dev.profile.as_deref() != Some(name) {
                log::warn!(
                    "device {}: reports profile {} which model {} does not list ({}); its components are read as configured",
                    dev.label(),
                    crate::text::quote(name, 40),
                    model.model,
                    known(model)
                );
            }
            dev.profile = Some(name.to_string());
            return planned_shape(dev, model);
        }
    };
    if let Some(components) = follow.and_then(|f| f.profile(name)) {
        components.apply(dev);
        log::info!(
            "device {}: in profile {name} ({}) at first contact; its components follow it (the configuration names no Profile)",
            dev.label(),
            shape.describe()
        );
    }
    let planned = planned_shape(dev, model);
    let message = differs(&planned, &shape).then(|| mismatch_message(dev, &planned, &shape));
    if message.is_some() && message != dev.config_mismatch {
        log::warn!(
            "device {}: {}",
            dev.label(),
            message.as_deref().unwrap_or("")
        );
    }
    if message.is_none() && dev.config_mismatch.is_some() {
        log::info!(
            "device {}: now in profile {name}, as configured",
            dev.label()
        );
    }
    dev.config_mismatch = message;
    dev.profile = shape.profile.clone();
    shape
}

/// Stores what is wrong with the device's configuration (or that nothing is), logging a new problem once as a
/// warning and its end (`fixed`) as information.
pub(crate) fn record_mismatch(dev: &mut Device, message: Option<String>, fixed: &str) {
    if message.is_some() && message != dev.config_mismatch {
        log::warn!(
            "device {}: {}",
            dev.label(),
            message.as_deref().unwrap_or("")
        );
    }
    if message.is_none() && dev.config_mismatch.is_some() {
        log::info!("device {}: {fixed}", dev.label());
    }
    dev.config_mismatch = message;
}

/// The shape the configuration planned for the device (its component counts).
fn planned_shape(dev: &Device, model: &ModelInfo) -> Shape {
    let by_counts = model
        .profile_names()
        .into_iter()
        .filter_map(|p| model.shape(p))
        .find(|s| s.outputs == dev.outputs.len() && s.covers == dev.covers.len());
    by_counts.unwrap_or_else(|| model.default_shape())
}

fn differs(planned: &Shape, actual: &Shape) -> bool {
    planned.outputs != actual.outputs
        || planned.covers != actual.covers
        || planned.meters != actual.meters
        || planned.inputs != actual.inputs
}

fn known(model: &ModelInfo) -> String {
    let names = model.profile_names();
    if names.is_empty() {
        "it has one shape".into()
    } else {
        format!("known: {}", names.join(", "))
    }
}

fn mismatch_message(dev: &Device, planned: &Shape, actual: &Shape) -> String {
    let name = |s: &Shape| s.profile.clone().unwrap_or_else(|| "default".into());
    let now = name(actual);
    let mut fix = format!("set Profile: {now} in its configuration");
    let stale: Vec<&str> = [
        (ComponentKind::Output, dev.outputs.len(), actual.outputs),
        (ComponentKind::Cover, dev.covers.len(), actual.covers),
        (ComponentKind::Meter, dev.meters.len(), actual.meters),
    ]
    .into_iter()
    .filter(|&(_, configured, real)| configured > 0 && configured != real)
    .map(|(k, _, _)| k.config_key())
    .collect();
    if !stale.is_empty() {
        fix.push_str(&format!(" (and remove or adjust {})", stale.join(", ")));
    }
    format!(
        "the device is in profile {now} ({}) but the configuration expects profile {} ({}); {fix}, or switch the device back to {} in the vendor app. Components it does not have stay unknown",
        actual.describe(),
        name(planned),
        planned.describe(),
        name(planned)
    )
}

/// Fails when the device, as it is now, has no `kind` channel `index` (e.g. switching an output of a 2PM in
/// cover profile), with the mismatch as the reason.
pub(crate) fn check_has(
    dev: &Device,
    actual: &Shape,
    kind: ComponentKind,
    index: usize,
) -> Result<()> {
    let have = match kind {
        ComponentKind::Output => actual.outputs,
        ComponentKind::Cover => actual.covers,
        _ => return Ok(()),
    };
    if index < have {
        return Ok(());
    }
    let message = match &dev.config_mismatch {
        Some(m) => m.clone(),
        None => format!(
            "the device has no {} channel {index} in profile {}",
            kind.as_str(),
            actual.profile.as_deref().unwrap_or("default")
        ),
    };
    Err(Error::Unsupported {
        device: dev.label(),
        message,
    })
}

/// Fails when cover `index` is known not to be calibrated (going to a position needs a calibrated cover).
pub(crate) fn check_calibrated(dev: &Device, index: usize) -> Result<()> {
    let c = &dev.covers[index];
    if c.calibrated == Some(false) {
        return Err(Error::Unsupported {
            device: dev.label(),
            message: format!(
                "cover '{}' is not calibrated, so it cannot go to a position; run its calibration in the vendor app first (open and close still work)",
                c.name
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelLibrary;
    use crate::objects::{Cover, Output};

    fn two_pm_as_switch() -> (Device, ModelInfo) {
        let model = ModelLibrary::embedded().get("Shelly2PMG4").unwrap().clone();
        let dev = Device {
            id: 3,
            name: "Blinds".into(),
            outputs: vec![Output::default(), Output::default()],
            meters: vec![Default::default(), Default::default()],
            inputs: vec![Default::default(), Default::default()],
            profile: Some("switch".into()),
            ..Device::default()
        };
        (dev, model)
    }

    #[test]
    fn a_device_in_another_profile_is_reported_with_both_shapes_and_the_fix() {
        let (mut dev, model) = two_pm_as_switch();
        let shape = detect(&mut dev, &model, Some("cover"), None);
        assert_eq!((shape.outputs, shape.covers), (0, 1));
        let m = dev.config_mismatch.clone().unwrap();
        assert!(
            m.contains("in profile cover (2 inputs, 1 cover, 1 meter)"),
            "{m}"
        );
        assert!(
            m.contains("expects profile switch (2 inputs, 2 outputs, 2 meters)"),
            "{m}"
        );
        assert!(m.contains("set Profile: cover"), "{m}");
        assert_eq!(dev.profile.as_deref(), Some("cover"));
        let e = check_has(&dev, &shape, ComponentKind::Output, 0).unwrap_err();
        assert!(e.to_string().contains("Profile: cover"), "{e}");
        // Back in the planned profile: the mismatch clears.
        let shape = detect(&mut dev, &model, Some("switch"), None);
        assert!(dev.config_mismatch.is_none());
        assert!(check_has(&dev, &shape, ComponentKind::Output, 1).is_ok());
    }

    #[test]
    fn a_matching_profile_or_none_reported_is_no_mismatch() {
        let (mut dev, model) = two_pm_as_switch();
        detect(&mut dev, &model, None, None);
        assert!(dev.config_mismatch.is_none());
        dev.outputs.clear();
        dev.meters.truncate(1);
        dev.covers.push(Cover::default());
        let shape = detect(&mut dev, &model, Some("cover"), None);
        assert!(dev.config_mismatch.is_none());
        assert!(check_has(&dev, &shape, ComponentKind::Cover, 0).is_ok());
        assert!(check_has(&dev, &shape, ComponentKind::Cover, 1).is_err());
    }

    #[test]
    fn an_uncalibrated_cover_refuses_positions_only() {
        let (mut dev, _) = two_pm_as_switch();
        dev.covers.push(Cover {
            name: "Blind".into(),
            calibrated: Some(false),
            ..Cover::default()
        });
        let e = check_calibrated(&dev, 0).unwrap_err().to_string();
        assert!(e.contains("not calibrated"), "{e}");
        dev.covers[0].calibrated = None;
        assert!(check_calibrated(&dev, 0).is_ok(), "unknown is not refused");
    }
}
