//! The daemon's configuration: a TOML file read with serde.
//!
//! Owns: the file's schema (every key, its default and its range, mirrored in
//! `docs/configuration.md`), and turning it into [`Settings`], the checked
//! form the rest of the daemon uses.
//!
//! Invariants:
//! - Unknown keys are errors (`deny_unknown_fields` everywhere): a typo must
//!   not silently fall back to a default.
//! - Ranges are checked *while* deserializing (the bounded types below), so
//!   toml's error span points at the offending value and every error names
//!   the file, the line and the key.
//! - Checks that span several keys (duplicate source ids, `tenant` with
//!   `tenant_header`) keep the source's span and report its line too.
//! - Secrets (tokens, signing secrets) never appear in `Debug` output or in
//!   error messages.

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ankusa_ops::access::AdminToken;
use ankusa_store::transitions::SinkSet;
use ankusa_store::NodeId;
use axum::http::HeaderName;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use toml::Spanned;

/// Longest source id: it is a URL path segment and is stored with every hook.
pub const MAX_SOURCE_ID: usize = 64;
/// Sinks per source: a hook owes one delivery row per sink.
pub const MAX_SINKS: usize = ankusa_ops::replay::MAX_SINKS as usize;
/// Extra headers a source may keep with its hooks.
pub const MAX_FORWARD_HEADERS: usize = 16;
const MIB: u64 = 1024 * 1024;

/// A configuration error, already rendered with file, line and key.
#[derive(Debug)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// An unsigned integer that must lie in `MIN..=MAX`; checked as it is read
/// so the error carries the value's position in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int<const MIN: u64, const MAX: u64>(pub u64);

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Int<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = u64::deserialize(d)?;
        if !(MIN..=MAX).contains(&v) {
            return Err(D::Error::custom(format!(
                "must be between {MIN} and {MAX}, got {v}"
            )));
        }
        Ok(Int(v))
    }
}

/// A duration written the human way (`"250ms"`, `"30s"`, `"5m"`), in
/// `MIN_MS..=MAX_MS` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur<const MIN_MS: u64, const MAX_MS: u64>(pub Duration);

impl<'de, const MIN_MS: u64, const MAX_MS: u64> Deserialize<'de> for Dur<MIN_MS, MAX_MS> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let v = humantime::parse_duration(s.trim()).map_err(|e| {
            D::Error::custom(format!(
                "`{s}` is not a duration ({e}); write e.g. \"500ms\", \"30s\", \"5m\""
            ))
        })?;
        let (lo, hi) = (Duration::from_millis(MIN_MS), Duration::from_millis(MAX_MS));
        if v < lo || v > hi {
            return Err(D::Error::custom(format!(
                "must be between {} and {}, got {s}",
                humantime::format_duration(lo),
                humantime::format_duration(hi)
            )));
        }
        Ok(Dur(v))
    }
}

/// A secret string: kept out of `Debug`.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

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

/// The admin API's settings.
#[derive(Debug, Clone, Default)]
pub struct AdminSettings {
    pub socket: bool,
    pub local_admin: bool,
    pub listen: Option<SocketAddr>,
    pub tokens: Vec<AdminToken>,
}

fn check_admin(a: AdminSection, text: &str, path: &Path) -> Result<AdminSettings, ConfigError> {
    let mut names = HashSet::new();
    let mut tokens = Vec::with_capacity(a.tokens.len());
    for spanned in a.tokens {
        let span = spanned.span();
        let t = spanned.into_inner();
        let fail = |m: String| located(text, path, Some(span.clone()), &m);
        let name_ok = !t.name.is_empty()
            && t.name.len() <= 64
            && t.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
        if !name_ok {
            return Err(fail(format!(
                "admin.tokens.name `{}`: 1 to 64 characters of A-Z a-z 0-9 - _ . @ (it is written to the audit log)",
                t.name
            )));
        }
        if !names.insert(t.name.clone()) {
            return Err(fail(format!(
                "admin.tokens.name `{}` is used twice",
                t.name
            )));
        }
        let Secret(tok) = t.token;
        if tok.len() < 16 || !tok.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(fail(format!(
                "admin token `{}`: admin.tokens.token must be at least 16 printable ASCII characters without spaces",
                t.name
            )));
        }
        if let Some(tenant) = &t.tenant {
            ankusa_store::tenants::validate_id(tenant).map_err(|e| {
                fail(format!(
                    "admin token `{}`: admin.tokens.tenant: {e}",
                    t.name
                ))
            })?;
        }
        tokens.push(AdminToken {
            name: t.name,
            digest: ankusa_ops::access::digest(tok.as_bytes()),
            tenant: t.tenant,
        });
    }
    let digests: HashSet<[u8; 32]> = tokens.iter().map(|t| t.digest).collect();
    if digests.len() != tokens.len() {
        return Err(ConfigError(format!(
            "{}: two admin tokens have the same secret: each caller needs its own (the audit log names them)",
            path.display()
        )));
    }
    if a.listen.is_some() && tokens.is_empty() {
        return Err(ConfigError(format!(
            "{}: admin.listen serves the admin API on TCP, which needs at least one [[admin.tokens]]",
            path.display()
        )));
    }
    Ok(AdminSettings {
        socket: a.socket,
        local_admin: a.local_admin,
        listen: a.listen,
        tokens,
    })
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

/// A share in (0, 1], written as a TOML float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio(pub f64);

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !(v > 0.0 && v <= 1.0) {
            return Err(D::Error::custom(format!(
                "must be a share above 0 and at most 1 (e.g. 0.5), got {v}"
            )));
        }
        Ok(Ratio(v))
    }
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

fn de_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(|_| {
        D::Error::custom(format!(
            "`{s}` is not an address; write IP:PORT, e.g. \"127.0.0.1:8080\""
        ))
    })
}

fn de_opt_addr<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    de_addr(d).map(Some)
}

/// Secrets one configuration key may list at most (a rotation needs two;
/// a few more allow a staged one).
pub const MAX_ROTATED: usize = 8;

/// An RFC 3339 instant (`"2026-12-08T12:00:00Z"`), read as Unix
/// milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp(pub u64);

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let t = humantime::parse_rfc3339_weak(s.trim()).map_err(|e| {
            D::Error::custom(format!(
                "`{s}` is not an RFC 3339 time ({e}); write e.g. \"2026-12-08T12:00:00Z\""
            ))
        })?;
        let ms = t
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| D::Error::custom(format!("`{s}` is before 1970")))?
            .as_millis();
        Ok(Stamp(u64::try_from(ms).unwrap_or(u64::MAX)))
    }
}

/// One entry of `signing_secrets`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotatedSecret {
    pub secret: Secret,
    /// Not accepted (or not signed with) from this instant on.
    pub expires: Option<Stamp>,
}

/// One entry of a source's `tokens`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotatedToken {
    pub token: Secret,
    pub expires: Option<Stamp>,
}

/// A secret (a key or a token digest) and when it stops counting.
#[derive(Clone, PartialEq, Eq)]
pub struct Expiring<T> {
    pub value: T,
    /// Unix ms; `None`: never.
    pub expires_at: Option<u64>,
}

impl<T> Expiring<T> {
    pub fn never(value: T) -> Expiring<T> {
        Expiring {
            value,
            expires_at: None,
        }
    }

    /// Whether it still counts at `now_ms`.
    pub fn live(&self, now_ms: u64) -> bool {
        self.expires_at.is_none_or(|at| now_ms < at)
    }
}

impl<T> fmt::Debug for Expiring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<redacted, expires {:?}>", self.expires_at)
    }
}

/// The values of `list` that count at `now_ms`.
pub fn live<T>(list: &[Expiring<T>], now_ms: u64) -> impl Iterator<Item = &T> {
    list.iter()
        .filter(move |e| e.live(now_ms))
        .map(|e| &e.value)
}

/// A key's one secret or its rotated list, decoded by `decode`; the two
/// spellings are exclusive.
fn rotated<T>(
    key: &str,
    one: Option<&Secret>,
    many: &[(Secret, Option<Stamp>)],
    decode: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<Expiring<T>>, String> {
    match (one, many.is_empty()) {
        (Some(_), false) => Err(format!(
            "{key} and {key}s are exclusive: list every one in {key}s"
        )),
        (Some(Secret(s)), true) => Ok(vec![Expiring::never(
            decode(s).map_err(|m| format!("{key}: {m}"))?,
        )]),
        (None, _) if many.len() > MAX_ROTATED => Err(format!(
            "{key}s lists {} entries, the limit is {MAX_ROTATED}",
            many.len()
        )),
        (None, _) => many
            .iter()
            .enumerate()
            .map(|(i, (Secret(s), exp))| {
                Ok(Expiring {
                    value: decode(s).map_err(|m| format!("{key}s[{i}]: {m}"))?,
                    expires_at: exp.map(|e| e.0),
                })
            })
            .collect(),
    }
}

/// How a source finds the tenant of a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantRule {
    /// Every hook of the source belongs to this tenant (`default` when the
    /// source names none).
    Fixed(String),
    /// The tenant is in this request header, which is required.
    Header(HeaderName),
}

/// A source, checked and ready for the request path.
#[derive(Clone)]
pub struct Source {
    pub id: String,
    pub tenant: TenantRule,
    /// SHA-256 of each ingest token: compared in constant time against the
    /// digest of the presented one, so neither content nor length leaks.
    /// Empty: no token needed. Any unexpired one is accepted.
    pub tokens: Vec<Expiring<[u8; 32]>>,
    /// The decoded HMAC keys of the Standard Webhooks signing secrets.
    /// Empty: no signature needed. A signature by any unexpired one is
    /// accepted.
    pub signing_keys: Vec<Expiring<Vec<u8>>>,
    pub signature_tolerance: Duration,
    pub max_body: usize,
    /// Request headers stored with each hook (lowercase), content-type and
    /// webhook-id first.
    pub keep_headers: Vec<HeaderName>,
    /// Its share of the dispatcher's claims among the sources (the
    /// scheduler's group weight): the sources are served fairly first, their
    /// tenants second.
    pub weight: u32,
    /// Where a hook's event type is read; `None`: hooks have no type.
    pub event_type: Option<crate::routing::EventTypeFrom>,
    pub sinks: Vec<SinkConfig>,
}

/// `scheme://host[:port]` of a sink's URL: what may be shown or stored of
/// it (a path or query may carry a secret). Empty for a URL that does not
/// parse, which the config check refuses.
pub fn endpoint(url: &str) -> String {
    reqwest::Url::parse(url)
        .map(|u| {
            let host = u.host_str().unwrap_or("");
            match u.port() {
                Some(p) => format!("{}://{host}:{p}", u.scheme()),
                None => format!("{}://{host}", u.scheme()),
            }
        })
        .unwrap_or_default()
}

impl Source {
    /// The positions a new hook of this source owes rows to: every sink but
    /// the retired ones.
    pub fn ingest_sinks(&self) -> SinkSet {
        let n = u16::try_from(self.sinks.len()).unwrap_or(SinkSet::MAX);
        self.sinks
            .iter()
            .enumerate()
            .filter(|(_, k)| k.retired)
            .fold(SinkSet::first(n), |set, (i, _)| {
                set.without(u16::try_from(i).unwrap_or(u16::MAX))
            })
    }

    /// The positions a new hook of type `t` owes rows to: the sinks of
    /// [`Source::ingest_sinks`] that subscribe to it. Empty: the hook is
    /// unrouted.
    pub fn route(&self, t: Option<&str>) -> SinkSet {
        crate::routing::route(self.ingest_sinks(), t, |i| {
            self.sinks
                .get(usize::from(i))
                .and_then(|k| k.patterns.as_deref())
        })
    }

    /// The hook's event type from this request (none when the source does
    /// not route by type).
    pub fn event_type(
        &self,
        headers: &axum::http::HeaderMap,
        body: &[u8],
    ) -> Result<Option<String>, crate::routing::EventTypeError> {
        match &self.event_type {
            Some(from) => crate::routing::extract(from, headers, body),
            None => Ok(None),
        }
    }

    /// The source's sinks as the store's catalog records them: the name (or
    /// the position) and the URL's scheme, host and port only.
    pub fn catalog(&self) -> Vec<ankusa_store::sinks::SinkEntry> {
        self.sinks
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let endpoint = endpoint(&k.url);
                ankusa_store::sinks::SinkEntry {
                    source: self.id.clone(),
                    index: u16::try_from(i).unwrap_or(u16::MAX),
                    name: k.name.clone().unwrap_or_else(|| i.to_string()),
                    endpoint,
                }
            })
            .collect()
    }
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("id", &self.id)
            .field("tenant", &self.tenant)
            .field("tokens", &self.tokens)
            .field("signing_secrets", &self.signing_keys)
            .field("weight", &self.weight)
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

/// The writer's knobs.
#[derive(Debug, Clone)]
pub struct WriterSettings {
    pub queue: usize,
    pub queue_bytes: usize,
    pub max_batch: usize,
    pub max_batch_bytes: usize,
    pub linger: Duration,
    pub dedupe_ttl: Duration,
    pub sweep_interval: Duration,
    pub sweep_batch: usize,
    pub tenants_max: u32,
    /// Record an archive obligation with every accepted hook.
    pub archive: bool,
}

/// Everything the daemon needs, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config_path: PathBuf,
    pub store_path: PathBuf,
    /// `store.cache`: RocksDB's memory budget, in bytes.
    pub store_cache: usize,
    /// `node.id`, when configured.
    pub node_id: Option<NodeId>,
    pub listen: SocketAddr,
    pub max_body: usize,
    pub body_timeout: Duration,
    pub max_requests: usize,
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub shutdown_timeout: Duration,
    pub metrics: bool,
    pub writer: WriterSettings,
    pub dispatch: DispatchSettings,
    pub archive: ArchiveSettings,
    pub admin: AdminSettings,
    pub sources: Vec<Source>,
    /// `[tenants]` weight, share, cap and rate: what a tenant without a
    /// policy of its own gets (live: a reload changes them).
    pub tenant_defaults: ankusa_store::policy::Policy,
}

impl Settings {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Settings, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, path, &base)
    }

    /// Parses config text; `path` is only used in messages, `base` resolves
    /// a relative store path.
    pub fn parse(text: &str, path: &Path, base: &Path) -> Result<Settings, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let msg = e.message().trim_end().to_owned();
            located(text, path, e.span(), &msg)
        })?;
        Self::check(cfg, text, path, base)
    }

    fn check(cfg: Config, text: &str, path: &Path, base: &Path) -> Result<Settings, ConfigError> {
        let err = |span: Range<usize>, msg: String| located(text, path, Some(span), &msg);
        if cfg.sources.is_empty() {
            return Err(ConfigError(format!(
                "{}: no sources: add at least one [[sources]] table (see ankusa.example.toml)",
                path.display()
            )));
        }
        // Every source, the archive and the admin section are checked even
        // after one fails, and all their errors are reported together (a
        // syntax or type error stops the parse before this, at the first).
        let mut errors = Vec::new();
        let mut ids = HashSet::new();
        let mut sources = Vec::with_capacity(cfg.sources.len());
        for spanned in cfg.sources {
            let span = spanned.span();
            let s = spanned.into_inner();
            match check_source(s, &mut ids, cfg.http.max_body.0) {
                Ok(s) => sources.push(s),
                Err(m) => errors.push(err(span.clone(), m)),
            }
        }
        let store_path = if cfg.store.path.is_absolute() {
            cfg.store.path
        } else {
            base.join(cfg.store.path)
        };
        let archive = match &cfg.archive {
            Some(a) => check_archive(a.get_ref(), base).map_err(|m| err(a.span(), m)),
            None => check_archive(&ArchiveSection::default(), base).map_err(ConfigError),
        };
        let admin = check_admin(cfg.admin, text, path);
        let (archive, admin) = match (archive, admin) {
            (Ok(a), Ok(b)) if errors.is_empty() => (a, b),
            (a, b) => {
                errors.extend(a.err());
                errors.extend(b.err());
                return Err(ConfigError(
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                ));
            }
        };
        let w = cfg.writer;
        let dispatch = cfg.dispatch.settings();
        let tenant_defaults = cfg.tenants.defaults();
        tenant_defaults
            .check()
            .map_err(|m| ConfigError(format!("{}: [tenants] {m}", path.display())))?;
        Ok(Settings {
            config_path: path.to_path_buf(),
            store_path,
            store_cache: to_usize(cfg.store.cache.0),
            node_id: cfg.node.id,
            listen: cfg.http.listen,
            max_body: usize::try_from(cfg.http.max_body.0).unwrap_or(usize::MAX),
            body_timeout: cfg.http.body_timeout.0,
            max_requests: to_usize(cfg.http.max_requests.0),
            max_connections: to_usize(cfg.http.max_connections.0),
            header_timeout: cfg.http.header_timeout.0,
            shutdown_timeout: cfg.http.shutdown_timeout.0,
            metrics: cfg.http.metrics,
            writer: WriterSettings {
                queue: to_usize(w.queue.0),
                queue_bytes: to_usize(w.queue_bytes.0),
                max_batch: to_usize(w.max_batch.0),
                max_batch_bytes: to_usize(w.max_batch_bytes.0),
                linger: w.linger.0,
                dedupe_ttl: cfg.ingest.dedupe_ttl.0,
                sweep_interval: cfg.ingest.dedupe_sweep_interval.0,
                sweep_batch: to_usize(cfg.ingest.dedupe_sweep_batch.0),
                tenants_max: u32::try_from(cfg.tenants.max.0).unwrap_or(u32::MAX - 1),
                archive: archive.enabled,
            },
            dispatch,
            archive,
            admin,
            sources,
            tenant_defaults,
        })
    }
}

/// `dir` is required only when the archive is on: an obligation nobody can
/// settle would keep every hook forever.
fn check_archive(a: &ArchiveSection, base: &Path) -> Result<ArchiveSettings, String> {
    let dir =
        match (&a.dir, a.enabled) {
            (Some(d), _) if d.as_os_str().is_empty() => {
                return Err("archive.dir must not be empty".into())
            }
            (Some(d), _) if d.is_absolute() => d.clone(),
            (Some(d), _) => base.join(d),
            (None, true) => return Err(
                "archive.enabled = true needs archive.dir (the directory the archive files go to)"
                    .into(),
            ),
            (None, false) => PathBuf::new(),
        };
    Ok(ArchiveSettings {
        enabled: a.enabled,
        dir,
        max_file_bytes: a.max_file_bytes.0,
        max_file_age: a.max_file_age.0,
        interval: a.interval.0,
        batch: to_usize(a.batch.0),
    })
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn check_source(
    s: SourceConfig,
    ids: &mut HashSet<String>,
    http_max_body: u64,
) -> Result<Source, String> {
    let id = s.id;
    let id_ok = !id.is_empty()
        && id.len() <= MAX_SOURCE_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !id_ok {
        return Err(format!(
            "sources.id `{id}`: must be 1 to {MAX_SOURCE_ID} characters of A-Z a-z 0-9 - _ . (it is a URL path segment)"
        ));
    }
    if !ids.insert(id.clone()) {
        return Err(format!("sources.id `{id}` is used by two sources"));
    }
    let tenant = match (s.tenant, s.tenant_header) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "source `{id}`: sources.tenant and sources.tenant_header are exclusive (a fixed tenant, or a header that names it)"
            ))
        }
        (Some(t), None) => {
            ankusa_store::tenants::validate_id(&t).map_err(|e| format!("source `{id}`: sources.tenant: {e}"))?;
            TenantRule::Fixed(t)
        }
        (None, Some(h)) => TenantRule::Header(
            header_name(&h).map_err(|m| format!("source `{id}`: sources.tenant_header: {m}"))?,
        ),
        (None, None) => TenantRule::Fixed(ankusa_store::tenants::DEFAULT_TENANT.to_owned()),
    };
    let many: Vec<_> = s
        .tokens
        .iter()
        .map(|t| (t.token.clone(), t.expires))
        .collect();
    let tokens = rotated("token", s.token.as_ref(), &many, |t| {
        if t.len() < 8 || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("must be at least 8 printable ASCII characters without spaces".into());
        }
        Ok(ankusa_ops::access::digest(t.as_bytes()))
    })
    .map_err(|m| format!("source `{id}`: sources.{m}"))?;
    let many: Vec<_> = s
        .signing_secrets
        .iter()
        .map(|k| (k.secret.clone(), k.expires))
        .collect();
    let signing_keys = rotated(
        "signing_secret",
        s.signing_secret.as_ref(),
        &many,
        crate::signature::decode_secret,
    )
    .map_err(|m| format!("source `{id}`: sources.{m}"))?;
    if s.forward_headers.len() > MAX_FORWARD_HEADERS {
        return Err(format!(
            "source `{id}`: sources.forward_headers lists {} headers, the limit is {MAX_FORWARD_HEADERS}",
            s.forward_headers.len()
        ));
    }
    let mut keep_headers = vec![
        HeaderName::from_static("content-type"),
        HeaderName::from_static("webhook-id"),
    ];
    for h in &s.forward_headers {
        let name =
            header_name(h).map_err(|m| format!("source `{id}`: sources.forward_headers: {m}"))?;
        if !keep_headers.contains(&name) {
            keep_headers.push(name);
        }
    }
    if s.sinks.is_empty() || s.sinks.len() > MAX_SINKS {
        return Err(format!(
            "source `{id}`: needs 1 to {MAX_SINKS} [[sources.sinks]] (one delivery row per sink), has {}",
            s.sinks.len()
        ));
    }
    let mut sinks = s.sinks;
    let mut names = HashSet::new();
    for (i, sink) in sinks.iter_mut().enumerate() {
        if let Some(n) = &sink.name {
            let ok = !n.is_empty()
                && n.len() <= MAX_SOURCE_ID
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                && !n.bytes().all(|b| b.is_ascii_digit());
            if !ok {
                return Err(format!(
                    "source `{id}`: sources.sinks[{i}].name `{n}`: must be 1 to {MAX_SOURCE_ID} characters of A-Z a-z 0-9 - _ . and not all digits (a position names the sink already)"
                ));
            }
            if !names.insert(n.clone()) {
                return Err(format!(
                    "source `{id}`: sources.sinks[{i}].name `{n}` is used by two sinks of the source"
                ));
            }
        }
        let many: Vec<_> = sink
            .signing_secrets
            .iter()
            .map(|k| (k.secret.clone(), k.expires))
            .collect();
        sink.signing_keys = rotated(
            "signing_secret",
            sink.signing_secret.as_ref(),
            &many,
            crate::signature::decode_secret,
        )
        .map_err(|m| format!("source `{id}`: sources.sinks[{i}].{m}"))?;
        let url = reqwest::Url::parse(&sink.url)
            .map_err(|e| format!("source `{id}`: sources.sinks[{i}].url `{}`: {e}", sink.url))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(format!(
                "source `{id}`: sources.sinks[{i}].url must be http:// or https://"
            ));
        }
        if sink.backoff_max.0 < sink.backoff_initial.0 {
            return Err(format!(
                "source `{id}`: sources.sinks[{i}].backoff_max is shorter than backoff_initial"
            ));
        }
        sink.patterns = crate::routing::check_events(sink.events.as_deref())
            .map_err(|m| format!("source `{id}`: sources.sinks[{i}].{m}"))?;
        if sink.patterns.is_some() && s.event_type.is_none() {
            return Err(format!(
                "source `{id}`: sources.sinks[{i}].events needs the source's event_type (where a hook's type is: {{ header = \"...\" }} or {{ json = \"/type\" }})"
            ));
        }
        if let Some(b) = &sink.breaker {
            if b.failures.is_none() && b.ratio.is_none() {
                return Err(format!(
                    "source `{id}`: sources.sinks[{i}].breaker needs a rule: failures (consecutive), ratio (over window), or both"
                ));
            }
            if b.open_max.0 < b.open_for.0 {
                return Err(format!(
                    "source `{id}`: sources.sinks[{i}].breaker.open_max is shorter than open_for"
                ));
            }
        }
    }
    let event_type = s
        .event_type
        .as_ref()
        .map(crate::routing::EventTypeFrom::check)
        .transpose()
        .map_err(|m| format!("source `{id}`: sources.{m}"))?;
    Ok(Source {
        id,
        event_type,
        tenant,
        tokens,
        signing_keys,
        signature_tolerance: s.signature_tolerance.0,
        max_body: to_usize(s.max_body.map_or(http_max_body, |m| m.0)),
        keep_headers,
        weight: u32::try_from(s.weight.0).unwrap_or(1000),
        sinks,
    })
}

fn header_name(h: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(h.trim().as_bytes())
        .map_err(|_| format!("`{h}` is not a valid HTTP header name"))
}

/// Renders an error at `span` of `text` as `FILE:LINE: key `a.b`: message`
/// followed by the line itself. The key is read back from the file (the
/// line's `key =` and the table header above it), since serde's errors do
/// not carry the path.
fn located(text: &str, path: &Path, span: Option<Range<usize>>, msg: &str) -> ConfigError {
    let Some(span) = span else {
        return ConfigError(format!("{}: {msg}", path.display()));
    };
    let start = span.start.min(text.len());
    let line_no = text[..start].bytes().filter(|&b| b == b'\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    let key = key_at(text, line_no);
    let key = key.map(|k| format!(" key `{k}`:")).unwrap_or_default();
    ConfigError(format!(
        "config error in {} at line {line_no}:{key} {msg}\n  {line_no} | {line}",
        path.display()
    ))
}

/// The dotted key written on line `line_no` (1-based), prefixed by the
/// nearest table header above it. `None` when the line holds no `key =`
/// and is no table header.
fn key_at(text: &str, line_no: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let line = lines.get(line_no.checked_sub(1)?)?.trim();
    let header = |l: &str| -> Option<String> {
        let l = l.trim();
        let inner = l
            .strip_prefix("[[")
            .and_then(|r| r.split("]]").next())
            .or_else(|| l.strip_prefix('[').and_then(|r| r.split(']').next()))?;
        Some(inner.trim().to_owned())
    };
    if let Some(h) = header(line) {
        return Some(h);
    }
    let key = line.split('=').next()?.trim();
    if key.is_empty() || !line.contains('=') || key.starts_with('#') {
        return None;
    }
    let table = lines[..line_no - 1].iter().rev().find_map(|l| header(l));
    Some(match table {
        Some(t) => format!("{t}.{key}"),
        None => key.to_owned(),
    })
}

/// `[dispatch]`, checked.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    pub enabled: bool,
    pub tick: Duration,
    /// A finished delivery starts a tick at once (else only the period does).
    pub refill: bool,
    /// Deliveries in flight at once, node-wide.
    pub max_inflight: usize,
    /// Body bytes of the deliveries in flight at once, node-wide (one row may
    /// overdraw it, see `Limits::bytes`).
    pub max_inflight_bytes: u64,
    /// Deliveries in flight at once per tenant (the scheduler's cap).
    pub per_tenant: u32,
    /// Deliveries in flight at once per sink.
    pub per_sink: usize,
    /// Rows claimed per tick at most.
    pub tick_rows: u32,
    /// Bytes claimed per tick at most (one oversized row may go alone).
    pub tick_bytes: u64,
    /// Active tenants read per tick at most.
    pub scan_tenants: usize,
    /// Head rows read per tenant per tick at most.
    pub scan_rows: usize,
    pub drain_timeout: Duration,
    pub reclaim_interval: Duration,
    pub reclaim_batch: usize,
}

impl DispatchSettings {
    /// The most rows one tenant may have in flight: its cap, or more when
    /// it borrows slots nobody else is waiting for, up to one sink's own
    /// concurrency bound (and never past the node's).
    pub fn tenant_ceiling(&self) -> u32 {
        let sink = u32::try_from(self.per_sink.min(self.max_inflight)).unwrap_or(u32::MAX);
        sink.max(self.per_tenant)
    }

    /// The scheduler's work-conserving rule: borrow up to the ceiling,
    /// leaving `per_tenant` of each tick's free slots for a tenant that
    /// arrives meanwhile, so it is served on the next tick.
    pub fn spare(&self) -> ankusa_fairness::Spare {
        ankusa_fairness::Spare {
            ceiling: self.tenant_ceiling(),
            reserve: self.per_tenant,
        }
    }
}

impl Default for DispatchSettings {
    /// The defaults of `[dispatch]`, written once in the config.
    fn default() -> Self {
        DispatchSection::default().settings()
    }
}

/// `[archive]`, checked.
#[derive(Debug, Clone)]
pub struct ArchiveSettings {
    pub enabled: bool,
    pub dir: PathBuf,
    /// Roll once the current file holds this many bytes on disk.
    pub max_file_bytes: u64,
    /// Roll once the current file is this old.
    pub max_file_age: Duration,
    pub interval: Duration,
    /// Hooks per synced write.
    pub batch: usize,
}

#[cfg(test)]
mod tests;
