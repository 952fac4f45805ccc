//! The JSON shapes of the admin API and of `--json` output (stable;
//! documented in docs/admin-api.md). Field additions are compatible;
//! renames and removals are not.

use ankusa_store::policy::{Policy, SinkLimits, StoredSinkLimits, TenantPolicy};
use ankusa_store::tenants::TenantInfo;
use ankusa_store::{Counters, DeadRow, Totals};
use serde::{Deserialize, Serialize};

use crate::access::Principal;
use crate::wire::{
    CountersJson, DeadRowJson, DlqCursorJson, DrainJson, Opt, PauseJson, PolicyJson,
    PurgeCursorJson, ScopeJson, Seq, SinkLimitsJson, StoredSinkLimitsJson, TenantInfoJson,
    TenantPolicyJson, TotalsJson, UnparkCursorJson,
};

/// `GET /v1/admin/stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub store: String,
    pub format: u32,
    /// Node-aggregate counters (ordinal 0): point reads, never a fold.
    #[serde(with = "CountersJson")]
    pub node: Counters,
    /// The node's cumulative totals (rows accepted, delivered, retried,
    /// dead-lettered): monotone merge-operand counters, so two samples give
    /// rates. Zeros from a release before them.
    #[serde(default, with = "TotalsJson")]
    pub totals: Totals,
    /// Age of the oldest due row (ms), when one is overdue.
    pub oldest_due_age_ms: Option<u64>,
    /// Tenant ordinals allocated.
    pub tenants: u32,
    /// Tenants with rows due now (a lower bound when `active_exact` is
    /// false: the walk of the active index is bounded).
    pub active_tenants: u64,
    pub active_exact: bool,
    /// Present when a daemon answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub pid: u32,
    pub version: String,
    pub uptime_ms: u64,
    pub jobs_running: u64,
    /// Present while the store refuses writes: ingest answers `503
    /// store_unavailable` and `/healthz` is not ready until it recovers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_fault: Option<StoreFault>,
}

/// A store write fault, as the daemon reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFault {
    /// When the first failed write happened (ms since the epoch).
    pub since_ms: u64,
    /// RocksDB's words for the last failure.
    pub error: String,
    pub failed_writes: u64,
}

impl From<ankusa_store::WriteFault> for StoreFault {
    fn from(f: ankusa_store::WriteFault) -> Self {
        StoreFault {
            since_ms: f.since_ms,
            error: f.error,
            failed_writes: f.failed_writes,
        }
    }
}

/// `GET /v1/admin/tenants`: one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantsPage {
    #[serde(with = "Seq::<TenantInfoJson>")]
    pub tenants: Vec<TenantInfo>,
    /// Pass as `cursor` for the next page: set whenever the page is full
    /// (the page after a full last one is empty), `null` on a short page.
    pub next: Option<String>,
    /// Ids of the tenants on this page that are paused as a whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused: Vec<String>,
    /// Ids of the tenants on this page with a policy of their own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
}

/// `GET /v1/admin/tenants/{tenant}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantDetail {
    pub tenant: String,
    pub ord: u32,
    #[serde(with = "CountersJson")]
    pub counters: Counters,
    /// The tenant's cumulative totals, as [`Stats::totals`] for the node.
    #[serde(default, with = "TotalsJson")]
    pub totals: Totals,
    /// Due time (ms) of the tenant's first due row (overdue or scheduled).
    pub first_due_at: Option<u64>,
    /// How overdue that row is (0 when it is scheduled in the future).
    pub oldest_due_age_ms: Option<u64>,
    /// The five newest dead rows.
    pub latest_dead: Vec<DlqEntry>,
    /// Pauses that hold this tenant's rows: of the tenant, of a sink for
    /// it, and of a sink for every tenant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused: Vec<PauseView>,
    /// What an operator set for it (`ankusa tenants policy`); absent, the
    /// defaults apply.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<TenantPolicyJson>"
    )]
    pub policy: Option<TenantPolicy>,
}

/// `GET /v1/admin/tenants/{tenant}/policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyView {
    pub tenant: String,
    /// What an operator set; absent, the defaults apply.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<TenantPolicyJson>"
    )]
    pub stored: Option<TenantPolicy>,
    /// The daemon's defaults, when a daemon answered.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<PolicyJson>"
    )]
    pub defaults: Option<Policy>,
}

/// What setting or clearing a tenant's policy did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyChange {
    pub tenant: String,
    /// The stored policy before and after (absent: none, the defaults).
    #[serde(default, with = "Opt::<PolicyJson>")]
    pub before: Option<Policy>,
    #[serde(default, with = "Opt::<PolicyJson>")]
    pub after: Option<Policy>,
    /// False when the request changed nothing (and nothing was written).
    pub changed: bool,
}

/// `GET /v1/admin/sinks/{sink}/limits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkLimitsView {
    /// `SOURCE/NAME`.
    pub sink: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<StoredSinkLimitsJson>"
    )]
    pub stored: Option<StoredSinkLimits>,
}

/// What setting or clearing a sink's limits did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkLimitsChange {
    /// `SOURCE/NAME`.
    pub sink: String,
    #[serde(default, with = "Opt::<SinkLimitsJson>")]
    pub before: Option<SinkLimits>,
    #[serde(default, with = "Opt::<SinkLimitsJson>")]
    pub after: Option<SinkLimits>,
    pub changed: bool,
}

/// One DLQ row with its tenant's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DlqEntry {
    pub tenant: String,
    /// The row's sink as operators name it, `SOURCE/NAME` (the row keeps
    /// its position as `sink`). Empty from a node that predates it.
    #[serde(default)]
    pub sink_name: String,
    #[serde(flatten, with = "DeadRowJson")]
    pub row: DeadRow,
}

/// `GET /v1/admin/dlq`: one page, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DlqPage {
    pub entries: Vec<DlqEntry>,
    pub next: Option<String>,
}

/// One delivery attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AttemptView {
    pub at: u64,
    /// HTTP status; 0 when no response came.
    pub status: u16,
    pub error: String,
}

/// A bounded, redacted view of a hook ([`crate::preview`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HookView {
    pub received_at: u64,
    pub source: String,
    pub idempotency_key: Option<String>,
    /// Its event type, when its source routes by type.
    #[serde(default)]
    pub event_type: Option<String>,
    /// Secret-looking header values are replaced by `[redacted, N bytes]`.
    pub headers: Vec<(String, String)>,
    pub body_len: usize,
    /// `text` (UTF-8, cut at 2 KiB), `binary` (hex dump of 256 bytes) or
    /// `empty`.
    pub body_kind: String,
    pub body_preview: Vec<String>,
    pub body_truncated: bool,
}

/// `GET /v1/admin/dlq/{hook_id}`: a dead hook, each dead sink with its
/// delivery history.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DlqDetail {
    pub hook_id: String,
    pub tenant: String,
    pub dead: Vec<DeadSink>,
    /// Absent when the hook's body is gone (it should not be while a row
    /// is dead; `ankusa store check` would say).
    pub hook: Option<HookView>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeadSink {
    pub sink: u16,
    /// `SOURCE/NAME` of that sink. Empty from a node that predates it.
    #[serde(default)]
    pub sink_name: String,
    pub dead_at: u64,
    pub attempts: u16,
    pub history: Vec<AttemptView>,
}

/// What a purge removes (or, dry, would remove).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeCounts {
    pub pending: u64,
    pub scheduled: u64,
    pub dead: u64,
}

impl PurgeCounts {
    pub fn total(&self) -> u64 {
        self.pending + self.scheduled + self.dead
    }
}

/// Which rows a purge takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kinds {
    /// Due rows: first attempts and scheduled retries.
    pub pending: bool,
    pub dead: bool,
}

impl Kinds {
    pub const BOTH: Kinds = Kinds {
        pending: true,
        dead: true,
    };

    /// `pending+dead`, `pending` or `dead`: the one label scopes, audit
    /// records and job descriptions use.
    pub fn label(&self) -> &'static str {
        match (self.pending, self.dead) {
            (true, true) => "pending+dead",
            (true, false) => "pending",
            (false, true) => "dead",
            (false, false) => "nothing",
        }
    }

    /// The rows these kinds take, in words (the console's guard).
    pub fn rows(&self) -> &'static str {
        match (self.pending, self.dead) {
            (true, true) => "pending (due and scheduled) and dead rows",
            (true, false) => "pending (due and scheduled) rows",
            (false, true) => "dead rows",
            (false, false) => "nothing",
        }
    }

    /// The console's choices in turn: both, pending only, dead only.
    pub fn next(&self) -> Kinds {
        match (self.pending, self.dead) {
            (true, true) => Kinds {
                pending: true,
                dead: false,
            },
            (true, false) => Kinds {
                pending: false,
                dead: true,
            },
            _ => Kinds::BOTH,
        }
    }

    /// The request's form: `["pending", "dead"]`.
    pub fn names(&self) -> Vec<String> {
        [(self.pending, "pending"), (self.dead, "dead")]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| n.to_owned())
            .collect()
    }
}

/// A replay's selection, as asked. Its unit is the dead delivery row
/// `(hook, sink)`: a dry run, a job's progress and the audit count rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// Hook ids (`hk_...`): each names the dead rows of every sink that
    /// dead-lettered the hook.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Dead rows (`hk_...:SINK`): each names one hook's row for one sink.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<String>,
    /// One tenant's dead rows (alone, or to narrow a time range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Dead-lettered at or after (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// Dead-lettered before (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
    #[serde(default)]
    pub dry_run: bool,
}

/// The name of one dead row in [`ReplayRequest::rows`]: `hk_...:SINK`.
pub fn row_name(hook_id: &str, sink: u16) -> String {
    format!("{hook_id}:{sink}")
}

/// A purge request body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    /// Any of `pending`, `dead`.
    pub kinds: Vec<String>,
    #[serde(default)]
    pub dry_run: bool,
}

/// The answer to a dry run: exactly what the real run would touch now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DryRun {
    pub dry_run: bool,
    pub action: String,
    pub scope: String,
    pub rows: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purge: Option<PurgeCounts>,
}

/// A background job (purge or replay) and its progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub id: u64,
    pub spec: JobSpec,
    pub by: Principal,
    pub created_at: u64,
    pub state: JobState,
    /// Rows the dry run counted when the job was created.
    pub estimate: u64,
    pub progress: JobProgress,
    /// How far a purge has got (committed with each chunk), so a resumed
    /// purge continues where it stopped.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<PurgeCursorJson>"
    )]
    pub cursor: Option<ankusa_store::transitions::PurgeCursor>,
    /// How far a range replay has got (committed with each chunk).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<DlqCursorJson>"
    )]
    pub replay_after: Option<ankusa_store::queries::DlqCursor>,
    /// How far a resume's unpark walk has got (committed with each chunk).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<UnparkCursorJson>"
    )]
    pub unpark: Option<ankusa_store::transitions::UnparkCursor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
    /// The scope as its audit records name it, fixed when the job was
    /// created (a sink by its name then), so its start and end records
    /// say the same. Absent in jobs written before it: the spec's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Done,
    Failed,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    pub purged: PurgeCounts,
    pub replayed: u64,
    /// Parked rows a resume made due again.
    #[serde(default)]
    pub resumed: u64,
}

impl JobProgress {
    pub fn rows(&self) -> u64 {
        self.purged.total() + self.replayed + self.resumed
    }
}

/// What a job does. Each is idempotent, so a job resumed after a crash
/// simply runs again from what is left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum JobSpec {
    Purge {
        tenant: String,
        ord: u32,
        kinds: Kinds,
        /// Hooks newer than this are left alone, so a purge of a tenant
        /// that keeps sending ends.
        max_seq: u64,
    },
    Replay {
        request: ReplayRequest,
        /// The tenant's ordinal when the request names one.
        ord: Option<u32>,
    },
    /// Unparks the rows a sink pause parked, once the pause is lifted.
    Resume {
        #[serde(with = "ScopeJson")]
        scope: ankusa_store::pauses::Scope,
        /// The tenant's ordinal when the scope names one.
        ord: Option<u32>,
    },
}

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// `at.n` cursor of this record (filled when read).
    #[serde(default)]
    pub id: String,
    pub at: u64,
    pub who: Principal,
    /// `purge` or `replay`.
    pub action: String,
    /// Human-readable scope (`tenant acme, kinds pending+dead`).
    pub scope: String,
    pub dry_run: bool,
    /// `dry_run`, `started` (rows: the count it expects), `done` or
    /// `failed` (rows: what it actually touched).
    pub outcome: String,
    /// Rows touched (a dry run or a start: rows it would touch).
    pub rows: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<u64>,
}

/// `GET /v1/admin/audit`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditPage {
    pub records: Vec<AuditRecord>,
    pub next: Option<String>,
}

/// `GET /v1/admin/jobs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobsPage {
    pub jobs: Vec<Job>,
}

/// `POST /v1/admin/pauses` and `POST /v1/admin/pauses/resume`: the scope,
/// a tenant, a sink (`source/sink`, the sink by name or position), or both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
}

/// One pause in force, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseView {
    /// `tenant acme`, `sink shop/0`, `sink shop/0 for tenant acme`.
    pub label: String,
    #[serde(flatten, with = "PauseJson")]
    pub pause: ankusa_store::pauses::Pause,
}

/// `GET /v1/admin/pauses`: every pause the caller may see.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PausesPage {
    pub pauses: Vec<PauseView>,
}

/// What `pause` answered: the pause in force, and whether this call put it
/// there (`false`: it already was).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Paused {
    pub pause: PauseView,
    pub created: bool,
}

/// What `resume` answered: the pause lifted, and the job unparking its
/// rows when the scope names a sink.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Resumed {
    pub pause: PauseView,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Job>,
}

/// One sink of the node, from the store's sink catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkView {
    pub source: String,
    /// Position in the source's sinks (the `sink` of its rows).
    pub index: u16,
    pub name: String,
    /// `scheme://host[:port]`.
    pub endpoint: String,
    /// Paused for every tenant.
    pub paused: bool,
    /// Tenants it is paused for alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paused_for: Vec<String>,
    /// Rows waiting for it, every tenant's (due, retrying or parked): from
    /// the store's per-sink count, so true with or without a daemon.
    /// Absent for a tenant-scoped caller, and on a store an earlier release
    /// wrote until a daemon has booted on it (which counts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<i64>,
    /// How its deliveries have gone: present when a daemon answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<SinkHealth>,
    /// Limits an operator set at run time (`ankusa sinks limit`), over
    /// its configuration's.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<SinkLimitsJson>"
    )]
    pub limits: Option<SinkLimits>,
}

/// A sink's deliveries as the running daemon has seen them since it
/// started (none of it is stored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkHealth {
    /// Attempts in progress.
    pub inflight: u64,
    /// Attempts that delivered / failed in the last 60 seconds.
    pub delivered_1m: u64,
    pub failed_1m: u64,
    /// The last answer's status (0: no answer) and, when it failed, why.
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    pub last_attempt_at: Option<u64>,
    pub last_success_at: Option<u64>,
    /// Failed attempts since the last success.
    pub consecutive_failures: u64,
    /// Over the last 512 attempts (ms).
    pub latency_p50_ms: Option<u64>,
    pub latency_p99_ms: Option<u64>,
    /// Tenants whose deliveries to it failed last, most recent first (8 at
    /// most).
    pub failing_tenants: Vec<String>,
    /// The sink's circuit breaker, when it has one configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerView>,
}

/// Where a sink's circuit breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Deliveries flow; failures are being counted.
    Closed,
    /// The sink is paused (its rows park) until `next_probe_at`. Also the
    /// state from a trip until its pause is written, and from a successful
    /// probe until its pause is lifted.
    Open,
    /// One probe delivery (a real row) decides: success closes, failure
    /// opens again with the backoff doubled.
    HalfOpen,
}

/// A sink's circuit breaker (`[sources.sinks.breaker]`), as this daemon
/// runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerView {
    pub state: BreakerState,
    /// When it opened (ms); kept through half-open and re-opens, `None`
    /// when closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_at: Option<u64>,
    /// When the next probe may go (ms), while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_probe_at: Option<u64>,
    /// The current backoff (ms): `open_for`, doubled by each failed probe up
    /// to `open_max`.
    pub backoff_ms: u64,
    /// Times this daemon tripped it.
    pub trips: u64,
    /// Why it last tripped, e.g. "5 consecutive failures".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `GET /v1/admin/sinks`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SinksPage {
    pub sinks: Vec<SinkView>,
}

/// `GET /v1/admin/node`: whether the node drains and what it still owes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    /// The node's id in the fleet (docs/fleet.md); none on a store no
    /// daemon with node ids has booted yet.
    pub node: Option<ankusa_store::NodeId>,
    /// Present while the node drains.
    #[serde(default, with = "Opt::<DrainJson>")]
    pub draining: Option<ankusa_store::node::Drain>,
    /// Rows it still owes a delivery: pending, scheduled and inflight.
    pub owed: u64,
    /// Dead rows (kept through a drain).
    pub dead: u64,
    /// Nothing owed: a draining node can be stopped with nothing lost.
    pub empty: bool,
}

/// One sample of the node's last hour (`GET /v1/admin/history`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySample {
    /// When it was taken (ms).
    pub at: u64,
    /// The node's cumulative totals then.
    #[serde(with = "TotalsJson")]
    pub totals: ankusa_store::counters::Totals,
    /// Rows waiting (pending + scheduled).
    pub backlog: i64,
    /// How overdue the oldest due row was (0: none).
    pub oldest_due_age_ms: u64,
}

/// `GET /v1/admin/history`: the daemon's samples of the node, oldest
/// first, one per `step_ms`, an hour at most (kept in memory only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeHistory {
    pub step_ms: u64,
    pub samples: Vec<HistorySample>,
}

/// `POST /v1/admin/node/backup`: take a backup into `to` (an absolute
/// directory, created if missing), then keep this node's newest `keep`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupRequest {
    pub to: std::path::PathBuf,
    #[serde(default)]
    pub keep: Option<usize>,
}

/// A backup written ([`crate::backup::take`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupDone {
    /// The backup's directory.
    pub path: String,
    /// Its name in the backups directory (time, then node).
    pub name: String,
    /// The node it belongs to (none for a store without an id).
    pub node: Option<String>,
    /// When the checkpoint was taken (ms since the epoch).
    pub taken_at: u64,
    pub files: u64,
    /// Bytes of its files (hard links to the store's own files when on the
    /// store's filesystem: those cost no space).
    pub bytes: u64,
    /// This node's older backups deleted by the retention.
    pub removed: Vec<String>,
    /// Partial backups a crash had left, removed first.
    pub cleaned: Vec<String>,
}

/// A backup copied into a store directory ([`crate::backup::restore`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    pub store: String,
    pub from: String,
    /// The node identity the store carries (from the backup).
    pub node: Option<String>,
    /// When the backup was taken (ms since the epoch).
    pub taken_at: u64,
    pub files: u64,
    pub bytes: u64,
    /// The seq of the next hook: [`crate::backup::SEQ_GAP`] past the
    /// backup's, so no id the lost store minted after it is minted again.
    pub next_seq: u64,
}

/// One difference between the daemon's configuration and a new file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigChange {
    /// `added`, `removed` or `changed`.
    pub kind: String,
    /// `source`, `sink`, `admin token` or `admin`.
    pub what: String,
    /// The source id, `SOURCE/NAME` of a sink, or the token's name.
    pub name: String,
    /// What changed in it (secrets are named, never shown).
    #[serde(default)]
    pub details: Vec<String>,
}

/// `POST /v1/admin/config:reload` (applied) and `config:check` (not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReloadReport {
    pub applied: bool,
    /// The daemon's configuration file (the one a reload re-reads).
    pub file: String,
    /// The configuration's generation in force after the call: 0 at boot,
    /// one more per applied reload.
    pub generation: u64,
    pub changes: Vec<ConfigChange>,
}

/// `POST /v1/admin/config:check`: a candidate file, compared with the
/// daemon's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigCheckRequest {
    /// The file's text.
    pub text: String,
}
