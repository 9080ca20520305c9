//! The event queue: bounded, oldest dropped when full (counted and logged, never silent).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::event::{EventFilter, WebhookEvent};

/// Most memory the waiting events may take, whatever `QueueCapacity` says: 4,000 events with 64 KiB bodies
/// took 3.2 GiB when only the count was bounded.
pub(crate) const MAX_BYTES: usize = 16 * 1024 * 1024;

/// Webhook events waiting for the application.
pub(crate) struct EventQueue {
    inner: Mutex<Inner>,
    capacity: usize,
    max_bytes: usize,
    dropped: AtomicU64,
}

#[derive(Default)]
struct Inner {
    events: VecDeque<(WebhookEvent, usize)>,
    bytes: usize,
}

/// About what an event costs in memory: its text, its parameters and the fixed part.
pub(crate) fn approx_bytes(e: &WebhookEvent) -> usize {
    fn value(v: &serde_json::Value) -> usize {
        use serde_json::Value;
        24 + match v {
            Value::String(s) => s.len(),
            Value::Array(a) => a.iter().map(value).sum(),
            Value::Object(m) => m.iter().map(|(k, v)| 48 + k.len() + value(v)).sum(),
            _ => 0,
        }
    }
    std::mem::size_of::<WebhookEvent>()
        + e.event.len()
        + e.component.len()
        + e.object_type.as_ref().map_or(0, String::len)
        + e.device.len()
        + e.received_at.len()
        + e.source.len()
        + e.params
            .iter()
            .map(|(k, v)| 48 + k.len() + value(v))
            .sum::<usize>()
}

impl EventQueue {
    /// An empty queue holding at most `capacity` events and [`MAX_BYTES`].
    pub(crate) fn new(capacity: usize) -> Self {
        Self::with_limits(capacity, MAX_BYTES)
    }

    fn with_limits(capacity: usize, max_bytes: usize) -> Self {
        EventQueue {
            inner: Mutex::new(Inner::default()),
            capacity: capacity.max(1),
            max_bytes,
            dropped: AtomicU64::new(0),
        }
    }

    /// Appends an event, dropping the oldest ones while the queue is over its count or its bytes.
    pub(crate) fn push(&self, event: WebhookEvent) {
        let size = approx_bytes(&event);
        let mut q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        q.bytes += size;
        q.events.push_back((event, size));
        while q.events.len() > 1 && (q.events.len() > self.capacity || q.bytes > self.max_bytes) {
            let Some((_, gone)) = q.events.pop_front() else {
                break;
            };
            q.bytes -= gone;
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Once, then every 1,000 drops: enough to notice without flooding the log.
            if n == 1 || n.is_multiple_of(1000) {
                log::warn!(
                    "webhook queue full (at most {} events and {:.0} MiB): dropped the oldest event ({n} dropped so far); pull events more often or raise QueueCapacity",
                    self.capacity,
                    self.max_bytes as f64 / (1024.0 * 1024.0)
                );
            }
        }
    }

    /// Removes and returns the oldest event matching `filter`.
    pub(crate) fn pull(&self, filter: &EventFilter) -> Option<WebhookEvent> {
        let mut q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let pos = q.events.iter().position(|(e, _)| filter.matches(e))?;
        let (event, size) = q.events.remove(pos)?;
        q.bytes -= size;
        Some(event)
    }

    /// Events waiting.
    pub(crate) fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .events
            .len()
    }

    /// About how much memory the waiting events take.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }

    /// Events dropped because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Identity;

    fn ev(name: &str, device: &str) -> WebhookEvent {
        WebhookEvent {
            event: name.into(),
            device: device.into(),
            ..WebhookEvent::default()
        }
    }

    #[test]
    fn fifo_with_filters_and_counted_drops() {
        let q = EventQueue::new(2);
        q.push(ev("a", "X"));
        q.push(ev("b", "Y"));
        q.push(ev("c", "X"));
        assert_eq!(q.dropped(), 1);
        assert_eq!(q.len(), 2);
        let only_x = EventFilter {
            device: Some(Identity::name("X")),
            component: None,
        };
        assert_eq!(q.pull(&only_x).unwrap().event, "c");
        assert!(q.pull(&only_x).is_none());
        assert_eq!(q.pull(&EventFilter::default()).unwrap().event, "b");
        assert!(q.pull(&EventFilter::default()).is_none());
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn big_events_are_bounded_in_bytes_as_well_as_in_count() {
        let q = EventQueue::with_limits(1000, 1024 * 1024);
        let mut big = ev("input.toggle_on", "X");
        big.params.insert(
            "pad".into(),
            serde_json::Value::String("x".repeat(64 * 1024)),
        );
        for _ in 0..100 {
            q.push(big.clone());
        }
        assert!(q.bytes() <= 1024 * 1024, "{} bytes", q.bytes());
        assert!(q.len() >= 14 && q.len() <= 16, "{} events", q.len());
        assert_eq!(q.dropped(), 100 - q.len() as u64);
        // One event over the whole budget is still kept (alone) rather than lost.
        let q = EventQueue::with_limits(10, 1000);
        q.push(big);
        assert_eq!(q.len(), 1);
    }
}
