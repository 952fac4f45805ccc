//! The head walk: one visit of a tenant's due rows under the tick's
//! budgets, classifying each row (may go, waits for a full sink, belongs
//! to a paused sink) and extending the tenant's skip point over the rows
//! that wait.

use std::ops::ControlFlow;

use ankusa_store::pauses::Paused;
use ankusa_store::quarantine::Undecodable;
use ankusa_store::queries::{self, DueFrom};
use ankusa_store::{DueRow, Store, StoreError};

use super::active::Skip;
use super::{SinkKey, SinkRoom};

/// What a visit read of a tenant's head.
#[derive(Debug, Default)]
pub(super) struct Head {
    /// Rows that may be claimed now, in due order.
    pub(super) rows: Vec<DueRow>,
    /// The second of the tenant's first due row, if it has one now.
    pub(super) first: Option<u64>,
    /// Where the run of rows for full sinks that starts its head ends.
    pub(super) skip: Option<Skip>,
    /// Whether the visit's last walk read every row due by now (it stopped
    /// short of its key budget): with no row that may go, the tenant is
    /// quiet ([`ActiveSet::wake`]).
    pub(super) complete: bool,
    /// The full sinks of the rows that must wait.
    pub(super) waits: Vec<SinkKey>,
    /// How many of `rows` the walk from the visit's start met before any
    /// row that may not go: if the tick claims them, nothing of the tenant
    /// is left before the last (see `ActiveSet::claimed_through`).
    pub(super) lead: usize,
    /// Whether the walk under way still counts into `lead`.
    pub(super) lead_open: bool,
}

impl Head {
    pub(super) fn wait(&mut self, k: SinkKey) {
        if !self.waits.contains(&k) {
            self.waits.push(k);
        }
    }
}

/// How a visit treats a row it meets.
pub(super) enum Met {
    /// A paused sink's: set aside for parking.
    Park,
    /// A sink at its bound: stays due.
    Full(SinkKey),
    /// May be claimed now.
    Ready,
}

/// One visit of a tenant's head, under the tick's budgets.
pub(super) struct HeadWalk<'a, 'b> {
    pub(super) store: &'a Store,
    pub(super) now: u64,
    /// Rows the tenant may still take (its ceiling minus its rows in flight).
    pub(super) room: usize,
    /// The tick's byte budget (the first row goes even if it is larger).
    pub(super) bytes: u64,
    /// Rows one walk reads at most (`scan_rows`).
    pub(super) keys: usize,
    pub(super) sinks: &'a mut SinkRoom<'b>,
    pub(super) paused: &'a Paused,
    pub(super) bad: &'a mut Vec<Undecodable>,
    pub(super) park: &'a mut Vec<DueRow>,
}

impl HeadWalk<'_, '_> {
    pub(super) fn classify(&mut self, ord: u32, r: &DueRow) -> Result<Met, StoreError> {
        // Rows of a paused sink are set aside for parking, so they neither
        // go out nor keep the tenant's other sinks waiting behind them.
        if !self.paused.is_empty()
            && self.paused.may_cover(r.sink)
            && queries::hook_source(self.store, r.seq)?
                .is_some_and(|src| self.paused.row(ord, &src, r.sink))
        {
            return Ok(Met::Park);
        }
        Ok(match self.sinks.full(self.store, r)? {
            Some(k) => Met::Full(k),
            None => Met::Ready,
        })
    }

    /// Reads the tenant's head: from its skip point, after walking the
    /// rows before it again when `open` (a sink they wait for has room and
    /// granted this tenant a walk), or from `floor` when it has none, taking the rows that may go now and extending the run of
    /// rows that must wait while it is unbroken.
    ///
    /// `start` is where the tenant's head begins (its floor, or after the
    /// rows claimed before), `floor` the start of its oldest second.
    pub(super) fn visit(
        &mut self,
        ord: u32,
        start: DueFrom,
        floor: u64,
        skip: Option<&Skip>,
        open: bool,
    ) -> Result<Head, StoreError> {
        let mut head = Head::default();
        let mut used = 0u64;
        self.sinks.begin_visit();
        let from = match skip {
            None => {
                head.lead_open = true;
                let run = self.walk(ord, start, None, &mut head, &mut used, true)?;
                head.lead_open = false;
                // A head of nothing but rows that wait: read on past them
                // once in this visit rather than a tick later.
                match (&head.skip, run.unbroken && run.met >= self.keys) {
                    (Some(k), true) => k.after(),
                    _ => {
                        head.complete = run.met < self.keys;
                        return Ok(head);
                    }
                }
            }
            Some(k) => {
                // Not walked, the rows before the point are taken to be
                // there still; walked and none met, the point is void.
                head.lead_open = open;
                let before = !open
                    || self
                        .walk(
                            ord,
                            start,
                            Some((k.at, k.seq, k.sink)),
                            &mut head,
                            &mut used,
                            false,
                        )?
                        .met
                        > 0;
                head.lead_open = false;
                if before {
                    head.first = head.first.or(Some(ankusa_store::keys::bucket_of(floor)));
                    head.skip = Some(k.clone());
                    if !open {
                        head.wait(k.waits);
                    }
                }
                k.after()
            }
        };
        if head.rows.len() < self.room {
            head.complete = self.walk(ord, from, None, &mut head, &mut used, true)?.met < self.keys;
        }
        Ok(head)
    }

    /// One walk from `from` (up to `upto` inclusive when given), extending
    /// the head's skip point over rows that wait while `extend` and no row
    /// that may go was met.
    pub(super) fn walk(
        &mut self,
        ord: u32,
        from: DueFrom,
        upto: Option<(u64, u64, u16)>,
        head: &mut Head,
        used: &mut u64,
        extend: bool,
    ) -> Result<Walked, StoreError> {
        let mut met = 0usize;
        let mut run = extend;
        let mut err = None;
        let mut rows = Vec::new();
        // Read first, then classified: classifying may read hooks.
        queries::visit_due(self.store, ord, from, self.now, self.keys, self.bad, |r| {
            if upto.is_some_and(|u| (r.at, r.seq, r.sink) > u) {
                return ControlFlow::Break(());
            }
            rows.push(r);
            ControlFlow::Continue(())
        })?;
        for r in rows {
            met += 1;
            if head.first.is_none() {
                head.first = Some(ankusa_store::keys::bucket_of(r.at));
            }
            let met = self.classify(ord, &r);
            if !matches!(met, Ok(Met::Ready)) {
                head.lead_open = false;
            }
            match met {
                Err(e) => {
                    err = Some(e);
                    break;
                }
                Ok(Met::Park) => self.park.push(r),
                Ok(Met::Full(k)) => {
                    head.wait(k);
                    // A skip point covers one sink's rows (see `Skip`): a
                    // row of another full sink ends the run.
                    if run && head.skip.as_ref().is_none_or(|s| s.waits == k) {
                        head.skip = Some(Skip::over(&r, k));
                    } else {
                        run = false;
                    }
                }
                Ok(Met::Ready) => {
                    let next = *used + u64::from(r.size);
                    if !head.rows.is_empty() && next > self.bytes {
                        break;
                    }
                    *used = next;
                    let filled = match self.sinks.offer(self.store, &r, self.keys) {
                        Ok(f) => f,
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    };
                    // The row that fills its sink's room does not end a run
                    // of that sink's rows: the rows after it wait for the
                    // same sink, and a head of one sink's rows with room for
                    // one (a rate's token) must not hide the tenant's rows
                    // for other sinks behind it. Walked again when the sink
                    // has room (`open`), so the row is not lost if this tick
                    // does not claim it.
                    match filled {
                        Some(k) if run && head.skip.as_ref().is_none_or(|s| s.waits == k) => {
                            head.skip = Some(Skip::over(&r, k));
                        }
                        _ => run = false,
                    }
                    head.rows.push(r);
                    head.lead += usize::from(head.lead_open);
                    if head.rows.len() >= self.room {
                        break;
                    }
                }
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(Walked { met, unbroken: run }),
        }
    }
}

/// What one walk met.
pub(super) struct Walked {
    /// Rows read.
    pub(super) met: usize,
    /// Whether every row read waits (or is parked): the skip point covers
    /// them all.
    pub(super) unbroken: bool,
}
