//! The tick planner: the read side of a tick. It picks the active tenants,
//! reads their heads and asks the fair scheduler how many rows each takes
//! under the tick's limits. It writes no row; the claim commits its plan.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use ankusa_fairness::{HeadRow, Limits, Offer, RowKind, Scheduler, TenantHead};
use ankusa_store::pauses::Paused;
use ankusa_store::quarantine::Undecodable;
use ankusa_store::queries::{self, DueFrom};
use ankusa_store::{DueRow, Kind, Store, StoreError};

use super::active::{ActiveSet, Quiet, DAMAGED_RETRY_MS, UNCONFIGURED};
use super::head::{Head, HeadWalk};
use super::steer::{TickPolicy, Turn};
use super::{DispatchSettings, SinkKey, SinkRoom};

/// What one tick decided: the rows to claim per tenant and the markers
/// seen per tenant (for the cleanup).
#[derive(Debug, Default)]
pub struct TickPlan {
    pub visited: usize,
    /// Per tenant, the rows to claim and the sink each counts against.
    pub claims: Vec<Vec<(DueRow, Option<SinkKey>)>>,
    /// Per tenant whose head up to a row is claimed by `claims`, that row
    /// (`ActiveSet::claimed_through`, once the claim is committed).
    pub claimed_through: Vec<(u32, (u64, u64, u16))>,
    pub markers: Vec<Visit>,
    /// Due rows met that do not decode: the claim quarantines them.
    pub bad: Vec<Undecodable>,
    /// Due rows of a paused sink: the claim parks them.
    pub park: Vec<DueRow>,
    /// Tenants visited whose rate left them no claim this tick.
    pub rate_held: u64,
    /// Each tenant visited, and whether its policy held it: its cap or
    /// rate set its room and the visit filled it (`held::PolicyHeld`).
    pub policy_held: Vec<(u32, bool)>,
}

/// One visited tenant, as its marker cleanup needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visit {
    pub ord: u32,
    /// The start (ms) of the second the set knew the tenant by: nothing of
    /// its is due before it.
    pub floor: u64,
    /// Where the cleanup's search for its first due row starts: the
    /// visit's start, or after the rows the tick claims from it.
    pub from: DueFrom,
    /// Marker seconds seen since the last visit (cleanup candidates).
    pub seconds: Vec<u64>,
}

impl TickPlan {
    pub fn rows(&self) -> usize {
        self.claims.iter().map(Vec::len).sum()
    }
}

/// What a tick plans against: the store and the time it was read at,
/// the settings, the pauses and what is in flight when the tick starts.
#[derive(Debug, Clone, Copy)]
pub struct TickInput<'a> {
    pub store: &'a Store,
    pub now: u64,
    pub settings: &'a DispatchSettings,
    pub paused: &'a Paused,
    pub inflight: &'a InflightNow,
    /// Each tenant's weight, share, cap and rate this tick.
    pub policy: &'a TickPolicy<'a>,
}

/// The rows in flight when a tick starts: per tenant (what the cap and
/// the ceiling bound), in all and in body bytes (the global bounds).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InflightNow {
    pub by_tenant: HashMap<u32, u32>,
    pub rows: u64,
    pub bytes: u64,
}

impl InflightNow {
    fn of(&self, ord: u32) -> u32 {
        self.by_tenant.get(&ord).copied().unwrap_or(0)
    }
}

/// A tenant read this tick, as the scheduler and the claim need it.
struct Candidate {
    ord: u32,
    visit: Visit,
    /// Its rows that may go now, in due order.
    due: Vec<DueRow>,
    /// The same rows as the scheduler sees them.
    head: Vec<HeadRow>,
    /// How many of `due` the walk met from the visit's start before any
    /// row that may not go ([`Head::lead`]).
    lead: usize,
    turn: Turn,
}

/// The read side of a tick: active tenants, their head rows, the
/// scheduler's choice. No row writes; what `bench dispatch-tick` measures.
pub fn plan_tick(
    input: &TickInput<'_>,
    sched: &mut Scheduler,
    set: &mut ActiveSet,
    sinks: &mut SinkRoom<'_>,
) -> Result<TickPlan, StoreError> {
    let TickInput {
        store,
        now,
        settings: s,
        paused,
        inflight,
        policy,
    } = *input;
    let mut rate_held = 0;
    let mut policy_held = Vec::new();
    set.refresh(store, now, paused)?;
    let granted = set.grant_heads(paused, sinks);
    let mut order = set.pick(s.scan_tenants, paused, &granted);
    let room = (s.max_inflight as u64).saturating_sub(inflight.rows);
    // Bytes, like rows, are bounded in flight and not only per tick: refill
    // ticks start whenever a delivery ends, so a per-tick budget alone never
    // binds, rows are claimed far ahead of what the sinks take, and the order
    // they then go out in is the sink queue's, not the scheduler's (the issue 15
    // byte split fell to 0.555/0.445 that way). Bounded in flight, each tick
    // claims what deliveries freed, in tag order; nothing free, nothing claimed.
    let limits = Limits {
        rows: u32::try_from(room).unwrap_or(u32::MAX).min(s.tick_rows),
        bytes: s
            .tick_bytes
            .min(s.max_inflight_bytes.saturating_sub(inflight.bytes)),
    };
    // Read in the scheduler's order, and stop reading a source's tenants
    // once as many of them have a row ready as the tick may claim rows:
    // nobody later in that source's order would get one
    // ([`Scheduler::standing`] orders the tenants within their group, and
    // no group takes more than the tick's rows). When the node is behind,
    // every tenant has rows ready, and reading all of them to claim the
    // hundred rows that freed made ticks of 40-50 ms that could not catch
    // up (issue 19). Tenants granted a walk by a sink's room are read
    // anyway, and so is a tenant whose source could not be learned.
    for a in &order {
        if let Entry::Vacant(home) = set.homes.entry(a.ord) {
            // A tenant new to the set: its source from its first due row,
            // one seek and at most one hook read, so the read limit below
            // applies to it too (a source minting a tenant per request
            // brings a crowd of them each tick). A read that fails here
            // is left to the visit, which sets a damaged tenant aside and
            // quarantines a row that does not decode.
            let floor = a.bucket.saturating_mul(1000);
            if let Ok(Some(row)) = queries::first_due(store, a.ord, queries::DueFrom::At(floor)) {
                if row.at <= now {
                    if let Ok(src) = sinks.source(store, &row) {
                        home.insert(src.unwrap_or(UNCONFIGURED));
                    }
                }
            }
        }
    }
    order.sort_by_cached_key(|a| {
        let group = set.homes.get(&a.ord).copied().unwrap_or(UNCONFIGURED);
        sched.standing(a.ord, group)
    });
    let mut ready: HashMap<u32, u32> = HashMap::new();
    let mut read: Vec<Candidate> = Vec::with_capacity(order.len());
    let mut bad = Vec::new();
    let mut park = Vec::new();
    for a in order {
        let enough = set
            .homes
            .get(&a.ord)
            .is_some_and(|g| ready.get(g).is_some_and(|&n| n >= limits.rows));
        if enough && !granted.contains(&a.ord) {
            continue;
        }
        let busy = inflight.of(a.ord);
        // Up to the ceiling, not the share: a tenant may borrow slots
        // nobody else is waiting for (the scheduler decides whether it
        // does), but never past its own cap or its rate's tokens.
        let turn = policy.turn(a.ord);
        let room = turn.room(busy) as usize;
        if turn.held_by_rate(busy) {
            rate_held += 1;
        }
        // Every due row has a marker in its second, so nothing is due
        // before the tenant's oldest marker: start the range there and skip
        // the tombstones of rows already claimed, or after the last row a
        // tick claimed, past the tombstones inside that second too.
        let floor = a.bucket.saturating_mul(1000);
        let start = set.start(a.ord, floor);
        let head = if room == 0 {
            // A tenant at its cap or out of tokens keeps its place; with
            // no row offered it is not ready, so it holds no floor.
            Head {
                first: Some(a.bucket),
                skip: set.skip.get(&a.ord).cloned(),
                ..Head::default()
            }
        } else {
            let mut walk = HeadWalk {
                store,
                now,
                room,
                bytes: s.tick_bytes,
                keys: s.scan_rows,
                sinks: &mut *sinks,
                paused,
                bad: &mut bad,
                park: &mut park,
            };
            let bad_before = walk.bad.len();
            let skip = set.skip.get(&a.ord);
            // Walked again before its skip point when that sink has room
            // (a quiet tenant may be visited for another sink it waits for).
            let open =
                granted.contains(&a.ord) && skip.is_some_and(|k| walk.sinks.room(k.waits) > 0);
            let mut head = match walk.visit(a.ord, start, floor, skip, open) {
                Ok(head) => head,
                // A damaged block under this tenant's rows fails every visit
                // of it: set it aside and serve the others, so one damaged
                // file does not stop the node's every delivery. The store
                // has recorded the damage (readiness, /metrics).
                Err(StoreError::Damaged { .. }) => {
                    set.quiet.insert(
                        a.ord,
                        Quiet {
                            until: now.saturating_add(DAMAGED_RETRY_MS),
                            waits: Vec::new(),
                        },
                    );
                    continue;
                }
                Err(e) => return Err(e),
            };
            head.complete &= walk.bad.len() == bad_before;
            if walk.bad.len() != bad_before {
                // Where a row that does not decode sat among the rows read
                // is not known here: nothing is taken to be cleared.
                head.lead = 0;
            }
            head
        };
        if head.complete && head.rows.is_empty() && head.first.is_some() {
            // Everything due waits: nothing to read again before its next
            // row comes due or something changes (see `ActiveSet::wake`).
            let until =
                queries::first_due_time(store, a.ord, queries::DueFrom::At(now.saturating_add(1)))?
                    .unwrap_or(u64::MAX);
            set.quiet.insert(
                a.ord,
                Quiet {
                    until,
                    waits: head.waits,
                },
            );
        } else {
            set.quiet.remove(&a.ord);
        }
        // With room and nothing met, nothing is due now: the tenant leaves
        // the set until a marker brings it back.
        let (rows, first, lead) = (head.rows, head.first, head.lead);
        policy_held.push((a.ord, turn.policy_binds(busy) && rows.len() >= room));
        match head.skip {
            Some(k) => {
                set.skip.insert(a.ord, k);
            }
            None => {
                set.skip.remove(&a.ord);
            }
        }
        let mut markers = set.visited(a.ord, first);
        if markers.is_empty() {
            // Cleanup still looks at the second the set knew it by.
            markers.push(a.bucket);
        }
        if let (Some(first), Entry::Vacant(home)) = (rows.first(), set.homes.entry(a.ord)) {
            home.insert(sinks.source(store, first)?.unwrap_or(UNCONFIGURED));
        }
        let head = rows
            .iter()
            .map(|r| HeadRow {
                due_at: r.at,
                seq: r.seq,
                size: r.size,
                kind: match r.kind {
                    Kind::First => RowKind::First,
                    Kind::Retry => RowKind::Retry,
                },
            })
            .collect();
        if let Some(&g) = set.homes.get(&a.ord).filter(|_| !rows.is_empty()) {
            *ready.entry(g).or_insert(0) += 1;
        }
        read.push(Candidate {
            ord: a.ord,
            visit: Visit {
                ord: a.ord,
                floor,
                from: start,
                seconds: markers,
            },
            due: rows,
            head,
            lead,
            turn,
        });
    }
    // Grouped by source: a tenant whose source is not known yet has no row
    // ready (a visit that reads one learns it), so it is left out like a
    // tenant with nothing due rather than listed under a group it would
    // leave, which would reset its tag.
    let heads: Vec<TenantHead<'_>> = read
        .iter()
        .filter_map(|c| {
            let group = *set.homes.get(&c.ord)?;
            Some(TenantHead {
                tenant: c.ord,
                group,
                weight: c.turn.weight,
                group_weight: sinks.weight(group),
                cap: Some(c.turn.share),
                inflight: inflight.of(c.ord),
                rows: &c.head,
            })
        })
        .collect();
    // A row is claimed only if its sink has room (`SinkRoom::take`), asked
    // by the scheduler before it charges a claim: a tenant none of whose
    // remaining rows fits (their sinks filled this tick by tenants before
    // it) is skipped and keeps its lag, as a tenant skipped for bytes does.
    // A row whose sink is full is passed over for the tenant's next rows
    // (it stays due), so the scheduler's k-th claim of a tenant is the
    // next of its rows that fits. Taken after the plan instead, rows were
    // refused that the scheduler had charged, and two tenants competing
    // for one slot a tick stayed tied, the one chosen first on the tie
    // taking every slot.
    let index: HashMap<u32, usize> = read.iter().enumerate().map(|(i, c)| (c.ord, i)).collect();
    let mut taken: HashMap<u32, Vec<(DueRow, Option<SinkKey>)>> = HashMap::new();
    let mut tried: HashMap<u32, usize> = HashMap::new();
    let mut failed = None;
    let plan = {
        let read = &read;
        // The row taken may be a later one than the scheduler offered, so
        // it takes no more than the offer's room, and the scheduler charges
        // its size: the byte bound and the fair charge are the claimed
        // row's. A row too large for the room ends the tenant's turn, as
        // the scheduler's own bytes rule does.
        let mut fits = |o: Offer| -> Option<u32> {
            let due = index
                .get(&o.tenant)
                .and_then(|&i| read.get(i))
                .map(|c| &c.due)?;
            let next = tried.entry(o.tenant).or_insert(0);
            while failed.is_none() {
                let row = due.get(*next)?;
                if u64::from(row.size) > o.room {
                    return None;
                }
                *next += 1;
                match sinks.take(store, row) {
                    Ok(Some(sink)) => {
                        taken.entry(o.tenant).or_default().push((*row, sink));
                        return Some(row.size);
                    }
                    Ok(None) => {}
                    Err(e) => failed = Some(e),
                }
            }
            None
        };
        sched.plan_fitting(now, &heads, limits, &mut fits)
    };
    drop(heads);
    if let Some(e) = failed {
        return Err(e);
    }
    let mut claims = Vec::with_capacity(plan.len());
    let mut claimed_through = Vec::new();
    for c in plan {
        let Some(cand) = index.get(&c.tenant).and_then(|&i| read.get_mut(i)) else {
            continue;
        };
        let took = taken.remove(&c.tenant).unwrap_or_default();
        // The rows met first from the visit's start, as far as this tick
        // claims each of them: once committed, the tenant has no due row
        // up to the last.
        let mut claimed = took.iter().map(|(r, _)| (r.seq, r.sink));
        let last = cand
            .due
            .iter()
            .take(cand.lead)
            .take_while(|r| claimed.next() == Some((r.seq, r.sink)))
            .last();
        if let Some(r) = last {
            claimed_through.push((c.tenant, (r.at, r.seq, r.sink)));
            cand.visit.from = DueFrom::After {
                at: r.at,
                seq: r.seq,
                sink: r.sink,
            };
        }
        claims.push(took);
    }
    Ok(TickPlan {
        visited: read.len(),
        claims,
        claimed_through,
        markers: read.into_iter().map(|c| c.visit).collect(),
        bad,
        park,
        rate_held,
        policy_held,
    })
}
