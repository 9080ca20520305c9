//! Following a firmware update, on the caller's thread: the one place that knows how an update goes, whatever
//! the family (the drivers know the requests). Check what is on offer, start, then look at the device with a
//! bounded back-off until it answers with another version, or the time is up. The device going offline
//! meanwhile is its restart, expected: the worker logs it without a warning (`FirmwareOp::Start` marks the
//! update), and a look that fails is no error here. [`Updates`] is the controller-wide guard: one update at a
//! time unless the caller asks for more.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::firmware_op::FirmwareOp;
use super::ota_board::{OtaBoard, OtaWatch};
use super::worker::{Command, Slot, WorkerTx, snapshot};
use crate::error::{Error, Result};
use crate::firmware::{FirmwareInfo, FirmwareUpdate, UpdateFailure, UpdateOptions, UpdateProgress};

/// The first wait between two looks at an updating device, and the longest.
const FIRST_LOOK: Duration = Duration::from_millis(200);
const LONGEST_WAIT: Duration = Duration::from_secs(2);

/// The updates running in one controller.
#[derive(Default)]
pub(crate) struct Updates {
    /// (device index, device label) of each running update.
    running: Mutex<Vec<(usize, String)>>,
}

/// A running update's place in [`Updates`]; dropping it ends the update there.
pub(crate) struct Ticket<'a> {
    updates: &'a Updates,
    device: usize,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut g = self
            .updates
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        g.retain(|(d, _)| *d != self.device);
    }
}

impl Updates {
    /// Lets the update of `device` (`label`) run, or says why not: the device updates already, or another
    /// device does and `concurrent` was not asked for.
    pub(crate) fn enter(&self, device: usize, label: &str, concurrent: bool) -> Result<Ticket<'_>> {
        let mut g = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let busy = |message: String| Error::Firmware {
            device: label.to_string(),
            failure: UpdateFailure::Busy,
            message,
        };
        if g.iter().any(|(d, _)| *d == device) {
            return Err(busy("this device is updating already".into()));
        }
        if !concurrent && let Some((_, other)) = g.first() {
            return Err(busy(format!(
                "device {other} is updating; one device at a time unless concurrent updates are allowed (UpdateOptions::allow_concurrent)"
            )));
        }
        g.push((device, label.to_string()));
        Ok(Ticket {
            updates: self,
            device,
        })
    }
}

/// One device's worker and published state, as an update talks to them, and where its push channel tells how
/// the update goes.
pub(crate) struct Target<'a> {
    pub tx: WorkerTx,
    pub slot: &'a Slot,
    pub ota: &'a OtaBoard,
    /// The device's index (configuration order).
    pub index: usize,
}

impl Target<'_> {
    fn ask<T>(&self, op: impl FnOnce(Sender<Result<T>>) -> FirmwareOp) -> Result<T> {
        let (reply, rx) = crossbeam_channel::bounded(1);
        self.tx
            .send(Command::Firmware(op(reply)))
            .map_err(|_| Error::Closed)?;
        rx.recv().map_err(|_| Error::Closed)?
    }

    /// The running version and the versions on offer.
    pub(crate) fn check(&self) -> Result<FirmwareInfo> {
        self.ask(FirmwareOp::Check)
    }

    fn label(&self) -> String {
        snapshot(self.slot).label()
    }

    fn online(&self) -> bool {
        snapshot(self.slot).online
    }
}

/// Tells the worker the update is over: [`Finish::now`] waits for its read; dropped without it (a panicking
/// progress callback), it only tells.
struct Finish<'a, 'b>(Option<&'a Target<'b>>);

impl Finish<'_, '_> {
    fn now(mut self) -> Result<()> {
        match self.0.take() {
            Some(t) => t.ask(FirmwareOp::Finish),
            None => Ok(()),
        }
    }
}

impl Drop for Finish<'_, '_> {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let (reply, _) = crossbeam_channel::bounded(1);
            let _ = t.tx.send(Command::Firmware(FirmwareOp::Finish(reply)));
        }
    }
}

/// Updates the device and follows it until it runs another version (see the module's comment).
pub(crate) fn run(
    target: &Target<'_>,
    options: &UpdateOptions,
    progress: &mut dyn FnMut(&UpdateProgress),
) -> Result<FirmwareUpdate> {
    let channel = options.channel;
    let info = target.check()?;
    let failed = |failure, message: String| Error::Firmware {
        device: target.label(),
        failure,
        message,
    };
    let offered = info.available(channel).map(str::to_string);
    if info.checked && offered.is_none() {
        return Err(failed(
            UpdateFailure::NoUpdate,
            format!(
                "no newer {channel} version is on offer (it runs {})",
                info.current.as_deref().unwrap_or("an unknown version")
            ),
        ));
    }
    let from = info.current.clone();
    // Listening before the request: a device's first `ota_*` events may come before its answer.
    let watch = target.ota.follow(target.index);
    let said = target.ask(|r| FirmwareOp::Start(channel, r))?;
    // From here on the worker must hear that the update is over, even if the caller's callback panics.
    let finish = Finish(Some(target));
    let to = said.or(offered);
    progress(&UpdateProgress::Started {
        from: from.clone(),
        to: to.clone(),
    });
    let outcome = follow(target, &watch, options, from.as_deref(), progress);
    // Whatever the outcome: a full read shows the device as it is now, and its going offline is news again.
    let read = finish.now();
    let current = outcome.map_err(|(failure, message)| failed(failure, message))?;
    if let Err(e) = read {
        log::debug!(
            "device {}: the read after the update failed: {}",
            target.label(),
            e.reason()
        );
    }
    Ok(FirmwareUpdate {
        device: info.device,
        channel,
        previous: from,
        current,
    })
}

/// Looks at the device with a growing wait until it runs another version than `from`: that version, or why
/// not. Between looks, what its push channel tells (`watch`): the download's percent, or its failure.
fn follow(
    target: &Target<'_>,
    watch: &OtaWatch<'_>,
    options: &UpdateOptions,
    from: Option<&str>,
    progress: &mut dyn FnMut(&UpdateProgress),
) -> std::result::Result<String, (UpdateFailure, String)> {
    let deadline = Instant::now() + options.timeout;
    let longest = LONGEST_WAIT
        .min(options.timeout / 4)
        .max(Duration::from_millis(10));
    let mut wait = FIRST_LOOK.min(longest);
    let mut next_look = Instant::now() + wait;
    // The news seen so far, and the last percent told.
    let (mut seen, mut told) = (0u64, None::<u8>);
    // `restarted`: seen offline; `rebooted`: seen with a smaller uptime than before (a proof where the device
    // tells its uptime: one lost answer during a long download is no restart).
    let (mut restarted, mut rebooted, mut downloading) = (false, false, false);
    let mut uptime: Option<u64> = None;
    let mut last_error: Option<String> = None;
    // What it answered after it was seen offline.
    let mut back_with: Option<Option<String>> = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let news = watch.wait(seen, next_look.min(deadline) - now);
        if news.seq > seen {
            seen = news.seq;
            if let Some(why) = news.error {
                let why = if why.is_empty() {
                    "no reason given".into()
                } else {
                    why
                };
                return Err((
                    UpdateFailure::Failed,
                    format!(
                        "the device reported that the update failed ({why}); it still runs {}",
                        from.unwrap_or("the old version")
                    ),
                ));
            }
            if news.percent.is_some() && news.percent != told && !restarted {
                told = news.percent;
                downloading = true;
                progress(&UpdateProgress::Downloading { percent: told });
            }
            if Instant::now() < next_look {
                continue;
            }
        }
        wait = (wait * 3 / 2).min(longest);
        next_look = Instant::now() + wait;
        match target.ask(FirmwareOp::Poll) {
            Err(Error::Closed) => {
                return Err((UpdateFailure::NotBack, "the controller was closed".into()));
            }
            Err(e) => {
                if !target.online() && !restarted {
                    restarted = true;
                    progress(&UpdateProgress::Restarting);
                }
                last_error = Some(e.reason());
            }
            Ok(state) => {
                if let (Some(before), Some(now)) = (uptime, state.uptime)
                    && now < before
                {
                    rebooted = true;
                }
                uptime = state.uptime.or(uptime);
                // Another version than before; with none known before, only once it has restarted.
                let changed = match from {
                    Some(_) => state.version.as_deref() != from,
                    None => restarted || rebooted,
                };
                if let Some(v) = state.version.as_deref()
                    && changed
                {
                    progress(&UpdateProgress::Back {
                        version: Some(v.to_string()),
                    });
                    return Ok(v.to_string());
                }
                if restarted {
                    back_with = Some(state.version.clone());
                }
                let proven = rebooted || (restarted && state.uptime.is_none());
                if proven && !state.updating {
                    progress(&UpdateProgress::Back {
                        version: state.version.clone(),
                    });
                    return Err((
                        UpdateFailure::OldVersion,
                        format!(
                            "the device restarted and still runs {} (the new firmware did not take)",
                            state.version.as_deref().unwrap_or("the old version")
                        ),
                    ));
                }
                if !downloading {
                    downloading = true;
                    progress(&UpdateProgress::Downloading { percent: None });
                }
            }
        }
    }
    let why = match (back_with, last_error) {
        (Some(v), _) if target.online() => format!(
            "it answers again but still runs {}",
            v.as_deref().unwrap_or("an unknown version")
        ),
        (_, Some(e)) if restarted => format!("it has not answered since it went offline ({e})"),
        _ => format!(
            "it still runs {} and was not seen restarting",
            from.unwrap_or("the old version")
        ),
    };
    Err((
        UpdateFailure::NotBack,
        format!(
            "the device did not come back with a new version within {:.0?}: {why}",
            options.timeout
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_update_at_a_time_unless_asked() {
        let u = Updates::default();
        let a = u.enter(0, "A (ID: 1)", false).unwrap();
        let e = u.enter(1, "B (ID: 2)", false).err().unwrap();
        assert!(e.to_string().contains("A (ID: 1) is updating"), "{e}");
        let e = u.enter(0, "A (ID: 1)", true).err().unwrap();
        assert!(e.to_string().contains("updating already"), "{e}");
        let b = u.enter(1, "B (ID: 2)", true).unwrap();
        drop(a);
        drop(b);
        assert!(u.enter(1, "B (ID: 2)", false).is_ok());
    }
}
