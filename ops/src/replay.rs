//! Replay: dead rows back to due (kind 0), with a dry run that only counts.
//!
//! The unit is the dead delivery row `(hook, sink)`: what the DLQ lists,
//! what `dead` counts, what a dry run counts and what a job's progress
//! counts. Rows are picked one by one (a hook and a sink), by hook (each of
//! its dead sinks), by tenant, or by dead-letter time range.
//!
//! Called by the replay jobs ([`crate::jobs`]) on the store they run on
//! (the daemon's, or one a caller holds with no daemon running).
//!
//! Invariants:
//! - Rows move only through `transitions::revive`, in synced chunks of at
//!   most [`transitions::CHUNK`] rows, so a replay interrupted by a crash
//!   has revived whole chunks and can simply be run again (revived rows are
//!   no longer dead, so nothing is revived twice).
//! - Every read is a bounded page of the DLQ (`x` node-wide, `X` per
//!   tenant) resumed from a cursor, or a point read: a replay's cost is the
//!   rows it matches plus one page.
//! - Each chunk holds the row lock ([`crate::rowlock`]) from its read to
//!   its commit: two replays, or a replay and a purge, could otherwise see
//!   the same dead row and count it out of `dead` twice. The dispatcher
//!   never touches dead rows.
//! - A revived row keeps its delivery row (attempt count and history); the
//!   dispatcher grants it a new round of the sink's `max_attempts`.

use ankusa_store::keys::DeadKey;
use ankusa_store::queries::{self, DlqCursor};
use ankusa_store::{transitions, Batch, DeadRow, HookId, Store, StoreError};
use serde::Serialize;

/// Sinks a hook may have: a source has at most this many (the daemon's
/// config refuses more), so a hook has at most this many delivery rows.
pub const MAX_SINKS: u16 = 64;

/// Dead rows picked by hook: the row of one sink, or (`sink: None`) the
/// row of each sink that dead-lettered the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pick {
    pub hook: HookId,
    pub sink: Option<u16>,
}

/// Sorts `picks` and drops those that name a row twice (the same pick
/// again, or one sink of a hook also picked whole): a row named twice would
/// be counted twice by a dry run, and revived twice in one batch.
pub fn normalize(picks: &mut Vec<Pick>) {
    picks.sort();
    picks.dedup();
    let whole: std::collections::HashSet<HookId> = picks
        .iter()
        .filter(|p| p.sink.is_none())
        .map(|p| p.hook)
        .collect();
    picks.retain(|p| p.sink.is_none() || !whole.contains(&p.hook));
}

/// Which dead rows to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The dead rows these picks name (normalized: [`normalize`]),
    /// dead-lettered before `before` (ms), of tenant `tenant` only when
    /// given: a scoped caller's picks never reach another tenant's rows,
    /// and a row that dies again after the replay started is not replayed
    /// again.
    Picked {
        picks: Vec<Pick>,
        tenant: Option<u32>,
        before: u64,
    },
    /// Rows dead-lettered in `from..to` (ms since the epoch, `to`
    /// exclusive), node-wide or of one tenant.
    Range {
        from: u64,
        to: u64,
        tenant: Option<u32>,
        /// Continue after this row (a resumed or chunked replay), instead
        /// of from `to`: the walk does not step again over the rows it
        /// already revived.
        after: Option<DlqCursor>,
    },
}

/// What a replay did (or, dry, would do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Replayed {
    /// Dead rows in scope.
    pub matched: u64,
    /// Rows made due again (0 on a dry run).
    pub revived: u64,
    pub dry_run: bool,
    /// Dead rows in scope whose sink was dropped from the configuration:
    /// left dead, since no other sink may have them (counted on a dry run
    /// too). Absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub refused_dropped: u64,
    /// Where a range walk got to: the last row it took.
    #[serde(skip)]
    pub resume: Option<DlqCursor>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Replays the dead rows in `scope`, due at `now`; at most `limit` rows.
/// `progress` is called after each committed chunk.
pub fn replay(
    store: &Store,
    scope: &Scope,
    now: u64,
    dry_run: bool,
    limit: u64,
    progress: impl FnMut(&Replayed),
) -> Result<Replayed, StoreError> {
    replay_with(store, scope, now, dry_run, limit, progress, |_, _| {})
}

/// [`replay`], with `extra` adding to each chunk's batch before it commits
/// (a job's progress record), given the totals including that chunk.
pub fn replay_with(
    store: &Store,
    scope: &Scope,
    now: u64,
    dry_run: bool,
    limit: u64,
    mut progress: impl FnMut(&Replayed),
    mut extra: impl FnMut(&mut Batch, &Replayed),
) -> Result<Replayed, StoreError> {
    let mut out = Replayed {
        dry_run,
        ..Replayed::default()
    };
    let chunk = transitions::CHUNK;
    match scope {
        Scope::Picked {
            picks,
            tenant,
            before,
        } => {
            for part in picks.chunks(chunk / usize::from(MAX_SINKS).max(1)) {
                if remaining(limit, &out) == 0 {
                    break;
                }
                let _rows = crate::rowlock::hold();
                let mut rows = Vec::new();
                for p in part {
                    let dead = match p.sink {
                        None => dead_rows_of(store, p.hook.0)?,
                        Some(sink) => dead_row_of(store, p.hook.0, sink)?.into_iter().collect(),
                    };
                    rows.extend(
                        dead.into_iter()
                            .filter(|r| r.at < *before && tenant.is_none_or(|t| r.ord == t)),
                    );
                }
                let take = remaining(limit, &out).min(rows.len());
                apply(store, &rows[..take], now, dry_run, &mut out, &mut extra)?;
                progress(&out);
            }
        }
        Scope::Range {
            from,
            to,
            tenant,
            after,
        } => {
            if to > from {
                let cursor = after.unwrap_or(DlqCursor {
                    at: *to,
                    seq: 0,
                    sink: 0,
                });
                page_loop(
                    store,
                    *tenant,
                    Some(cursor),
                    *from,
                    now,
                    dry_run,
                    limit,
                    &mut out,
                    &mut progress,
                    &mut extra,
                )?
            }
        }
    }
    Ok(out)
}

fn remaining(limit: u64, out: &Replayed) -> usize {
    usize::try_from(limit.saturating_sub(out.matched)).unwrap_or(usize::MAX)
}

/// Walks the DLQ (one tenant's or the node's) newest first from `cursor`,
/// stopping below `from`, reviving page by page.
#[allow(clippy::too_many_arguments)]
fn page_loop(
    store: &Store,
    tenant: Option<u32>,
    mut cursor: Option<DlqCursor>,
    from: u64,
    now: u64,
    dry_run: bool,
    limit: u64,
    out: &mut Replayed,
    progress: &mut impl FnMut(&Replayed),
    extra: &mut impl FnMut(&mut Batch, &Replayed),
) -> Result<(), StoreError> {
    loop {
        let want = remaining(limit, out).min(transitions::CHUNK);
        if want == 0 {
            return Ok(());
        }
        let rows_guard = crate::rowlock::hold();
        let page = match tenant {
            Some(ord) => queries::dlq_page_for_tenant(store, ord, cursor, want)?,
            None => queries::dlq_page(store, cursor, want)?,
        };
        let in_range: Vec<DeadRow> = page
            .entries
            .iter()
            .take_while(|r| r.at >= from)
            .cloned()
            .collect();
        let stopped = in_range.len() < page.entries.len();
        if let Some(last) = in_range.last() {
            out.resume = Some(DlqCursor {
                at: last.at,
                seq: last.seq,
                sink: last.sink,
            });
        }
        apply(store, &in_range, now, dry_run, out, extra)?;
        drop(rows_guard);
        progress(out);
        // Revived rows are gone, but the cursor is strictly older than the
        // last one, so it stays valid either way.
        match page.next {
            Some(next) if !stopped => cursor = Some(next),
            _ => return Ok(()),
        }
    }
}

/// Counts `rows` and, unless dry, revives them in one synced commit.
fn apply(
    store: &Store,
    rows: &[DeadRow],
    now: u64,
    dry_run: bool,
    out: &mut Replayed,
    extra: &mut impl FnMut(&mut Batch, &Replayed),
) -> Result<(), StoreError> {
    out.matched += rows.len() as u64;
    if rows.is_empty() {
        return Ok(());
    }
    // A dead row of a dropped sink stays dead: its position is a
    // tombstone, and a revived row would be owed to nothing.
    let catalog = ankusa_store::sinks::catalog(store)?;
    let mut live = Vec::with_capacity(rows.len());
    for r in rows {
        let dropped = match queries::hook_source(store, r.seq)? {
            Some(source) => ankusa_store::sinks::is_dropped(&catalog, &source, r.sink),
            None => false,
        };
        if dropped {
            out.refused_dropped += 1;
        } else {
            live.push(r);
        }
    }
    if dry_run || live.is_empty() {
        return Ok(());
    }
    let mut b = Batch::new();
    for r in &live {
        let size = queries::delivery(store, r.seq, r.sink)?.map_or(0, |d| d.size);
        transitions::revive(&mut b, r, size, now);
    }
    let mut after = *out;
    after.revived += live.len() as u64;
    extra(&mut b, &after);
    store.commit(b, true)?;
    *out = after;
    Ok(())
}

/// Every dead row of a hook (one per sink that dead-lettered it).
pub fn dead_rows_of(store: &Store, seq: u64) -> Result<Vec<DeadRow>, StoreError> {
    let mut rows = Vec::new();
    for sink in 0..MAX_SINKS {
        if let Some(row) = dead_row_of(store, seq, sink)? {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The dead row of (seq, sink), if that row is dead. The dead-letter time
/// is the delivery row's last attempt (the dispatcher stamps both with the
/// same instant), so this is two point reads.
fn dead_row_of(store: &Store, seq: u64, sink: u16) -> Result<Option<DeadRow>, StoreError> {
    let Some(d) = queries::delivery(store, seq, sink)? else {
        return Ok(None);
    };
    let Some(last) = d.last() else {
        return Ok(None);
    };
    queries::dead_row(
        store,
        &DeadKey {
            at: last.at,
            seq,
            sink,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::tenants::TenantAllocator;
    use ankusa_store::transitions::{IngestHook, SinkSet};
    use ankusa_store::values::DeliveryRow;
    use ankusa_store::{Envelope, Field};

    /// `per` dead rows for each of tenants a and b, dead-lettered at
    /// 10_000, 11_000, ... (one second apart). Returns their seqs.
    fn store_with_dead(store: &Store, per: u64) -> Vec<(String, u64)> {
        let mut alloc = TenantAllocator::load(store, 100).unwrap();
        let mut out = Vec::new();
        let first = store.next_seq().unwrap();
        for (seq, i) in (first..).zip(0..per * 2) {
            let tenant = if i % 2 == 0 { "a" } else { "b" };
            let env = Envelope {
                received_at: 1_000,
                source_id: "s".into(),
                tenant: tenant.into(),
                idempotency_key: None,
                event_type: None,
                headers: vec![],
                body: vec![7; 10],
            };
            let mut b = Batch::new();
            let res = alloc.resolve(store, [tenant], &mut b).unwrap();
            let ord = res.ord(tenant, 100).unwrap();
            let rows = transitions::ingest(
                &mut b,
                &IngestHook {
                    seq,
                    ord,
                    envelope: &env,
                    sinks: SinkSet::first(1),
                    archive: false,
                    dedupe_expires_at: None,
                },
            );
            let f = transitions::claim(&mut b, &rows[0]);
            let at = 10_000 + i * 1_000;
            let mut d = DeliveryRow::new(ord, f.size);
            d.record(at, 500, "boom");
            transitions::dead_letter(&mut b, &f, &d, at, "s", None);
            store.commit(b, true).unwrap();
            alloc.committed(res);
            out.push((tenant.to_owned(), seq));
        }
        out
    }

    fn counts(store: &Store) -> (i64, i64) {
        let n = queries::node_counters(store).unwrap();
        (n.get(Field::Dead), n.get(Field::Pending))
    }

    fn assert_checks(store: &Store) {
        let rep = ankusa_store::check::run(store, |_, _| {}).unwrap();
        assert!(rep.ok(), "{:#?}", rep.mismatches);
    }

    #[test]
    fn a_pick_names_one_sinks_row_and_a_hook_pick_every_dead_sink() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = TenantAllocator::load(&store, 100).unwrap();
        let seq = store.next_seq().unwrap();
        let env = Envelope {
            received_at: 1_000,
            source_id: "s".into(),
            tenant: "a".into(),
            idempotency_key: None,
            event_type: None,
            headers: vec![],
            body: vec![7; 10],
        };
        let mut b = Batch::new();
        let res = alloc.resolve(&store, ["a"], &mut b).unwrap();
        let ord = res.ord("a", 100).unwrap();
        let due = transitions::ingest(
            &mut b,
            &IngestHook {
                seq,
                ord,
                envelope: &env,
                sinks: SinkSet::first(2),
                archive: false,
                dedupe_expires_at: None,
            },
        );
        for row in &due {
            let f = transitions::claim(&mut b, row);
            let mut d = DeliveryRow::new(ord, f.size);
            d.record(10_000, 500, "boom");
            transitions::dead_letter(&mut b, &f, &d, 10_000, "s", None);
        }
        store.commit(b, true).unwrap();
        alloc.committed(res);
        let hook = HookId(seq);
        let sink = |s| Pick {
            hook,
            sink: Some(s),
        };
        let whole = Pick { hook, sink: None };

        // Naming a row twice, or a row of a hook also named whole, is one
        // name: a dry run would count it twice otherwise.
        let mut named = vec![sink(1), whole, sink(1), sink(0)];
        normalize(&mut named);
        assert_eq!(named, vec![whole]);
        let mut named = vec![sink(1), sink(1)];
        normalize(&mut named);
        assert_eq!(named, vec![sink(1)]);

        let picked = |picks| Scope::Picked {
            picks,
            tenant: None,
            before: u64::MAX,
        };
        let r = replay(&store, &picked(vec![whole]), 50_000, true, u64::MAX, |_| {}).unwrap();
        assert_eq!(r.matched, 2, "a hook pick: each dead sink");
        let r = replay(
            &store,
            &picked(vec![sink(1)]),
            50_000,
            true,
            u64::MAX,
            |_| {},
        )
        .unwrap();
        assert_eq!(r.matched, 1, "a row pick: that sink alone");
        let r = replay(
            &store,
            &picked(vec![sink(1)]),
            50_000,
            false,
            u64::MAX,
            |_| {},
        )
        .unwrap();
        assert_eq!((r.matched, r.revived), (1, 1));
        let left: Vec<u16> = dead_rows_of(&store, seq)
            .unwrap()
            .iter()
            .map(|r| r.sink)
            .collect();
        assert_eq!(left, vec![0], "the other sink stays dead");
        assert_eq!(counts(&store), (1, 1));
        assert_checks(&store);
    }

    #[test]
    fn a_chunked_range_replay_continues_after_its_last_row() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        store_with_dead(&store, 5);
        let mut after = None;
        let mut seen = Vec::new();
        loop {
            let scope = Scope::Range {
                from: 0,
                to: u64::MAX,
                tenant: None,
                after,
            };
            let r = replay(&store, &scope, 50_000, false, 3, |_| {}).unwrap();
            if r.matched == 0 {
                break;
            }
            assert!(r.matched <= 3);
            let at = r
                .resume
                .expect("a round that took rows says where it stopped");
            assert!(
                after.is_none_or(|a: DlqCursor| at.at < a.at),
                "each round goes older"
            );
            seen.push(at.at);
            after = Some(at);
        }
        assert_eq!(seen, vec![17_000, 14_000, 11_000, 10_000]);
        assert_eq!(counts(&store), (0, 10));
        assert_checks(&store);
    }

    #[test]
    fn replay_by_id_tenant_and_range_with_dry_runs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let rows = store_with_dead(&store, 5);
        assert_eq!(counts(&store), (10, 0));

        // By id: a dry run counts, then one row is revived.
        let id = HookId(rows[0].1);
        let scope = Scope::Picked {
            picks: vec![
                Pick {
                    hook: id,
                    sink: None,
                },
                Pick {
                    hook: HookId(999_999),
                    sink: None,
                },
            ],
            tenant: None,
            before: u64::MAX,
        };
        let r = replay(&store, &scope, 50_000, true, u64::MAX, |_| {}).unwrap();
        assert_eq!((r.matched, r.revived), (1, 0));
        assert_eq!(counts(&store), (10, 0), "a dry run changes nothing");
        let r = replay(&store, &scope, 50_000, false, u64::MAX, |_| {}).unwrap();
        assert_eq!((r.matched, r.revived), (1, 1));
        assert_eq!(counts(&store), (9, 1));
        let again = replay(&store, &scope, 50_000, false, u64::MAX, |_| {}).unwrap();
        assert_eq!(again.matched, 0, "a revived row is not dead any more");

        // By range: dead-lettered in [12s, 15s) = rows 2, 3, 4.
        let range = Scope::Range {
            from: 12_000,
            to: 15_000,
            tenant: None,
            after: None,
        };
        let r = replay(&store, &range, 50_000, true, u64::MAX, |_| {}).unwrap();
        assert_eq!(r.matched, 3);
        let r = replay(&store, &range, 50_000, false, u64::MAX, |_| {}).unwrap();
        assert_eq!(r.revived, 3);
        assert_eq!(counts(&store), (6, 4));

        // By tenant: b's remaining dead rows (b had 5, one went in the range).
        let ord_b = ankusa_store::tenants::ord_of(&store, "b").unwrap().unwrap();
        let r = replay(
            &store,
            &Scope::Range {
                from: 0,
                to: u64::MAX,
                tenant: Some(ord_b),
                after: None,
            },
            50_000,
            true,
            u64::MAX,
            |_| {},
        )
        .unwrap();
        assert_eq!(r.matched, 4);
        // The limit caps what one call does.
        let r = replay(
            &store,
            &Scope::Range {
                from: 0,
                to: u64::MAX,
                tenant: Some(ord_b),
                after: None,
            },
            50_000,
            false,
            3,
            |_| {},
        )
        .unwrap();
        assert_eq!(r.revived, 3);
        assert_eq!(counts(&store), (3, 7));
        assert_checks(&store);
    }
}
