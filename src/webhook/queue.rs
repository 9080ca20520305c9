//! The event queue: bounded, oldest dropped when full (counted and logged, never silent).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::event::{EventFilter, WebhookEvent};

/// Webhook events waiting for the application.
pub(crate) struct EventQueue {
    events: Mutex<VecDeque<WebhookEvent>>,
    capacity: usize,
    dropped: AtomicU64,
}

impl EventQueue {
    /// An empty queue holding at most `capacity` events.
    pub(crate) fn new(capacity: usize) -> Self {
        EventQueue {
            events: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
        }
    }

    /// Appends an event, dropping the oldest one when the queue is full.
    pub(crate) fn push(&self, event: WebhookEvent) {
        let mut q = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= self.capacity {
            q.pop_front();
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Once, then every 1,000 drops: enough to notice without flooding the log.
            if n == 1 || n.is_multiple_of(1000) {
                log::warn!(
                    "webhook queue full ({} events): dropped the oldest event ({n} dropped so far); pull events more often or raise QueueCapacity",
                    self.capacity
                );
            }
        }
        q.push_back(event);
    }

    /// Removes and returns the oldest event matching `filter`.
    pub(crate) fn pull(&self, filter: &EventFilter) -> Option<WebhookEvent> {
        let mut q = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let pos = q.iter().position(|e| filter.matches(e))?;
        q.remove(pos)
    }

    /// Events waiting.
    pub(crate) fn len(&self) -> usize {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).len()
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
    }
}
