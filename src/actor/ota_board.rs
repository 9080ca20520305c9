//! `OtaBoard`: what a device being updated says of its update while it runs (Gen2+ `ota_begin`, `ota_progress`,
//! `ota_success`, `ota_error` events over its push channel: WebSocket, MQTT or outbound WebSocket), from the
//! poller that reads them to the caller following the update (`update.rs`). Only devices being followed have a
//! place here, so a device that sends such events unasked costs nothing.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// The longest `ota_error` message kept, in bytes (the device's text, shown to people).
const MESSAGE_BYTES: usize = 200;

/// What the device said of its update so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OtaNews {
    /// Rises with every piece of news (`OtaWatch::wait` returns when it passed the one seen).
    pub seq: u64,
    /// The last `progress_percent` (0–100).
    pub percent: Option<u8>,
    /// `ota_success`: the image is in; the device restarts next.
    pub success: bool,
    /// `ota_error`, with the device's message (empty when it gave none).
    pub error: Option<String>,
}

/// The devices being followed, and their news.
#[derive(Default)]
pub(crate) struct OtaBoard {
    followed: Mutex<Vec<(usize, OtaNews)>>,
    news: Condvar,
}

impl OtaBoard {
    fn lock(&self) -> MutexGuard<'_, Vec<(usize, OtaNews)>> {
        self.followed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts listening to `device` (before the update is asked for: its first events may come before the
    /// answer); the returned watch stops it when dropped.
    pub(crate) fn follow(&self, device: usize) -> OtaWatch<'_> {
        let mut g = self.lock();
        g.retain(|(d, _)| *d != device);
        g.push((device, OtaNews::default()));
        OtaWatch {
            board: self,
            device,
        }
    }

    /// The poller: an event of `device`'s `sys` component. Anything but a followed device's `ota_*` is ignored;
    /// a percent outside 0–100 or of another type is too.
    pub(crate) fn tell(&self, device: usize, event: &str, fields: &Map<String, Value>) {
        if !event.starts_with("ota_") {
            return;
        }
        let mut g = self.lock();
        let Some((_, news)) = g.iter_mut().find(|(d, _)| *d == device) else {
            return;
        };
        match event {
            "ota_progress" => {
                let Some(p) = fields
                    .get("progress_percent")
                    .and_then(Value::as_f64)
                    .filter(|p| (0.0..=100.0).contains(p))
                else {
                    return;
                };
                news.percent = Some(p as u8);
            }
            "ota_success" => news.success = true,
            "ota_error" => {
                let msg = fields.get("msg").and_then(Value::as_str).unwrap_or("");
                let clipped = crate::text::clip(msg, MESSAGE_BYTES);
                news.error = Some(crate::text::escape_controls(&clipped).into_owned());
            }
            _ => return,
        }
        news.seq += 1;
        drop(g);
        self.news.notify_all();
    }
}

/// One followed device's place on the board.
pub(crate) struct OtaWatch<'a> {
    board: &'a OtaBoard,
    device: usize,
}

impl OtaWatch<'_> {
    /// The news, once there is any newer than `seen` or `timeout` has passed.
    pub(crate) fn wait(&self, seen: u64, timeout: Duration) -> OtaNews {
        let end = Instant::now() + timeout;
        let mut g = self.board.lock();
        loop {
            let news = g
                .iter()
                .find(|(d, _)| *d == self.device)
                .map(|(_, n)| n.clone())
                .unwrap_or_default();
            let now = Instant::now();
            if news.seq > seen || now >= end {
                return news;
            }
            g = self
                .board
                .news
                .wait_timeout(g, end - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for OtaWatch<'_> {
    fn drop(&mut self) {
        self.board.lock().retain(|(d, _)| *d != self.device);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn news_of_a_followed_device_wakes_its_watch_and_others_are_ignored() {
        let board = OtaBoard::default();
        board.tell(3, "ota_progress", &fields(json!({"progress_percent": 10})));
        let watch = board.follow(3);
        assert_eq!(
            watch.wait(0, Duration::ZERO),
            OtaNews::default(),
            "told before it was followed"
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                board.tell(4, "ota_progress", &fields(json!({"progress_percent": 90})));
                board.tell(3, "ota_progress", &fields(json!({"progress_percent": 40})));
            });
            // No upper bound on time: the wait ends with the news.
            let news = watch.wait(0, Duration::from_secs(600));
            assert_eq!((news.seq, news.percent), (1, Some(40)));
        });
        board.tell(3, "ota_progress", &fields(json!({"progress_percent": 140})));
        board.tell(
            3,
            "ota_progress",
            &fields(json!({"progress_percent": "50"})),
        );
        board.tell(3, "ota_begin", &fields(json!({"msg": "Waiting for data"})));
        board.tell(3, "restart", &fields(json!({})));
        assert_eq!(watch.wait(1, Duration::ZERO).seq, 1, "nothing new");
        board.tell(3, "ota_error", &fields(json!({"msg": "bad\nimage"})));
        let news = watch.wait(1, Duration::ZERO);
        assert_eq!(news.error.as_deref(), Some("bad\\nimage"));
        // A long message of multi-byte characters is cut on a character boundary.
        board.tell(3, "ota_error", &fields(json!({"msg": "é".repeat(300)})));
        let news = watch.wait(2, Duration::ZERO);
        let kept = news.error.unwrap();
        assert!(
            kept.len() <= MESSAGE_BYTES + '…'.len_utf8() && kept.ends_with('…'),
            "{kept}"
        );
        drop(watch);
        assert!(board.lock().is_empty(), "the watch left the board");
    }
}
