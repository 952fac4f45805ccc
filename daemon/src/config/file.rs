//! The file's schema: one struct per TOML table, every key with its
//! default, unknown keys refused (`deny_unknown_fields`). What is read
//! here is still unchecked across keys; `settings` does that.

use super::{
    de_addr, de_opt_addr, to_usize, DispatchSettings, Dur, Expiring, Int, Ratio, RotatedSecret,
    RotatedToken, Secret, MIB,
};
use ankusa_store::NodeId;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub store: StoreSection,
    #[serde(default)]
    pub node: NodeSection,
    #[serde(default)]
    pub http: HttpSection,
    #[serde(default)]
    pub writer: WriterSection,
    #[serde(default)]
    pub ingest: IngestSection,
    #[serde(default)]
    pub tenants: TenantsSection,
    #[serde(default)]
    pub dispatch: DispatchSection,
    #[serde(default)]
    pub admin: AdminSection,
    /// Spanned so a cross-key error (`enabled` without `dir`) names its line.
    pub archive: Option<Spanned<ArchiveSection>>,
    #[serde(default)]
    pub sources: Vec<Spanned<SourceConfig>>,
    /// Spanned so its cross-key errors name its line.
    pub cluster: Option<Spanned<super::ClusterSection>>,
}

/// `[dispatch]`: the tick loop, its concurrency bounds and the reclaim task.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DispatchSection {
    pub enabled: bool,
    pub tick: Dur<1, 60_000>,
    pub refill: bool,
    pub max_inflight: Int<1, 100_000>,
    pub max_inflight_bytes: Int<1024, { 64 * 1024 * MIB }>,
    pub per_tenant: Int<1, 100_000>,
    pub per_sink: Int<1, 100_000>,
    pub tick_rows: Int<1, 100_000>,
    pub tick_bytes: Int<1024, { 1024 * MIB }>,
    pub scan_tenants: Int<1, 1_000_000>,
    pub scan_rows: Int<1, 10_000>,
    pub drain_timeout: Dur<0, 3_600_000>,
    pub reclaim_interval: Dur<10, 3_600_000>,
    pub reclaim_batch: Int<1, 100_000>,
}

impl Default for DispatchSection {
    fn default() -> Self {
        Self {
            enabled: true,
            tick: Dur(Duration::from_millis(100)),
            refill: true,
            max_inflight: Int(256),
            max_inflight_bytes: Int(64 * MIB),
            per_tenant: Int(32),
            per_sink: Int(64),
            tick_rows: Int(256),
            tick_bytes: Int(16 * MIB),
            scan_tenants: Int(1024),
            scan_rows: Int(64),
            drain_timeout: Dur(Duration::from_secs(10)),
            reclaim_interval: Dur(Duration::from_secs(1)),
            reclaim_batch: Int(1000),
        }
    }
}

impl DispatchSection {
    /// The checked settings: the one conversion, used for a config file and
    /// for [`DispatchSettings::default`] alike.
    pub fn settings(&self) -> DispatchSettings {
        let d = self;
        DispatchSettings {
            enabled: d.enabled,
            tick: d.tick.0,
            refill: d.refill,
            max_inflight: to_usize(d.max_inflight.0),
            max_inflight_bytes: d.max_inflight_bytes.0,
            per_tenant: u32::try_from(d.per_tenant.0).unwrap_or(u32::MAX),
            per_sink: to_usize(d.per_sink.0),
            tick_rows: u32::try_from(d.tick_rows.0).unwrap_or(u32::MAX),
            tick_bytes: d.tick_bytes.0,
            scan_tenants: to_usize(d.scan_tenants.0),
            scan_rows: to_usize(d.scan_rows.0),
            drain_timeout: d.drain_timeout.0,
            reclaim_interval: d.reclaim_interval.0,
            reclaim_batch: to_usize(d.reclaim_batch.0),
        }
    }
}

/// `[archive]`: off by default. When on, every accepted hook is also
/// appended to rolling gzip files of JSON lines in `dir`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArchiveSection {
    pub enabled: bool,
    /// Archive directory; relative paths are relative to the config file.
    pub dir: Option<PathBuf>,
    /// Roll to a new file once the current one holds this many (compressed)
    /// bytes.
    pub max_file_bytes: Int<4096, { 64 * 1024 * MIB }>,
    /// Roll to a new file once the current one is this old.
    pub max_file_age: Dur<1_000, { 7 * 86_400_000 }>,
    /// How often the archiver looks for unsettled obligations.
    pub interval: Dur<10, 3_600_000>,
    /// Hooks appended (and settled) per synced write.
    pub batch: Int<1, 100_000>,
}

/// `[admin]`: the admin API's listeners and who may call it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSection {
    /// Serve the admin API on `admin.sock` in the store directory.
    pub socket: bool,
    /// A caller on the socket without a token is an admin named by its OS
    /// user (the socket is mode 0600: only the daemon's user and root can
    /// connect).
    pub local_admin: bool,
    /// Also serve it on TCP (tokens required there).
    #[serde(deserialize_with = "de_opt_addr")]
    pub listen: Option<SocketAddr>,
    pub tokens: Vec<Spanned<AdminTokenConfig>>,
}

impl Default for AdminSection {
    fn default() -> Self {
        Self {
            socket: true,
            local_admin: true,
            listen: None,
            tokens: Vec::new(),
        }
    }
}

/// `[[admin.tokens]]`: a bearer token, admin-wide or scoped to a tenant.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminTokenConfig {
    pub name: String,
    pub token: Secret,
    /// Scope: this tenant only. Absent: an admin token.
    pub tenant: Option<String>,
}

/// `[node]`: the node's identity in a fleet (docs/fleet.md).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSection {
    /// Checked against the id the store recorded at its first boot; none
    /// means "whatever the store recorded" (generated at the first boot).
    pub id: Option<NodeId>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// Store directory; relative paths are relative to the config file.
    pub path: PathBuf,
    /// RocksDB's memory budget in bytes: one block cache for every family,
    /// index and filter blocks and memtables charged to it
    /// ([`ankusa_store::MemoryBudget`]).
    #[serde(default = "default_store_cache")]
    pub cache: Int<{ 8 * MIB }, { 1024 * 1024 * MIB }>,
}

fn default_store_cache() -> Int<{ 8 * MIB }, { 1024 * 1024 * MIB }> {
    Int(ankusa_store::MemoryBudget::DEFAULT_BYTES as u64)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSection {
    #[serde(deserialize_with = "de_addr")]
    pub listen: SocketAddr,
    pub max_body: Int<1, { 64 * MIB }>,
    pub body_timeout: Dur<100, 600_000>,
    pub max_requests: Int<1, 1_000_000>,
    /// Connections the ingest listener serves at once; past it, `503
    /// connections_full`. Counted against the open-file limit at boot.
    pub max_connections: Int<1, 1_000_000>,
    /// A request head must arrive within this (also the idle keep-alive
    /// limit); applies to the admin listeners too.
    pub header_timeout: Dur<100, 600_000>,
    pub shutdown_timeout: Dur<1_000, 3_600_000>,
    pub metrics: bool,
}

impl Default for HttpSection {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_body: Int(MIB),
            body_timeout: Dur(Duration::from_secs(30)),
            max_requests: Int(1024),
            max_connections: Int(1024),
            header_timeout: Dur(Duration::from_secs(10)),
            shutdown_timeout: Dur(Duration::from_secs(30)),
            metrics: true,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WriterSection {
    pub queue: Int<1, 1_000_000>,
    pub queue_bytes: Int<{ MIB }, { 16 * 1024 * MIB }>,
    pub max_batch: Int<1, 65_536>,
    pub max_batch_bytes: Int<1024, { 256 * MIB }>,
    pub linger: Dur<0, 100>,
}

impl Default for WriterSection {
    fn default() -> Self {
        Self {
            queue: Int(4096),
            queue_bytes: Int(256 * MIB),
            max_batch: Int(1024),
            max_batch_bytes: Int(8 * MIB),
            // 0: a batch is whatever queued while the last commit synced.
            // A linger of 1 ms left the writer waiting while requests were
            // already queued: 0.37-0.46 of min(floor, raw) against 0.53-0.56
            // in `bench ingest` (docs/benchmarks.md).
            linger: Dur(Duration::ZERO),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestSection {
    pub dedupe_ttl: Dur<1_000, { 30 * 86_400_000 }>,
    pub dedupe_sweep_interval: Dur<100, 3_600_000>,
    pub dedupe_sweep_batch: Int<1, 100_000>,
}

impl Default for IngestSection {
    fn default() -> Self {
        Self {
            dedupe_ttl: Dur(Duration::from_secs(86_400)),
            dedupe_sweep_interval: Dur(Duration::from_secs(10)),
            dedupe_sweep_batch: Int(1000),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TenantsSection {
    pub max: Int<1, { u32::MAX as u64 - 1 }>,
    /// Every tenant's weight in its source's group, unless its policy
    /// says otherwise.
    pub weight: Int<1, { ankusa_store::policy::MAX_WEIGHT as u64 }>,
    /// Slots guaranteed to each tenant; `[dispatch] per_tenant` when unset.
    pub share: Option<Int<1, { ankusa_store::policy::MAX_SLOTS as u64 }>>,
    /// Deliveries in flight per tenant at most, borrowing included.
    pub cap: Option<Int<1, { ankusa_store::policy::MAX_SLOTS as u64 }>>,
    /// Deliveries started per second per tenant at most.
    pub rate: Option<ankusa_store::policy::Rate>,
}

impl Default for TenantsSection {
    fn default() -> Self {
        Self {
            max: Int(u64::from(ankusa_store::tenants::DEFAULT_MAX)),
            weight: Int(1),
            share: None,
            cap: None,
            rate: None,
        }
    }
}

impl TenantsSection {
    /// The defaults every tenant's policy is taken over.
    pub fn defaults(&self) -> ankusa_store::policy::Policy {
        let n = |v: Option<Int<1, { ankusa_store::policy::MAX_SLOTS as u64 }>>| {
            v.map(|v| u32::try_from(v.0).unwrap_or(u32::MAX))
        };
        ankusa_store::policy::Policy {
            weight: Some(u32::try_from(self.weight.0).unwrap_or(1)),
            share: n(self.share),
            cap: n(self.cap),
            rate: self.rate,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    pub id: String,
    pub tenant: Option<String>,
    pub tenant_header: Option<String>,
    pub token: Option<Secret>,
    /// Several tokens, each until its `expires` (a rotation): exclusive
    /// with `token`.
    #[serde(default)]
    pub tokens: Vec<RotatedToken>,
    pub signing_secret: Option<Secret>,
    /// Several signing secrets, each until its `expires`: exclusive with
    /// `signing_secret`.
    #[serde(default)]
    pub signing_secrets: Vec<RotatedSecret>,
    #[serde(default = "default_tolerance")]
    pub signature_tolerance: Dur<1_000, 3_600_000>,
    pub max_body: Option<Int<1, { 64 * MIB }>>,
    #[serde(default)]
    pub forward_headers: Vec<String>,
    /// The source's share of the dispatcher among the sources.
    #[serde(default = "default_source_weight")]
    pub weight: Int<1, 1000>,
    /// Where a hook's event type is: `{ header = "x-github-event" }` or
    /// `{ json = "/type" }` (docs/configuration.md, "Routing by event
    /// type").
    pub event_type: Option<crate::routing::EventTypeConfig>,
    #[serde(default)]
    pub sinks: Vec<SinkConfig>,
}

fn default_source_weight() -> Int<1, 1000> {
    Int(1)
}

/// A delivery target. Only the count matters to ingest (one delivery row per
/// sink, numbered by position); the rest is read by dispatch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    pub url: String,
    /// What operators call the sink (`SOURCE/NAME`); its position in the
    /// list when unset. Letters, digits, `-`, `_`, `.`; not all digits.
    pub name: Option<String>,
    #[serde(default = "default_sink_timeout")]
    pub timeout: Dur<100, 300_000>,
    #[serde(default = "default_max_attempts")]
    pub max_attempts: Int<1, 100>,
    #[serde(default = "default_backoff_initial")]
    pub backoff_initial: Dur<10, 3_600_000>,
    #[serde(default = "default_backoff_max")]
    pub backoff_max: Dur<1_000, { 7 * 86_400_000 }>,
    /// Longest `Retry-After` honoured; a longer one is cut to this.
    #[serde(default = "default_retry_after_max")]
    pub retry_after_max: Dur<0, { 7 * 86_400_000 }>,
    /// Retry 4xx answers other than 408/425/429 instead of dead-lettering
    /// them at once.
    #[serde(default)]
    pub retry_4xx: bool,
    /// Standard Webhooks signing secret (`whsec_<base64>`) for deliveries.
    pub signing_secret: Option<Secret>,
    /// Several, each until its `expires`: a delivery carries one signature
    /// per unexpired one. Exclusive with `signing_secret`.
    #[serde(default)]
    pub signing_secrets: Vec<RotatedSecret>,
    /// The decoded secrets, filled in by the config check.
    #[serde(skip)]
    pub signing_keys: Vec<Expiring<Vec<u8>>>,
    /// `[sources.sinks.breaker]`: the sink's circuit breaker; none (off)
    /// when absent.
    pub breaker: Option<BreakerSection>,
    /// A sink on its way out: it keeps its position (rows name sinks by
    /// position) and delivers what waits for it, but new hooks owe it
    /// nothing. A later reload may drop it once nothing waits.
    #[serde(default)]
    pub retired: bool,
    /// Deliveries to this sink in flight at most, below `[dispatch]
    /// per_sink` (which bounds every sink); an operator may lower it at
    /// run time (`ankusa sinks limit`).
    pub max_in_flight: Option<Int<1, 1_000_000>>,
    /// Requests to this sink started per second at most (`"50/s"`,
    /// `"30/m"`); its waiting rows stay due.
    pub rate: Option<ankusa_store::policy::Rate>,
    /// The event types it takes (`["invoice.*", "customer.created"]`);
    /// every hook when absent.
    pub events: Option<Vec<String>>,
    /// `events`, checked, filled in by the config check.
    #[serde(skip)]
    pub patterns: Option<Vec<crate::routing::Pattern>>,
    /// A tombstone, never read from the file: the position of a sink taken
    /// out of it, which `crate::slots` keeps so no later sink takes it.
    /// Nothing is routed, claimed or delivered to it.
    #[serde(skip)]
    pub dropped: bool,
    /// The configuration generation since which it has been retired (0:
    /// since boot), kept by reloads: a sink may leave the file once no
    /// request admitted before then is in flight (`crate::slots`).
    #[serde(skip)]
    pub retired_since: u64,
}

impl SinkConfig {
    /// The tombstone of a dropped sink, under the name it had (its position
    /// as text when it had none).
    pub fn tombstone(name: String) -> SinkConfig {
        SinkConfig {
            url: String::new(),
            name: Some(name),
            timeout: default_sink_timeout(),
            max_attempts: default_max_attempts(),
            backoff_initial: default_backoff_initial(),
            backoff_max: default_backoff_max(),
            retry_after_max: default_retry_after_max(),
            retry_4xx: false,
            signing_secret: None,
            signing_secrets: Vec::new(),
            signing_keys: Vec::new(),
            breaker: None,
            retired: true,
            max_in_flight: None,
            rate: None,
            events: None,
            patterns: None,
            dropped: true,
            retired_since: 0,
        }
    }
}

/// `[sources.sinks.breaker]`: when the sink is paused automatically, and
/// for how long. At least one rule (`failures`, or `ratio`) is required.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerSection {
    /// Consecutive failed attempts that open it.
    pub failures: Option<Int<1, 1_000_000>>,
    /// Failed share of the attempts in `window` that opens it, once the
    /// window holds `min_attempts` attempts.
    pub ratio: Option<Ratio>,
    #[serde(default = "default_breaker_window")]
    pub window: Dur<1_000, 3_600_000>,
    #[serde(default = "default_breaker_min_attempts")]
    pub min_attempts: Int<1, 1_000_000>,
    /// The first pause; each failed probe doubles it.
    #[serde(default = "default_open_for")]
    pub open_for: Dur<100, 86_400_000>,
    /// The longest pause between probes.
    #[serde(default = "default_open_max")]
    pub open_max: Dur<100, { 7 * 86_400_000 }>,
}

fn default_breaker_window() -> Dur<1_000, 3_600_000> {
    Dur(Duration::from_secs(60))
}

fn default_breaker_min_attempts() -> Int<1, 1_000_000> {
    Int(20)
}

fn default_open_for() -> Dur<100, 86_400_000> {
    Dur(Duration::from_secs(30))
}

fn default_open_max() -> Dur<100, { 7 * 86_400_000 }> {
    Dur(Duration::from_secs(600))
}

fn default_tolerance() -> Dur<1_000, 3_600_000> {
    Dur(Duration::from_secs(300))
}

fn default_sink_timeout() -> Dur<100, 300_000> {
    Dur(Duration::from_secs(10))
}

fn default_max_attempts() -> Int<1, 100> {
    Int(10)
}

fn default_backoff_initial() -> Dur<10, 3_600_000> {
    Dur(Duration::from_secs(1))
}

fn default_backoff_max() -> Dur<1_000, { 7 * 86_400_000 }> {
    Dur(Duration::from_secs(3600))
}

fn default_retry_after_max() -> Dur<0, { 7 * 86_400_000 }> {
    Dur(Duration::from_secs(3600))
}

impl Default for ArchiveSection {
    fn default() -> Self {
        Self {
            enabled: false,
            dir: None,
            max_file_bytes: Int(64 * MIB),
            max_file_age: Dur(Duration::from_secs(3600)),
            interval: Dur(Duration::from_millis(200)),
            batch: Int(1000),
        }
    }
}
