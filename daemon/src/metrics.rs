//! The daemon's own counters, kept in memory and rendered in Prometheus text.
//!
//! Owns: ingest outcomes (one counter per [`Outcome`], so the label set is
//! fixed), writer batches, commit and acknowledgement latency histograms,
//! the writer queue gauges, dedupe sweeps and boot recovery. Queue gauges
//! that come from the store (the node counters) belong to the admin API,
//! which can render this struct beside them.
//!
//! Invariants: every field is an atomic updated with relaxed ordering (each
//! is an independent monotonic counter or a gauge; nothing reads two of
//! them expecting consistency), and nothing here allocates per request.

use std::fmt::Write as _;

use ankusa_store::{Store, StoreError};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use super::outcome::Outcome;

/// Upper bounds (seconds) of the latency histograms.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// A fixed-bucket latency histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    /// Sum in microseconds (integer, so it can be atomic).
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                self.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{b}\"}} {}",
                self.buckets[i].load(Ordering::Relaxed)
            );
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            self.sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// The daemon's in-memory counters, shared by every task and rendered by
/// `GET /metrics`; a bench's own server takes a fresh one.
#[derive(Debug, Default)]
pub struct Metrics {
    outcomes: [AtomicU64; Outcome::ALL.len()],
    /// Synced commits of ingest batches.
    pub batches: AtomicU64,
    /// Hooks written by those commits (duplicates and refusals excluded).
    pub batch_hooks: AtomicU64,
    pub commit_failures: AtomicU64,
    pub commit_latency: Histogram,
    /// Time from the request's arrival to its `202`.
    pub ack_latency: Histogram,
    /// Ingest requests being handled (buffering, verifying or waiting for
    /// their commit).
    pub in_progress: AtomicI64,
    /// Requests waiting in (or being written by) the writer.
    pub queue_depth: AtomicI64,
    pub queue_bytes: AtomicI64,
    pub dedupe_swept: AtomicU64,
    pub recovered_inflight: AtomicU64,
    pub tenants_allocated: AtomicU64,
    /// Connections open on every listener ([`super::listener`]).
    pub connections: AtomicI64,
    /// Connections answered `connections_full` (or closed unanswered).
    pub connections_refused: AtomicU64,
    pub accept_errors: AtomicU64,
    /// Connections closed because a request head did not arrive in time.
    pub header_timeouts: AtomicU64,
    /// The store's write fault and its recoveries ([`super::health`]).
    pub store_fault: AtomicI64,
    pub store_recoveries: AtomicU64,
    /// The dispatcher's and the delivery workers' counters (issue 4).
    pub dispatch: DispatchMetrics,
    /// The sinks' breakers and health, read (never written) to render
    /// their series ([`super::sink_control`]).
    control: std::sync::Arc<super::sink_control::SinkControl>,
    /// The archiver's counters.
    pub archive: ArchiveMetrics,
}

impl Metrics {
    pub fn count(&self, o: Outcome) {
        if let Some(i) = Outcome::ALL.iter().position(|x| *x == o) {
            self.outcomes[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn outcome(&self, o: Outcome) -> u64 {
        Outcome::ALL
            .iter()
            .position(|x| *x == o)
            .map_or(0, |i| self.outcomes[i].load(Ordering::Relaxed))
    }

    /// Metrics that render `control`'s breakers and health with their own
    /// series.
    pub fn rendering(control: std::sync::Arc<super::sink_control::SinkControl>) -> Metrics {
        Metrics {
            control,
            ..Metrics::default()
        }
    }

    /// Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let name = "ankusa_ingest_requests_total";
        let _ = writeln!(
            out,
            "# HELP {name} Ingest requests by outcome (the stable codes of docs/delivery.md)."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for (i, o) in Outcome::ALL.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}{{outcome=\"{}\"}} {}",
                o.code(),
                self.outcomes[i].load(Ordering::Relaxed)
            );
        }
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {v}");
        };
        let gauge = |out: &mut String, name: &str, help: &str, v: i64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {v}");
        };
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        counter(
            &mut out,
            "ankusa_ingest_batches_total",
            "Synced group commits of ingest batches.",
            r(&self.batches),
        );
        counter(
            &mut out,
            "ankusa_ingest_batch_hooks_total",
            "Hooks written by ingest batches.",
            r(&self.batch_hooks),
        );
        counter(
            &mut out,
            "ankusa_ingest_commit_failures_total",
            "Ingest batches whose commit failed (their requests got 503 store_unavailable).",
            r(&self.commit_failures),
        );
        self.commit_latency.render(
            &mut out,
            "ankusa_ingest_commit_seconds",
            "Time of one synced ingest commit.",
        );
        self.ack_latency.render(
            &mut out,
            "ankusa_ingest_ack_seconds",
            "Time from a request's arrival to its 202.",
        );
        gauge(
            &mut out,
            "ankusa_ingest_requests_in_progress",
            "Ingest requests being handled (reading, verifying or awaiting their commit).",
            self.in_progress.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "ankusa_ingest_queue_depth",
            "Requests queued for or being written by the writer.",
            self.queue_depth.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "ankusa_ingest_queue_bytes",
            "Body bytes queued for or being written by the writer.",
            self.queue_bytes.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "ankusa_dedupe_swept_total",
            "Expired idempotency keys swept.",
            r(&self.dedupe_swept),
        );
        counter(
            &mut out,
            "ankusa_boot_recovered_inflight_total",
            "Inflight rows returned to due at boot.",
            r(&self.recovered_inflight),
        );
        counter(
            &mut out,
            "ankusa_tenants_allocated_total",
            "Tenant ordinals allocated by this process.",
            r(&self.tenants_allocated),
        );
        gauge(
            &mut out,
            "ankusa_http_connections",
            "Connections open on the ingest and admin listeners.",
            self.connections.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "ankusa_http_connections_refused_total",
            "Connections refused past a listener's connection cap (503 connections_full).",
            r(&self.connections_refused),
        );
        counter(
            &mut out,
            "ankusa_http_accept_errors_total",
            "Failed accepts (out of descriptors among them).",
            r(&self.accept_errors),
        );
        counter(
            &mut out,
            "ankusa_http_header_timeouts_total",
            "Connections closed because a request head did not arrive within http.header_timeout.",
            r(&self.header_timeouts),
        );
        gauge(
            &mut out,
            "ankusa_store_fault",
            "1 while the store refuses writes (the node answers 503 and /healthz is not ready).",
            self.store_fault.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "ankusa_store_recoveries_total",
            "Store write faults this process recovered from without a restart.",
            r(&self.store_recoveries),
        );
        self.dispatch.render(&mut out);
        self.control.render(&mut out);
        self.archive.render(&mut out);
        out
    }
}

/// Tenants labelled in `ankusa_tenant_pending` at most: the label set stays
/// bounded however many tenants there are.
pub const TOP_TENANTS: usize = 100;

/// The queue gauges, read from the store at scrape time: node-aggregate
/// counters (six point reads, never a fold), the oldest due row, tenants
/// allocated, active tenants (a bounded walk of the active index), and the
/// pending count of the top [`TOP_TENANTS`] active tenants.
pub fn render_queue(store: &Store, now: u64) -> Result<String, StoreError> {
    use ankusa_store::{queries, tenants};
    let mut out = String::with_capacity(8192);
    // Damage first: it is in memory, and a damaged block the gauges' reads
    // need makes the rest of the page an error.
    let damage = store.damage();
    for (name, kind, help, v) in [
        (
            "ankusa_store_damaged",
            "gauge",
            "1 once a read met a damaged table file of the store (/healthz names it; docs/deployment.md, \"A damaged table file\").",
            u64::from(damage.is_some()),
        ),
        (
            "ankusa_store_damaged_reads_total",
            "counter",
            "Reads that failed on a damaged table file since the daemon started.",
            damage.as_ref().map_or(0, |d| d.failed_reads),
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name} {v}");
    }
    // The same reads as the gauge tick `bench gauges` measures.
    let g = queries::gauges(store, now, TOP_TENANTS)?;
    // The node's id and the daemon's version (docs/fleet.md).
    if store.node().is_some() {
        let name = "ankusa_node_info";
        let _ = writeln!(
            out,
            "# HELP {name} The node's id in the fleet and the daemon's version (always 1)."
        );
        let _ = writeln!(out, "# TYPE {name} gauge");
        // `node` itself is added to this sample like to every other one
        // ([`label_node`]).
        let _ = writeln!(out, "{name}{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    }
    let node = g.node;
    let gauge = |out: &mut String, name: &str, help: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {v}");
    };
    let name = "ankusa_queue_rows";
    let _ = writeln!(
        out,
        "# HELP {name} Rows by state, from the node-aggregate counters."
    );
    let _ = writeln!(out, "# TYPE {name} gauge");
    for (state, v) in [
        ("pending", node.pending),
        ("scheduled", node.scheduled),
        ("inflight", node.inflight),
        ("dead", node.dead),
    ] {
        let _ = writeln!(out, "{name}{{state=\"{state}\"}} {v}");
    }
    // The store's cumulative totals: unlike the process counters above they
    // survive a restart, so a rate over them has no reset at a reboot.
    let name = "ankusa_store_rows_total";
    let _ = writeln!(
        out,
        "# HELP {name} Delivery rows by transition since the store was created (the store's cumulative totals, ord 0); transition=\"unrouted\" counts hooks that owed no sink a row."
    );
    let _ = writeln!(out, "# TYPE {name} counter");
    for t in ankusa_store::Total::ALL {
        let _ = writeln!(
            out,
            "{name}{{transition=\"{}\"}} {}",
            t.name(),
            g.totals.get(t)
        );
    }
    gauge(
        &mut out,
        "ankusa_queue_bytes",
        "Body bytes owed to sinks (one charge per delivery row).",
        &node.bytes,
    );
    gauge(
        &mut out,
        "ankusa_queue_archive_pending",
        "Hooks waiting to be archived.",
        &node.archive_pending,
    );
    gauge(
        &mut out,
        "ankusa_quarantined_rows",
        "Rows moved to the quarantine because they did not decode (see `ankusa store quarantine list`).",
        &ankusa_store::quarantine::count(store)?,
    );
    // RocksDB's share of the resident memory, by part: what the store's
    // configuration bounds, told apart from the daemon's own.
    let mem = store.memory()?;
    let name = "ankusa_store_memory_bytes";
    let _ = writeln!(
        out,
        "# HELP {name} RocksDB memory by part: the shared block cache (data, index and filter blocks), memtables, what open table files keep outside the cache.\n# TYPE {name} gauge"
    );
    for (part, v) in [
        ("block_cache", mem.block_cache),
        ("memtables", mem.memtables),
        ("table_readers", mem.table_readers),
    ] {
        let _ = writeln!(out, "{name}{{part=\"{part}\"}} {v}");
    }
    let name = "ankusa_store_memory_budget_bytes";
    let _ = writeln!(
        out,
        "# HELP {name} RocksDB's configured memory budget ([store] cache): block cache and memtables together.\n# TYPE {name} gauge\n{name} {}",
        mem.budget
    );
    // Rows waiting per sink: one multi-get over the catalog (the
    // configuration's sinks, so the labels stay bounded). Absent until a
    // store an earlier release wrote is counted.
    let catalog = ankusa_store::sinks::catalog(store)?;
    let keys: Vec<_> = catalog
        .iter()
        .filter(|e| !e.dropped())
        .map(ankusa_store::sinks::SinkEntry::sink_ref)
        .collect();
    if let Some(waiting) = ankusa_store::waiting::waiting(store, &keys)? {
        let name = "ankusa_sink_waiting_rows";
        let _ = writeln!(
            out,
            "# HELP {name} Rows waiting for the sink (due, retrying or parked), from the store's per-sink count.\n# TYPE {name} gauge"
        );
        for (k, n) in keys.iter().zip(waiting) {
            let (src, i) = (&k.source, k.sink);
            let _ = writeln!(out, "{name}{{source=\"{src}\",sink=\"{i}\"}} {n}");
        }
    }
    let oldest = g
        .oldest_due
        .filter(|o| o.at <= now)
        .map_or(0.0, |o| o.age_ms(now) as f64 / 1000.0);
    gauge(
        &mut out,
        "ankusa_queue_oldest_due_age_seconds",
        "How overdue the oldest due row is (0 when none is).",
        &oldest,
    );
    gauge(
        &mut out,
        "ankusa_tenants",
        "Tenant ordinals allocated.",
        &tenants::allocated(store)?,
    );
    let active = queries::active_summary(store, now, queries::MARKER_BUDGET)?;
    gauge(
        &mut out,
        "ankusa_dispatch_active_tenants",
        "Tenants with rows due now (a lower bound past the walk budget; see ankusa_dispatch_active_tenants_exact).",
        &active.tenants,
    );
    gauge(
        &mut out,
        "ankusa_dispatch_active_tenants_exact",
        "1 when the active-tenant count is exact, 0 when it is a lower bound.",
        &u8::from(active.complete),
    );
    let name = "ankusa_tenant_pending";
    let _ = writeln!(
        out,
        "# HELP {name} Pending rows of the top {TOP_TENANTS} active tenants by pending rows."
    );
    let _ = writeln!(out, "# TYPE {name} gauge");
    for t in g.top {
        let label = match tenants::name_of(store, t.ord)? {
            Some(tenants::Name::Live(id)) => id,
            _ => continue,
        };
        let _ = writeln!(
            out,
            "{name}{{tenant=\"{}\"}} {}",
            escape_label(&label),
            t.pending
        );
    }
    Ok(out)
}

/// The `/metrics` response: process metrics and the queue gauges (read off
/// the async threads: they are store reads). A failing store read is a
/// 500, not a page with the gauges silently missing.
pub async fn respond(
    metrics: std::sync::Arc<Metrics>,
    store: std::sync::Arc<Store>,
    now: u64,
) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let node = store.node().map(|n| n.id.to_string());
    let queue = tokio::task::spawn_blocking(move || render_queue(&store, now)).await;
    match queue {
        Ok(Ok(q)) => {
            let mut text = metrics.render();
            text.push_str(&q);
            if let Some(node) = node {
                text = label_node(&text, &node);
            }
            (
                [(
                    header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                text,
            )
                .into_response()
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot read the queue gauges");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the queue gauges: {e}\n"),
            )
                .into_response()
        }
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("metrics task failed: {e}\n"),
        )
            .into_response(),
    }
}

/// `text` (the Prometheus text format) with `node="<node>"` as the first
/// label of every sample, so one Prometheus scraping a fleet tells the
/// nodes' series apart by the node's own name, whatever address it is
/// scraped at (docs/fleet.md). Added here, once, after every family is
/// rendered, so a family added later cannot miss it. A sample line is the
/// metric name (which never holds `{` or a space), then its labels in
/// braces or none, then the value.
pub fn label_node(text: &str, node: &str) -> String {
    let label = format!("node=\"{}\"", escape_label(node));
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for line in text.split_inclusive('\n') {
        if line.starts_with('#') || line.trim().is_empty() {
            out.push_str(line);
            continue;
        }
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let (name, rest) = line.split_at(end);
        out.push_str(name);
        match rest.strip_prefix('{') {
            Some(labels) if labels.starts_with('}') => {
                out.push('{');
                out.push_str(&label);
                out.push_str(labels);
            }
            Some(labels) => {
                out.push('{');
                out.push_str(&label);
                out.push(',');
                out.push_str(labels);
            }
            None => {
                out.push('{');
                out.push_str(&label);
                out.push('}');
                out.push_str(rest);
            }
        }
    }
    out
}

/// A sample's series (`name` or `name{labels}`, as a page line has it
/// before its value) without the `node` label [`label_node`] put first:
/// what a reader of one node's page (the demo's summary, the tests)
/// matches on. A series without it comes back as it is.
pub fn without_node(series: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let Some((name, rest)) = series.split_once("{node=\"") else {
        return Cow::Borrowed(series);
    };
    // A node id never holds a quote or a backslash (`NodeId`), so its
    // value ends at the first quote.
    let Some((_, after)) = rest.split_once('"') else {
        return Cow::Borrowed(series);
    };
    match after.strip_prefix(',') {
        Some(labels) => Cow::Owned(format!("{name}{{{labels}")),
        None => Cow::Owned(name.to_owned()),
    }
}

/// Escapes a label value for the text format.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// The dispatcher's counters, rendered with the daemon's metrics.
#[derive(Debug, Default)]
pub struct DispatchMetrics {
    pub ticks: AtomicU64,
    pub tenants_visited: AtomicU64,
    pub rows_claimed: AtomicU64,
    pub tick_us_sum: AtomicU64,
    pub last_tick_us: AtomicU64,
    /// Duration of each tick (plan, claim, marker cleanup).
    pub tick_seconds: crate::metrics::Histogram,
    /// Duration of each delivery attempt (the HTTP request to the sink).
    pub attempt_seconds: crate::metrics::Histogram,
    pub tick_errors: AtomicU64,
    pub attempts: AtomicU64,
    pub delivered: AtomicU64,
    pub retried: AtomicU64,
    pub dead: AtomicU64,
    pub unrecorded: AtomicU64,
    /// Inflight rows nobody delivered, returned to due by a later tick.
    pub stranded_released: AtomicU64,
    pub inflight: AtomicI64,
    pub markers_deleted: AtomicU64,
    pub markers_restored: AtomicU64,
    /// Due rows quarantined because they did not decode.
    pub quarantined: AtomicU64,
    /// Missing first-row markers put back by the cleanup.
    pub markers_healed: AtomicU64,
    /// Marker cleanups that failed after their tick's claim (the claimed
    /// rows are delivered all the same; the tenant is visited again).
    pub cleanup_errors: AtomicU64,
    pub reclaimed: AtomicU64,
    /// Rows of a paused sink moved aside (parked) by a tick.
    pub parked: AtomicU64,
    /// Ticks started because a delivery ended (not by the period).
    pub refills: AtomicU64,
    /// Pauses in force at the last tick: tenants, sinks, sinks for one
    /// tenant.
    pub paused: [AtomicU64; 3],
    /// Tenants the last tick left out of its visits: every row they have
    /// due waits for a full sink, and nothing changed for them since.
    pub tenants_quiet: AtomicU64,
    /// Stored policies the dispatcher applies: of tenants, of sinks.
    pub policies: [AtomicU64; 2],
    /// Tenant visits whose rate left no claim.
    pub rate_held: AtomicU64,
    /// Tenants the latest tick found over their policy (their cap or rate
    /// filled), and the longest held of them by name with the
    /// milliseconds held (at most [`TOP_TENANTS`]).
    pub policy_held: AtomicU64,
    pub policy_held_top: std::sync::Mutex<Vec<(String, u64)>>,
}

impl DispatchMetrics {
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let counters: [(&str, &str, u64); 18] = [
            (
                "ankusa_dispatch_ticks_total",
                "Dispatch ticks run.",
                r(&self.ticks),
            ),
            (
                "ankusa_dispatch_tenants_visited_total",
                "Active tenants read by dispatch ticks.",
                r(&self.tenants_visited),
            ),
            (
                "ankusa_dispatch_rows_claimed_total",
                "Rows claimed (due -> inflight).",
                r(&self.rows_claimed),
            ),
            (
                "ankusa_dispatch_tick_errors_total",
                "Ticks that failed on a store error.",
                r(&self.tick_errors),
            ),
            (
                "ankusa_delivery_attempts_total",
                "Delivery attempts made.",
                r(&self.attempts),
            ),
            (
                "ankusa_delivery_delivered_total",
                "Rows delivered (2xx).",
                r(&self.delivered),
            ),
            (
                "ankusa_delivery_retried_total",
                "Rows scheduled for a retry.",
                r(&self.retried),
            ),
            (
                "ankusa_delivery_dead_total",
                "Rows dead-lettered.",
                r(&self.dead),
            ),
            (
                "ankusa_delivery_unrecorded_total",
                "Outcomes that could not be committed (the next tick returns their rows to due).",
                r(&self.unrecorded),
            ),
            (
                "ankusa_dispatch_stranded_released_total",
                "Inflight rows nobody was delivering (an unrecorded outcome, a store reopen) returned to due.",
                r(&self.stranded_released),
            ),
            (
                "ankusa_dispatch_markers_deleted_total",
                "Stale active markers deleted.",
                r(&self.markers_deleted),
            ),
            (
                "ankusa_dispatch_markers_restored_total",
                "Markers put back by the verify step.",
                r(&self.markers_restored),
            ),
            (
                "ankusa_dispatch_quarantined_total",
                "Due rows moved to the quarantine because they did not decode.",
                r(&self.quarantined),
            ),
            (
                "ankusa_dispatch_markers_healed_total",
                "Missing markers of a tenant's first due row put back by the cleanup.",
                r(&self.markers_healed),
            ),
            (
                "ankusa_dispatch_cleanup_errors_total",
                "Ticks whose marker cleanup failed after the claim (claimed rows are still delivered).",
                r(&self.cleanup_errors),
            ),
            (
                "ankusa_dispatch_refills_total",
                "Dispatch ticks started by a finished delivery, to refill its slot at once.",
                r(&self.refills),
            ),
            (
                "ankusa_dispatch_parked_total",
                "Due rows of a paused sink parked until the sink is resumed.",
                r(&self.parked),
            ),
            (
                "ankusa_reclaimed_hooks_total",
                "Hooks deleted because no row owes them any more.",
                r(&self.reclaimed),
            ),
        ];
        for (name, help, v) in &counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
        self.tick_seconds.render(
            out,
            "ankusa_dispatch_tick_seconds",
            "Duration of dispatch ticks (plan, claim, marker cleanup).",
        );
        let name = "ankusa_pauses";
        let _ = writeln!(
            out,
            "# HELP {name} Pauses in force, by scope.\n# TYPE {name} gauge"
        );
        for (scope, v) in ["tenant", "sink", "tenant_sink"].iter().zip(&self.paused) {
            let _ = writeln!(out, "{name}{{scope=\"{scope}\"}} {}", r(v));
        }
        let name = "ankusa_policies";
        let _ = writeln!(
            out,
            "# HELP {name} Stored policies the dispatcher applies, by subject (tenant policies, sink limits).\n# TYPE {name} gauge"
        );
        for (subject, v) in ["tenant", "sink"].iter().zip(&self.policies) {
            let _ = writeln!(out, "{name}{{subject=\"{subject}\"}} {}", r(v));
        }
        let name = "ankusa_dispatch_rate_held_total";
        let _ = writeln!(
            out,
            "# HELP {name} Tenant visits that claimed nothing because the tenant's rate had no token left.\n# TYPE {name} counter\n{name} {}",
            r(&self.rate_held)
        );
        let name = "ankusa_dispatch_tenants_policy_held";
        let _ = writeln!(
            out,
            "# HELP {name} Active tenants whose own cap or rate, not the node's ceiling, bounds what dispatch reads for them.\n# TYPE {name} gauge\n{name} {}",
            r(&self.policy_held)
        );
        let name = "ankusa_tenant_policy_held_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} How long the {TOP_TENANTS} tenants held longest have been held by their own policy without a break.\n# TYPE {name} gauge"
        );
        for (tenant, ms) in self
            .policy_held_top
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            let _ = writeln!(
                out,
                "{name}{{tenant=\"{}\"}} {}",
                escape_label(tenant),
                *ms as f64 / 1000.0
            );
        }
        let name = "ankusa_dispatch_tenants_quiet";
        let _ = writeln!(
            out,
            "# HELP {name} Active tenants the latest tick did not visit: every row they have due waits for a full sink and nothing changed for them since.\n# TYPE {name} gauge\n{name} {}",
            r(&self.tenants_quiet)
        );
        let name = "ankusa_dispatch_last_tick_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Duration of the latest dispatch tick.\n# TYPE {name} gauge\n{name} {}",
            r(&self.last_tick_us) as f64 / 1e6
        );
        self.attempt_seconds.render(
            out,
            "ankusa_delivery_attempt_seconds",
            "Duration of delivery attempts (request to response or failure).",
        );
        let name = "ankusa_delivery_inflight";
        let _ = writeln!(
            out,
            "# HELP {name} Deliveries in flight in this process.\n# TYPE {name} gauge\n{name} {}",
            self.inflight.load(Ordering::Relaxed)
        );
    }
}

/// The archiver's counters.
#[derive(Debug, Default)]
pub struct ArchiveMetrics {
    pub archived: AtomicU64,
    pub files_opened: AtomicU64,
    pub write_errors: AtomicU64,
    pub settle_errors: AtomicU64,
    /// 1 while the archiver is failing (its obligations are piling up).
    pub failing: AtomicI64,
}

impl ArchiveMetrics {
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for (name, help, v) in [
            (
                "ankusa_archive_hooks_total",
                "Hooks appended to archive files and settled.",
                r(&self.archived),
            ),
            (
                "ankusa_archive_files_total",
                "Archive files created.",
                r(&self.files_opened),
            ),
            (
                "ankusa_archive_write_errors_total",
                "Archive writes or syncs that failed (nothing was settled).",
                r(&self.write_errors),
            ),
            (
                "ankusa_archive_settle_errors_total",
                "Settle commits that failed after a synced write (the hooks are appended again).",
                r(&self.settle_errors),
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP ankusa_archive_failing 1 while archive writes are failing.\n# TYPE ankusa_archive_failing gauge\nankusa_archive_failing {}",
            self.failing.load(Ordering::Relaxed)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_is_rendered_with_its_count() {
        let m = Metrics::default();
        m.count(Outcome::Accepted);
        m.count(Outcome::Accepted);
        m.count(Outcome::TenantLimit);
        m.ack_latency.observe(Duration::from_millis(3));
        let text = m.render();
        assert!(
            text.contains("ankusa_ingest_requests_total{outcome=\"accepted\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("ankusa_ingest_requests_total{outcome=\"tenant_limit\"} 1\n"));
        assert!(text.contains("ankusa_ingest_requests_total{outcome=\"queue_full\"} 0\n"));
        assert!(text.contains("ankusa_ingest_ack_seconds_bucket{le=\"0.002\"} 0\n"));
        assert!(text.contains("ankusa_ingest_ack_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("ankusa_ingest_ack_seconds_count 1\n"));
        let labelled = label_node(&text, "eu-1");
        assert!(
            labelled
                .contains("ankusa_ingest_requests_total{node=\"eu-1\",outcome=\"accepted\"} 2\n"),
            "{labelled}"
        );
        assert!(labelled.contains("ankusa_ingest_ack_seconds_count{node=\"eu-1\"} 1\n"));
        assert!(labelled.contains("# TYPE ankusa_ingest_ack_seconds histogram\n"));
        // Taking the label off gives every sample back as it was.
        let back: Vec<String> = labelled
            .lines()
            .map(|l| match l.rsplit_once(' ') {
                Some((series, v)) if !l.starts_with('#') => format!("{} {v}", without_node(series)),
                _ => l.to_owned(),
            })
            .collect();
        assert_eq!(back, text.lines().collect::<Vec<_>>());
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
