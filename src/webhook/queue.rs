//! The event queue: bounded in events and bytes, fair per device. When full it drops the oldest event of the
//! device holding the most waiting events, so a flooding device loses its own events before anyone else's;
//! the application still pulls in arrival order. Before that, each device may queue at most a burst of
//! [`DEVICE_BURST`] events, then [`DEVICE_RATE`] per second; the excess is dropped at the door. Every event
//! queued (webhook, `NotifyEvent`, derived from a pushed state, raised by smartdev) comes through
//! [`EventQueue::push`], so no channel escapes either rule. Drops are counted and logged per device, never silent.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::event::{EventFilter, WebhookEvent};
use crate::webhook::read_budget::TokenBucket;

/// Most memory the waiting events may take, whatever `QueueCapacity` says: 4,000 events with 64 KiB bodies
/// took 3.2 GiB when only the count was bounded.
pub(crate) const MAX_BYTES: usize = 16 * 1024 * 1024;

/// Events one device may queue at once: twenty flips of a switch in a row, a reconnect's status replay of
/// every input and output, fit twice over.
pub(crate) const DEVICE_BURST: f64 = 50.0;
/// Events per second one device may queue after its burst: a person pressing buttons or a power meter
/// reporting makes a few per second; more for long is a loop in the device's scripts or a hostile sender,
/// which must not crowd the queue (nor the application's time) for everyone.
pub(crate) const DEVICE_RATE: f64 = 20.0;

/// How often the log hears about one device's dropped events: the first drop at once, then a summary at most
/// this often, so a flood does not become a flood of log lines.
const DROP_LOG_PERIOD: Duration = Duration::from_secs(60);

/// Whose events these are: a configured device's ID, or `None` for events resolved to no device (unknown
/// device IDs, or any event that came while the controller was still opening). `None` is one group, so
/// inventing device IDs does not make a flood look like many quiet devices.
type Group = Option<i64>;

fn group_of(e: &WebhookEvent) -> Group {
    if e.device.is_empty() {
        None
    } else {
        e.device_id
    }
}

/// Webhook events waiting for the application.
pub(crate) struct EventQueue {
    inner: Mutex<Inner>,
    capacity: usize,
    max_bytes: usize,
    /// Per device: (events per second, burst); `None` only in tests of the eviction rule.
    rate: Option<(f64, f64)>,
    dropped: AtomicU64,
}

struct Queued {
    event: WebhookEvent,
    size: usize,
    group: Group,
}

/// Every operation is O(log n): events by arrival number, each group's arrival numbers in order, and the
/// groups ordered by (waiting events, oldest first) so the one to drop from is the last.
#[derive(Default)]
struct Inner {
    events: BTreeMap<u64, Queued>,
    groups: HashMap<Group, VecDeque<u64>>,
    largest: BTreeSet<(usize, Reverse<u64>, Group)>,
    next: u64,
    bytes: usize,
    /// Per group: events dropped because the queue was full.
    drops: HashMap<Group, DropLog>,
    /// Per configured device (so at most one entry each): its rate limit, and what it dropped.
    limits: HashMap<i64, (TokenBucket, DropLog)>,
}

/// One group's dropped events, for the log.
#[derive(Default)]
struct DropLog {
    total: u64,
    since_logged: u64,
    logged_at: Option<Instant>,
}

impl DropLog {
    /// Counts a drop; returns (dropped since the last log line, in all) when a line is due.
    fn note(&mut self, now: Instant) -> Option<(u64, u64)> {
        self.total += 1;
        self.since_logged += 1;
        if self
            .logged_at
            .is_some_and(|at| now.saturating_duration_since(at) < DROP_LOG_PERIOD)
        {
            return None;
        }
        self.logged_at = Some(now);
        Some((std::mem::take(&mut self.since_logged), self.total))
    }
}

/// The group's name for the log.
fn who(group: Group, e: &WebhookEvent) -> String {
    match group {
        Some(id) => format!("device {} (ID {id})", crate::text::quote(&e.device, 64)),
        None => "events of no configured device".to_string(),
    }
}

impl Inner {
    fn rank(&self, group: Group) -> Option<(usize, Reverse<u64>, Group)> {
        let seqs = self.groups.get(&group)?;
        Some((seqs.len(), Reverse(*seqs.front()?), group))
    }

    fn insert(&mut self, event: WebhookEvent, size: usize) {
        let group = group_of(&event);
        let seq = self.next;
        self.next += 1;
        if let Some(r) = self.rank(group) {
            self.largest.remove(&r);
        }
        self.groups.entry(group).or_default().push_back(seq);
        self.largest.extend(self.rank(group));
        self.events.insert(seq, Queued { event, size, group });
        self.bytes += size;
    }

    fn remove(&mut self, seq: u64) -> Option<Queued> {
        let q = self.events.remove(&seq)?;
        self.bytes -= q.size;
        if let Some(r) = self.rank(q.group) {
            self.largest.remove(&r);
        }
        if let Some(seqs) = self.groups.get_mut(&q.group) {
            // The oldest, except for a pull filtered by component.
            if seqs.front() == Some(&seq) {
                seqs.pop_front();
            } else if let Ok(i) = seqs.binary_search(&seq) {
                seqs.remove(i);
            }
            if seqs.is_empty() {
                self.groups.remove(&q.group);
            }
        }
        self.largest.extend(self.rank(q.group));
        Some(q)
    }
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

    pub(crate) fn with_limits(capacity: usize, max_bytes: usize) -> Self {
        EventQueue {
            inner: Mutex::new(Inner::default()),
            capacity: capacity.max(1),
            max_bytes,
            rate: Some((DEVICE_RATE, DEVICE_BURST)),
            dropped: AtomicU64::new(0),
        }
    }

    /// The same queue without the per-device rate limit, to test or measure the eviction rule alone.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn without_rate_limit(mut self) -> Self {
        self.rate = None;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends an event unless its device is over its rate (then it is dropped, counted, and `false` is
    /// returned). While the queue is over its count or its bytes, drops the oldest event of the group with
    /// the most waiting events (of two as large, the one waiting longer). Events of no configured device have
    /// no rate limit (there is no device to charge), but they are one group, so their flood evicts only them.
    pub(crate) fn push(&self, event: WebhookEvent) -> bool {
        self.push_at(event, Instant::now())
    }

    fn push_at(&self, event: WebhookEvent, now: Instant) -> bool {
        let size = approx_bytes(&event);
        let mut q = self.lock();
        if let (Some(id), Some((rate, burst))) = (group_of(&event), self.rate) {
            let (bucket, log) = q
                .limits
                .entry(id)
                .or_insert_with(|| (TokenBucket::full(burst, now), DropLog::default()));
            if !bucket.take(now, rate, burst) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                if let Some((recent, total)) = log.note(now) {
                    log::warn!(
                        "{} queued more than {burst} events at once or {rate} per second after that: {recent} events dropped before queueing since the last such message ({total} in all); its states still reach the snapshot. Look for a loop in the device's scripts or webhooks",
                        who(Some(id), &event)
                    );
                }
                return false;
            }
        }
        q.insert(event, size);
        while q.events.len() > 1 && (q.events.len() > self.capacity || q.bytes > self.max_bytes) {
            let Some(&(_, Reverse(seq), _)) = q.largest.last() else {
                break;
            };
            let Some(gone) = q.remove(seq) else {
                break;
            };
            self.dropped.fetch_add(1, Ordering::Relaxed);
            let log = q.drops.entry(gone.group).or_default().note(now);
            if let Some((recent, total)) = log {
                log::warn!(
                    "webhook queue full (at most {} events and {:.0} MiB): dropped the oldest event of {}, which has the most events waiting ({recent} dropped since the last such message, {total} in all); pull events more often or raise QueueCapacity",
                    self.capacity,
                    self.max_bytes as f64 / (1024.0 * 1024.0),
                    who(gone.group, &gone.event)
                );
            }
        }
        true
    }

    /// Removes and returns the oldest event matching `filter`.
    pub(crate) fn pull(&self, filter: &EventFilter) -> Option<WebhookEvent> {
        let mut q = self.lock();
        let seq = q
            .events
            .iter()
            .find(|(_, e)| filter.matches(&e.event))
            .map(|(seq, _)| *seq)?;
        q.remove(seq).map(|e| e.event)
    }

    /// Events waiting.
    pub(crate) fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// About how much memory the waiting events take.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Events dropped because the queue was full or their device over its rate.
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

    /// Event `n` of configured device `id` (named `D<id>`), from its component `c<id>`.
    fn of(id: i64, n: usize) -> WebhookEvent {
        WebhookEvent {
            event: format!("{id}/{n}"),
            device: format!("D{id}"),
            device_id: Some(id),
            component: format!("c{id}"),
            component_id: Some(id * 10),
            ..WebhookEvent::default()
        }
    }

    fn drain(q: &EventQueue) -> Vec<String> {
        std::iter::from_fn(|| q.pull(&EventFilter::default()))
            .map(|e| e.event)
            .collect()
    }

    #[test]
    fn a_flooding_device_loses_its_own_events_and_quiet_ones_lose_none() {
        let q = EventQueue::new(10).without_rate_limit();
        let mut quiet = Vec::new();
        // Device 1 floods; devices 2, 3 and 4 send two events each in between.
        for n in 0..300 {
            q.push(of(1, n));
            if n % 50 == 7 {
                let id = 2 + (n / 50 % 3) as i64;
                let e = of(id, n);
                quiet.push(e.event.clone());
                q.push(e);
            }
        }
        assert_eq!(q.len(), 10);
        assert_eq!(q.dropped(), 300 + 6 - 10);
        let got = drain(&q);
        let survivors: Vec<&String> = got.iter().filter(|e| !e.starts_with("1/")).collect();
        assert_eq!(survivors, quiet.iter().collect::<Vec<_>>(), "{got:?}");
        // The flooder keeps its newest, and everything comes out in arrival order.
        let flood: Vec<String> = (296..300).map(|n| format!("1/{n}")).collect();
        assert_eq!(got[6..], flood[..], "{got:?}");
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn of_groups_as_large_the_one_waiting_longest_loses_its_oldest() {
        let q = EventQueue::new(4).without_rate_limit();
        for (id, n) in [(1, 0), (2, 1), (1, 2), (2, 3), (3, 4)] {
            q.push(of(id, n));
        }
        // 1 and 2 hold two each; 1's oldest is older.
        assert_eq!(drain(&q), ["2/1", "1/2", "2/3", "3/4"]);
        // Events of no device are one group, whatever device IDs they claim.
        let q = EventQueue::new(4).without_rate_limit();
        q.push(of(2, 0));
        for n in 1..10 {
            let mut e = of(100 + n as i64, n);
            e.device.clear();
            q.push(e);
        }
        assert_eq!(drain(&q), ["2/0", "107/7", "108/8", "109/9"]);
    }

    #[test]
    fn big_events_of_a_flooding_device_do_not_push_out_small_quiet_ones() {
        let q = EventQueue::with_limits(1000, 1024 * 1024).without_rate_limit();
        let mut big = of(1, 0);
        big.params.insert(
            "pad".into(),
            serde_json::Value::String("x".repeat(64 * 1024)),
        );
        for n in 0..100 {
            q.push(big.clone());
            if n % 10 == 0 {
                q.push(of(2, n));
            }
        }
        assert!(q.bytes() <= 1024 * 1024, "{} bytes", q.bytes());
        let got = drain(&q);
        let quiet: Vec<String> = (0..100).step_by(10).map(|n| format!("2/{n}")).collect();
        let kept: Vec<String> = got.into_iter().filter(|e| e.starts_with("2/")).collect();
        assert_eq!(kept, quiet);
    }

    #[test]
    fn filtered_pulls_keep_the_fair_order() {
        let q = EventQueue::new(6).without_rate_limit();
        for n in 0..4 {
            q.push(of(1, n));
        }
        q.push(of(2, 4));
        q.push(of(3, 5));
        let by = |d: Option<Identity>, c: Option<Identity>| EventFilter {
            device: d,
            component: c,
        };
        // From the middle of device 1's events (by component), then by device.
        assert_eq!(
            q.pull(&by(None, Some(Identity::Id(30)))).unwrap().event,
            "3/5"
        );
        assert_eq!(
            q.pull(&by(Some(Identity::Id(1)), None)).unwrap().event,
            "1/0"
        );
        // 1 still holds the most: the next flood evicts only its events.
        for n in 6..20 {
            q.push(of(1, n));
        }
        assert_eq!(
            q.pull(&by(Some(Identity::name("D2")), None)).unwrap().event,
            "2/4"
        );
        assert!(drain(&q).iter().all(|e| e.starts_with("1/")));
    }

    /// The rule, written the slow and obvious way: the oldest event of the largest group (ties: oldest
    /// event first). A pseudo-random mix of pushes, pulls and filtered pulls must agree with it.
    #[test]
    fn agrees_with_the_rule_written_naively() {
        let (q, cap) = (EventQueue::new(7).without_rate_limit(), 7);
        let mut model: Vec<WebhookEvent> = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for n in 0..20_000 {
            match rnd(10) {
                0 => {
                    assert_eq!(
                        q.pull(&EventFilter::default()),
                        (!model.is_empty()).then(|| model.remove(0))
                    );
                }
                1 => {
                    let f = EventFilter {
                        device: None,
                        component: Some(Identity::Id(rnd(4) as i64 * 10)),
                    };
                    let i = model.iter().position(|e| f.matches(e));
                    assert_eq!(q.pull(&f), i.map(|i| model.remove(i)));
                }
                _ => {
                    // Device 1 three times as often as 2 and 3; 0 is no device.
                    let id = [0, 1, 1, 1, 2, 3][rnd(6) as usize];
                    let mut e = of(id, n);
                    if id == 0 {
                        e.device.clear();
                    }
                    q.push(e.clone());
                    model.push(e);
                    while model.len() > cap {
                        let count = |g: Group| model.iter().filter(|e| group_of(e) == g).count();
                        let max = model.iter().map(|e| count(group_of(e))).max().unwrap();
                        let i = model
                            .iter()
                            .position(|e| count(group_of(e)) == max)
                            .unwrap();
                        model.remove(i);
                    }
                }
            }
            assert_eq!(q.len(), model.len(), "step {n}");
        }
        let all: Vec<String> = model.into_iter().map(|e| e.event).collect();
        assert_eq!(drain(&q), all);
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

    #[test]
    fn a_device_over_its_rate_is_dropped_at_the_door_and_others_are_not() {
        use std::time::Duration;
        let q = EventQueue::new(10_000);
        let t = Instant::now();
        let burst = DEVICE_BURST as usize;
        let queued = (0..200).filter(|&n| q.push_at(of(1, n), t)).count();
        assert_eq!(queued, burst);
        assert_eq!(q.dropped(), 200 - burst as u64);
        // Another device, and events of no device, are not charged for it.
        assert!(q.push_at(of(2, 0), t));
        for n in 0..200 {
            let mut e = of(7, n);
            e.device.clear();
            assert!(q.push_at(e, t));
        }
        // A second later: the rate's worth more.
        let later = t + Duration::from_secs(1);
        let queued = (0..200).filter(|&n| q.push_at(of(1, n), later)).count();
        assert_eq!(queued, DEVICE_RATE as usize);
        assert_eq!(q.len(), burst + 1 + 200 + DEVICE_RATE as usize);
        // Everything is still pulled in arrival order.
        let first: Vec<String> = drain(&q).into_iter().take(2).collect();
        assert_eq!(first, ["1/0", "1/1"]);
    }
}
