//! The in-flight accounting: the rows this process has claimed and not yet
//! recorded, per tenant, per sink, and in rows and bytes. It is what the
//! per-tenant cap, `per_sink` and the global bounds are measured against.
//!
//! Invariant: a row is added once its claim is committed and removed once
//! its outcome's commit returned (or recording failed); the counts survive
//! a poisoned lock, since an empty map would lift every cap at once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ankusa_store::InflightRow;
use tokio::sync::Notify;

use super::plan::InflightNow;
use super::SinkKey;

/// Rows this process has claimed and not yet recorded, per tenant.
#[derive(Debug, Default)]
pub struct Inflight {
    pub(super) by_tenant: Mutex<HashMap<u32, u32>>,
    /// Rows in flight per sink: what `per_sink` bounds at claim time.
    pub(super) by_sink: Mutex<HashMap<SinkKey, u32>>,
    /// `(seq, sink)` of every row whose delivery is in progress here, with
    /// the sink it counts against.
    pub(super) rows: Mutex<HashMap<(u64, u16), Option<SinkKey>>>,
    pub(super) total: AtomicU64,
    /// Body bytes of the rows in flight: what `max_inflight_bytes` bounds.
    pub(super) bytes: AtomicU64,
    /// Deliveries whose outcome could not be recorded: each leaves a row
    /// inflight in the store that nobody here delivers, and a change of
    /// this count is what makes the next tick return such rows to due.
    /// The dispatcher's own count, not the metric of the same event: a
    /// metric renders, it does not steer.
    pub(super) unrecorded: AtomicU64,
    pub(super) idle: Notify,
}

/// A lock of the in-flight maps, past a poisoning: a panic elsewhere while
/// one was held left counts that are still the best there are, and an empty
/// map would lift every per-tenant and per-sink cap at once.
pub(super) fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inflight {
    pub(super) fn add(&self, row: &InflightRow, sink: Option<SinkKey>) {
        *locked(&self.by_tenant).entry(row.ord).or_insert(0) += 1;
        if let Some(k) = sink {
            *locked(&self.by_sink).entry(k).or_insert(0) += 1;
        }
        locked(&self.rows).insert((row.seq, row.sink), sink);
        self.bytes.fetch_add(u64::from(row.size), Ordering::SeqCst);
        self.total.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn done(&self, row: &InflightRow) {
        let ord = row.ord;
        let sink = locked(&self.rows).remove(&(row.seq, row.sink)).flatten();
        if let Some(k) = sink {
            let mut m = locked(&self.by_sink);
            if let Some(c) = m.get_mut(&k) {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    m.remove(&k);
                }
            }
        }
        {
            let mut m = locked(&self.by_tenant);
            if let Some(c) = m.get_mut(&ord) {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    m.remove(&ord);
                }
            }
        }
        self.bytes.fetch_sub(u64::from(row.size), Ordering::SeqCst);
        if self.total.fetch_sub(1, Ordering::SeqCst) <= 1 {
            self.idle.notify_waiters();
        }
    }

    /// Notes a delivery whose outcome could not be recorded. Called after
    /// [`Inflight::done`]: the row is out of the held set, so the sweep
    /// this count triggers does not skip it.
    pub(super) fn note_unrecorded(&self) {
        self.unrecorded.fetch_add(1, Ordering::SeqCst);
    }

    /// Deliveries whose outcome could not be recorded, since boot.
    pub(super) fn unrecorded_count(&self) -> u64 {
        self.unrecorded.load(Ordering::SeqCst)
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::SeqCst)
    }

    /// Body bytes of the rows in flight.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    pub(super) fn snapshot(&self) -> HashMap<u32, u32> {
        locked(&self.by_tenant).clone()
    }

    /// What a tick plans against: the counts now.
    pub(super) fn now(&self) -> InflightNow {
        InflightNow {
            by_tenant: self.snapshot(),
            rows: self.total(),
            bytes: self.bytes(),
        }
    }

    pub(super) fn sinks(&self) -> HashMap<SinkKey, u32> {
        locked(&self.by_sink).clone()
    }

    /// The rows being delivered now.
    pub(super) fn held(&self) -> HashSet<(u64, u16)> {
        locked(&self.rows).keys().copied().collect()
    }

    pub(super) async fn wait_idle(&self) {
        loop {
            let n = self.idle.notified();
            if self.total() == 0 {
                return;
            }
            n.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic while a map of the in-flight accounting was locked must
    /// not lift the caps: the counts stay what they were, and later rows
    /// are still counted and released.
    #[test]
    pub(super) fn the_inflight_counts_survive_a_poisoned_lock() {
        let f = Inflight::default();
        let sink = SinkKey { source: 0, sink: 0 };
        let row = |seq| InflightRow {
            ord: 7,
            seq,
            sink: 0,
            size: 10,
        };
        f.add(&row(1), Some(sink));
        f.add(&row(2), Some(sink));
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _held = (f.by_tenant.lock(), f.by_sink.lock(), f.rows.lock());
                    panic!("a panic while the in-flight maps are held");
                })
                .join();
        });
        assert!(f.by_tenant.is_poisoned() && f.by_sink.is_poisoned() && f.rows.is_poisoned());
        assert_eq!(f.snapshot().get(&7), Some(&2), "the tenant's count is kept");
        assert_eq!(f.sinks().get(&sink), Some(&2), "the sink's count is kept");
        assert_eq!(f.held().len(), 2);
        f.add(&row(3), Some(sink));
        f.done(&row(1));
        assert_eq!(f.snapshot().get(&7), Some(&2));
        assert_eq!(f.sinks().get(&sink), Some(&2));
        assert_eq!(f.total(), 2);
    }
}
