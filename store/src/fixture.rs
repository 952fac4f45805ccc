//! Realistic format 3 stores for tests, benches and demos, written through
//! the real transitions (so a fixture can never hold a state the daemon
//! could not produce).
//!
//! A fixture has skewed tenant sizes (Zipf-like), the `default` tenant, a
//! tenant whose rows are all dead, and rows in every state: pending,
//! retrying (kind 1, due in the future), inflight, dead, delivered (gone,
//! leaving reclaimable hooks), plus archive obligations. Everything derives
//! from the seed: the same spec writes the same logical store.

use serde::Serialize;

use crate::batch::Batch;
use crate::error::{Result, StoreError};
use crate::queries;
use crate::rows::DueRow;
use crate::store::Store;
use crate::tenants::{TenantAllocator, DEFAULT_TENANT};
use crate::transitions::{self, IngestHook, SinkSet};
use crate::values::{DeliveryRow, Envelope};

/// Name of the tenant whose rows are all dead.
pub const DEAD_ONLY_TENANT: &str = "dead-only";

/// What to write.
#[derive(Debug, Clone)]
pub struct FixtureSpec {
    /// Tenants, `default` and `dead-only` included (at least 2).
    pub tenants: u32,
    /// Delivery rows to create (hooks have one or two sinks).
    pub rows: u64,
    pub seed: u64,
    /// The fixture's "now" in ms: rows are received in the hour before it.
    pub now: u64,
    /// Hooks per synced commit.
    pub batch_hooks: usize,
    /// Whether `billing`'s hooks carry an event type (`invoice.paid`,
    /// `invoice.void`, `customer.created`, by seq): a store of a source
    /// that routes by type. Drawn from the seq, not the random stream, so
    /// a typed fixture has the same rows as an untyped one.
    pub typed: bool,
}

impl FixtureSpec {
    pub fn new(tenants: u32, rows: u64, seed: u64, now: u64) -> Self {
        Self {
            tenants,
            rows,
            seed,
            now,
            batch_hooks: 2000,
            typed: false,
        }
    }
}

/// What was written.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FixtureReport {
    pub hooks: u64,
    pub rows: u64,
    pub pending: u64,
    pub retrying: u64,
    pub inflight: u64,
    pub dead: u64,
    pub delivered: u64,
    pub archived_hooks: u64,
    pub tenants: u32,
    pub markers_cleaned: u64,
    /// Format 2: old rows (delivery rows and archive obligations) of the one
    /// hook whose envelope is unreadable, which the migration quarantines;
    /// they are in none of the counts above.
    pub quarantined: u64,
}

/// splitmix64: tiny, deterministic, good enough for fixture shapes.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

enum Fate {
    Pending,
    Retrying,
    Inflight,
    Dead,
    Delivered,
}

/// One hook for [`ingest`]: its envelope, the sink positions it owes rows
/// to, and whether it owes an archive copy.
#[derive(Debug, Clone)]
pub struct Hook {
    pub envelope: Envelope,
    pub sinks: SinkSet,
    pub archive: bool,
}

/// Ingests `hooks` as the daemon's writer does, in one synced commit:
/// tenant ordinals through `alloc`, seqs from the store's next one, every
/// row and counter through [`transitions::ingest`]. Returns the due rows.
/// The one way tests and benches put a few hooks into a store without a
/// daemon.
pub fn ingest(store: &Store, alloc: &mut TenantAllocator, hooks: &[Hook]) -> Result<Vec<DueRow>> {
    let first_seq = store.next_seq()?;
    let mut b = Batch::new();
    let res = alloc.resolve(
        store,
        hooks.iter().map(|h| h.envelope.tenant.as_str()),
        &mut b,
    )?;
    let mut out = Vec::new();
    for (i, h) in hooks.iter().enumerate() {
        let ord = res.ord(&h.envelope.tenant, alloc.max())?;
        out.extend(transitions::ingest(
            &mut b,
            &IngestHook {
                seq: first_seq + i as u64,
                ord,
                envelope: &h.envelope,
                sinks: h.sinks,
                archive: h.archive,
                dedupe_expires_at: None,
            },
        ));
    }
    store.commit(b, true)?;
    alloc.committed(res);
    Ok(out)
}

/// Adds to `b` a plain hook (tenant `t{ord}`, a one-byte body, no key, no
/// type) as `seq`, received and due at `at`, owing rows to the first
/// `sinks` sinks of `source`, through [`transitions::ingest`] but without a
/// tenant allocation. For tests that place rows by ordinal and sequence
/// number (the one copy of what several wrote by hand); [`ingest`] is the
/// writer's way. Returns the due rows.
pub fn ingest_plain(
    b: &mut Batch,
    source: &str,
    seq: u64,
    ord: u32,
    at: u64,
    sinks: u16,
) -> Vec<DueRow> {
    let envelope = Envelope {
        received_at: at,
        source_id: source.into(),
        tenant: format!("t{ord}"),
        idempotency_key: None,
        event_type: None,
        headers: vec![],
        body: vec![1],
    };
    transitions::ingest(
        b,
        &IngestHook {
            seq,
            ord,
            envelope: &envelope,
            sinks: SinkSet::first(sinks),
            archive: false,
            dedupe_expires_at: None,
        },
    )
}

fn tenant_name(i: u32) -> String {
    match i {
        0 => DEFAULT_TENANT.to_owned(),
        1 => DEAD_ONLY_TENANT.to_owned(),
        n => format!("tenant-{n:06}"),
    }
}

/// Picks the tenant of each hook: every tenant once first (so ordinals follow
/// name order), then Zipf-like weights (s = 1.1) over tenants 2.., with
/// `default` and the dead-only tenant given fixed small shares, so tenant
/// sizes are skewed.
struct TenantPicker {
    cdf: Vec<f64>,
    unseen: u32,
}

impl TenantPicker {
    fn new(spec: &FixtureSpec) -> Result<Self> {
        if spec.tenants < 2 {
            return Err(StoreError::InvalidTenant(
                "a fixture needs at least 2 tenants (default and dead-only)".into(),
            ));
        }
        let mut cdf = Vec::with_capacity(spec.tenants as usize);
        let mut acc = 0.0f64;
        for i in 0..spec.tenants as usize {
            acc += match i {
                0 => 0.05,
                1 => 0.01,
                _ => 1.0 / ((i - 1) as f64).powf(1.1),
            };
            cdf.push(acc);
        }
        Ok(Self { cdf, unseen: 0 })
    }

    fn next(&mut self, rng: &mut Rng) -> u32 {
        let n = self.cdf.len() as u32;
        if self.unseen < n {
            self.unseen += 1;
            return self.unseen - 1;
        }
        let total = self.cdf.last().copied().unwrap_or(1.0);
        let x = rng.unit() * total;
        (self.cdf.partition_point(|&c| c < x) as u32).min(n - 1)
    }
}

/// Writes a fixture into `store` (normally fresh). `progress(rows_done,
/// rows_total)` is called after every commit.
pub fn write(
    store: &Store,
    spec: &FixtureSpec,
    mut progress: impl FnMut(u64, u64),
) -> Result<FixtureReport> {
    store.require_writable()?;
    let mut picker = TenantPicker::new(spec)?;
    let mut rng = Rng::new(spec.seed);
    let mut alloc = TenantAllocator::load(store, u32::MAX - 1)?;
    let mut seq = store.next_seq()?;
    let mut rep = FixtureReport {
        tenants: spec.tenants,
        ..FixtureReport::default()
    };

    while rep.rows < spec.rows {
        let mut b = Batch::new();
        let mut hooks = Vec::with_capacity(spec.batch_hooks);
        while hooks.len() < spec.batch_hooks && rep.rows < spec.rows {
            let ti = picker.next(&mut rng);
            let sinks: u16 = if rng.below(5) == 0 { 2 } else { 1 };
            let sinks = sinks
                .min(u16::try_from(spec.rows - rep.rows).unwrap_or(u16::MAX))
                .max(1);
            let size = 32 + (rng.below(480) as usize) * (1 + rng.below(4) as usize) / 2;
            let received_at = spec.now.saturating_sub(rng.below(3_600_000));
            let body: Vec<u8> = format!(
                "{{\"event\":\"order.updated\",\"n\":{seq},\"pad\":\"{}\"}}",
                "x".repeat(size)
            )
            .into_bytes();
            let shop = ti % 3 == 0;
            const TYPES: [&str; 3] = ["invoice.paid", "invoice.void", "customer.created"];
            let event_type = (spec.typed && !shop)
                .then(|| TYPES[usize::try_from(seq % 3).unwrap_or(0)].to_owned());
            let env = Envelope {
                received_at,
                source_id: if shop {
                    "shop".into()
                } else {
                    "billing".into()
                },
                tenant: tenant_name(ti),
                idempotency_key: (rng.below(10) == 0).then(|| format!("idem-{seq}")),
                event_type,
                headers: vec![("content-type".into(), b"application/json".to_vec())],
                body,
            };
            hooks.push((seq, sinks, env));
            seq += 1;
            rep.rows += u64::from(sinks);
        }
        let res = alloc.resolve(store, hooks.iter().map(|h| h.2.tenant.as_str()), &mut b)?;
        for (hseq, sinks, env) in &hooks {
            let ord = res.ord(&env.tenant, alloc.max())?;
            let archive = rng.below(10) == 0;
            rep.archived_hooks += u64::from(archive);
            let due = transitions::ingest(
                &mut b,
                &IngestHook {
                    seq: *hseq,
                    ord,
                    envelope: env,
                    sinks: SinkSet::first(*sinks),
                    archive,
                    dedupe_expires_at: Some(spec.now + 86_400_000),
                },
            );
            rep.hooks += 1;
            for row in due {
                let fate = if env.tenant == DEAD_ONLY_TENANT {
                    Fate::Dead
                } else {
                    match rng.below(100) {
                        0..=69 => Fate::Pending,
                        70..=79 => Fate::Retrying,
                        80..=84 => Fate::Inflight,
                        85..=94 => Fate::Dead,
                        _ => Fate::Delivered,
                    }
                };
                match fate {
                    Fate::Pending => rep.pending += 1,
                    Fate::Inflight => {
                        transitions::claim(&mut b, &row);
                        rep.inflight += 1;
                    }
                    Fate::Delivered => {
                        let f = transitions::claim(&mut b, &row);
                        transitions::delivered(&mut b, &f);
                        rep.delivered += 1;
                    }
                    Fate::Retrying => {
                        let f = transitions::claim(&mut b, &row);
                        let mut d = DeliveryRow::new(ord, row.size);
                        d.record(row.at, 503, "503 Service Unavailable");
                        let at = spec.now + 1000 + rng.below(600_000);
                        transitions::retry(&mut b, &f, &d, at);
                        rep.retrying += 1;
                    }
                    Fate::Dead => {
                        let f = transitions::claim(&mut b, &row);
                        let mut d = DeliveryRow::new(ord, row.size);
                        // The daemon stamps the last attempt and the
                        // dead-letter with one instant; DLQ lookups by hook
                        // id rely on it.
                        for i in 1..=3u64 {
                            d.record(row.at + i * 1000, 500, "500 Internal Server Error");
                        }
                        let at = row.at + 3000;
                        transitions::dead_letter(
                            &mut b,
                            &f,
                            &d,
                            at,
                            &env.source_id,
                            env.event_type.as_deref(),
                        );
                        rep.dead += 1;
                    }
                }
            }
        }
        store.commit(b, true)?;
        alloc.committed(res);
        progress(rep.rows, spec.rows);
    }
    // The dispatcher's marker cleanup, as it would run after these claims.
    let (_, markers) = queries::active_markers(store, spec.now, usize::MAX)?;
    let mut by_tenant: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
    for (ord, bucket) in markers {
        by_tenant.entry(ord).or_default().push(bucket);
    }
    for (ord, buckets) in by_tenant {
        let c = transitions::cleanup_markers(store, ord, &buckets, 0, spec.now)?;
        rep.markers_cleaned += c.deleted.len() as u64 - c.restored.len() as u64;
    }
    // Leave no write-ahead log behind: every later reader (read-only or
    // follower) would replay it on open.
    store.flush()?;
    Ok(rep)
}

/// Writes a store in the previous release's layout (format 2) into `store`
/// (created by [`Store::create_v2`]): the input of the upgrade path. Same
/// shapes as [`write`], plus what only old stores hold: hooks with no tenant
/// (empty tenant field) and one hook whose envelope does not decode.
pub fn write_v2(
    store: &Store,
    spec: &FixtureSpec,
    mut progress: impl FnMut(u64, u64),
) -> Result<FixtureReport> {
    use crate::keys::{hook_key, prefix, V2DueKey, V2InflightKey};
    use crate::schema::Family;
    use crate::values::{encode_size, v2, Attempt, DeadValue, HookId};

    store.require_writable()?;
    let mut picker = TenantPicker::new(spec)?;
    let mut rng = Rng::new(spec.seed);
    let mut seq = store.next_seq()?;
    let mut rep = FixtureReport {
        tenants: spec.tenants,
        ..FixtureReport::default()
    };
    let mut garbage_written = false;
    while rep.rows < spec.rows {
        let mut b = Batch::new();
        let mut hooks = 0;
        while hooks < spec.batch_hooks && rep.rows < spec.rows {
            hooks += 1;
            let ti = picker.next(&mut rng);
            let sinks: u16 = if rng.below(5) == 0 { 2 } else { 1 };
            let sinks = sinks
                .min(u16::try_from(spec.rows - rep.rows).unwrap_or(u16::MAX))
                .max(1);
            let size = 32 + (rng.below(480) as usize) * (1 + rng.below(4) as usize) / 2;
            let received_at = spec.now.saturating_sub(rng.below(3_600_000));
            // `default` hooks of the old release carried no tenant at all.
            let tenant = if ti == 0 {
                String::new()
            } else {
                tenant_name(ti)
            };
            let env = Envelope {
                received_at,
                source_id: if ti % 3 == 0 {
                    "shop".into()
                } else {
                    "billing".into()
                },
                tenant: tenant.clone(),
                idempotency_key: None,
                event_type: None,
                headers: vec![("content-type".into(), b"application/json".to_vec())],
                body: vec![b'v'; size],
            };
            let body_size = env.charged_size();
            let garbage = !garbage_written && ti >= 2;
            if garbage {
                // One hook whose envelope is unreadable: its rows must land
                // under `default` after the upgrade.
                b.put(
                    Family::Hooks,
                    hook_key(seq).to_vec(),
                    vec![0xEE, 0x01, 0x02],
                );
                garbage_written = true;
            } else {
                b.put(Family::Hooks, hook_key(seq).to_vec(), env.encode());
            }
            rep.hooks += 1;
            if rng.below(10) == 0 {
                b.put(
                    Family::Index,
                    vec![prefix::ARCHIVE]
                        .into_iter()
                        .chain(seq.to_be_bytes())
                        .collect::<Vec<u8>>(),
                    encode_size(body_size).to_vec(),
                );
                if garbage {
                    rep.quarantined += 1;
                } else {
                    rep.archived_hooks += 1;
                }
            }
            for sink in 0..sinks {
                rep.rows += 1;
                let fate = if ti == 1 { 99 } else { rng.below(100) };
                // The old release kept each row's attempts and their history
                // (the last one at the dead-letter time for dead rows).
                let failed = |at: u64| Attempt {
                    at,
                    status: 500,
                    error: "fixture: sink answered 500".into(),
                };
                let (attempts, history): (u16, Vec<Attempt>) = match fate {
                    0..=69 => {
                        let k = V2DueKey {
                            at: received_at,
                            seq,
                            sink,
                        };
                        b.put(Family::Index, k.encode(), encode_size(body_size).to_vec());
                        *if garbage {
                            &mut rep.quarantined
                        } else {
                            &mut rep.pending
                        } += 1;
                        (0, Vec::new())
                    }
                    70..=79 => {
                        let at = spec.now + 1000 + rng.below(600_000);
                        let k = V2DueKey { at, seq, sink };
                        b.put(Family::Index, k.encode(), encode_size(body_size).to_vec());
                        *if garbage {
                            &mut rep.quarantined
                        } else {
                            &mut rep.retrying
                        } += 1;
                        (1, vec![failed(received_at + 1000)])
                    }
                    80..=84 => {
                        let k = V2InflightKey { seq, sink };
                        b.put(Family::Index, k.encode(), encode_size(body_size).to_vec());
                        *if garbage {
                            &mut rep.quarantined
                        } else {
                            &mut rep.inflight
                        } += 1;
                        (1, vec![failed(received_at + 1000)])
                    }
                    _ => {
                        let dead_at = received_at + 3000;
                        let mut k = vec![prefix::DEAD];
                        k.extend_from_slice(&dead_at.to_be_bytes());
                        k.extend_from_slice(&seq.to_be_bytes());
                        k.extend_from_slice(&sink.to_be_bytes());
                        b.put(
                            Family::Index,
                            k,
                            DeadValue::encode_v2(&env.source_id, &HookId(seq).public(None)),
                        );
                        *if garbage {
                            &mut rep.quarantined
                        } else {
                            &mut rep.dead
                        } += 1;
                        // Every fourth dead row has no history, as rows
                        // dead-lettered by older releases have none.
                        let history = if seq.is_multiple_of(4) {
                            Vec::new()
                        } else {
                            vec![
                                failed(received_at + 1000),
                                failed(received_at + 2000),
                                failed(dead_at),
                            ]
                        };
                        (3, history)
                    }
                };
                b.put(
                    Family::Deliveries,
                    crate::keys::delivery_key(seq, sink).to_vec(),
                    v2::encode_delivery(body_size, attempts, &history),
                );
            }
            seq += 1;
        }
        b.put(
            Family::Meta,
            crate::keys::meta::NEXT_SEQ.to_vec(),
            seq.to_be_bytes().to_vec(),
        );
        store.commit(b, true)?;
        progress(rep.rows, spec.rows);
    }
    store.flush_existing()?;
    Ok(rep)
}
