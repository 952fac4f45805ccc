//! Purge and replay: dry runs, and real runs as resumable, audited jobs.
//!
//! Invariants:
//! - A dry run counts exactly what the real run would touch if nothing
//!   else changed in between (purge: the tenant's counters, which equal the
//!   rows by the store's invariant; replay: the same walk as the real run,
//!   without the writes). It writes an audit row too.
//! - A job is created by one synced batch holding its record and its
//!   `started` audit row, so no destructive work runs unaudited.
//! - Each chunk of work commits the job's updated record in the same batch
//!   as the rows it moved: after a crash the record's progress is exactly
//!   what was done, and resuming continues from what is left (both actions
//!   are idempotent: purged rows are gone, replayed rows are no longer
//!   dead).
//! - A purge leaves hooks newer than the job (by seq) alone and a replay
//!   of a tenant takes only rows dead-lettered before the job, so a job
//!   on a busy tenant ends.
//! - Chunks hold the row lock ([`crate::rowlock`]), so a
//!   job never races the dispatcher's claim or another job for a row.

use std::sync::atomic::{AtomicBool, Ordering};

use ankusa_store::transitions::{self, PurgeKinds};
use ankusa_store::{audit, jobs as stored, queries, Batch, NodeIdentity, Store};

use crate::access::Principal;
use crate::model::{
    AuditPage, AuditRecord, DryRun, Job, JobProgress, JobSpec, JobState, Kinds, PurgeCounts,
    ReplayRequest,
};
use crate::replay::{self, Pick, Scope};
use crate::{OpsError, Result};

/// Jobs looked at when listing or resuming (newest first).
pub const JOBS_SCANNED: usize = 1000;

/// Hook ids one replay may name.
pub const MAX_IDS: usize = 1000;

/// Held from reading the next job id to committing the job, so two jobs
/// created at once never get the same id (one process writes a store).
static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn internal(e: impl std::fmt::Display) -> OpsError {
    OpsError::Internal(e.to_string())
}

pub(crate) fn writable(store: &Store) -> Result<()> {
    if matches!(store.mode(), ankusa_store::Mode::Primary) {
        Ok(())
    } else {
        Err(OpsError::Conflict(
            "the store is open read-only here: purge, replay, pause and resume need the daemon, or the store opened as its writer".into(),
        ))
    }
}

/// Parses `pending,dead` style kinds.
pub fn parse_kinds(list: &[String]) -> Result<Kinds> {
    let mut k = Kinds {
        pending: false,
        dead: false,
    };
    for s in list.iter().flat_map(|s| s.split(',')).map(str::trim) {
        match s {
            "pending" => k.pending = true,
            "dead" => k.dead = true,
            "" => {}
            other => {
                return Err(OpsError::BadRequest(format!(
                    "unknown kind {other:?}: purge kinds are pending (due rows, first attempts and retries) and dead"
                )))
            }
        }
    }
    if !k.pending && !k.dead {
        return Err(OpsError::BadRequest(
            "name the kinds to purge: pending, dead or both".into(),
        ));
    }
    Ok(k)
}

fn purge_scope(tenant: &str, k: Kinds) -> String {
    format!("tenant {tenant}, kinds {}", k.label())
}

/// A job's action and scope, as its audit records name them.
fn action_scope(job: &Job) -> (&'static str, String) {
    let (action, words) = match &job.spec {
        JobSpec::Purge { tenant, kinds, .. } => ("purge", purge_scope(tenant, *kinds)),
        JobSpec::Replay { request, .. } => ("replay", replay_label(request)),
        JobSpec::Resume { scope, .. } => ("resume", scope.to_string()),
    };
    (action, job.scope_label.clone().unwrap_or(words))
}

/// What a job does, in words: `purge tenant acme, kinds pending+dead`.
pub fn describe(job: &Job) -> String {
    let (action, scope) = action_scope(job);
    format!("{action} {scope}")
}

/// What a purge of `tenant` would remove now: its counters.
fn purge_counts(store: &Store, ord: u32, k: Kinds) -> Result<PurgeCounts> {
    let c = queries::counters(store, ord)?;
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(PurgeCounts {
        pending: if k.pending { n(c.pending) } else { 0 },
        scheduled: if k.pending { n(c.scheduled) } else { 0 },
        dead: if k.dead { n(c.dead) } else { 0 },
    })
}

/// A replay request resolved against the store and the caller's scope.
struct ResolvedReplay {
    scope: Scope,
    ord: Option<u32>,
    label: String,
}

fn resolve_replay(
    store: &Store,
    who: &Principal,
    req: &ReplayRequest,
    now: u64,
) -> Result<ResolvedReplay> {
    let ranged = req.from.is_some() || req.to.is_some();
    if !req.ids.is_empty() || !req.rows.is_empty() {
        if req.tenant.is_some() || ranged {
            return Err(OpsError::BadRequest(
                "replay by ids and rows, or by tenant and/or time range, not both".into(),
            ));
        }
        let named = req.ids.len() + req.rows.len();
        if named > MAX_IDS {
            return Err(OpsError::BadRequest(format!(
                "at most {MAX_IDS} hook ids and rows per replay (got {named}); replay by tenant or time range instead"
            )));
        }
        // A row named twice would be revived twice in one batch and
        // counted out of `dead` twice.
        let mut picks = parse_picks(store.node(), req)?;
        replay::normalize(&mut picks);
        // A scoped caller's picks reach its own tenant's rows only; another
        // tenant's hook counts as nothing, exactly like a missing one, so
        // the answer says nothing about other tenants.
        let tenant = match &who.tenant {
            Some(own) => Some(who.tenant_ord(store, own)?),
            None => None,
        };
        let label = replay_label(&picked_request(store.node(), &picks));
        return Ok(ResolvedReplay {
            scope: Scope::Picked {
                picks,
                tenant,
                before: now.saturating_add(1),
            },
            ord: tenant,
            label,
        });
    }
    let tenant = req.tenant.as_deref().or(who.tenant.as_deref());
    let ord = match tenant {
        Some(t) => Some(who.tenant_ord(store, t)?),
        None => None,
    };
    if ord.is_none() && !ranged {
        return Err(OpsError::BadRequest(
            "name what to replay: ids, a tenant, or a time range (from/to)".into(),
        ));
    }
    let from = req.from.unwrap_or(0);
    // Rows dead-lettered after the request are not part of it (even when
    // `to` asks for the future): the bound makes a replay of a failing
    // tenant end instead of replaying its rows each time they die again.
    let to = req.to.unwrap_or(u64::MAX).min(now.saturating_add(1));
    if to <= from {
        return Err(OpsError::BadRequest(format!(
            "empty time range: from {from} is not before to {to}"
        )));
    }
    let label = replay_label(&ReplayRequest {
        tenant: tenant.map(str::to_owned),
        from: Some(from),
        to: Some(to),
        ..ReplayRequest::default()
    });
    Ok(ResolvedReplay {
        scope: Scope::Range {
            from,
            to,
            tenant: ord,
            after: None,
        },
        ord,
        label,
    })
}

fn audit_batch(b: &mut Batch, rec: &AuditRecord) -> Result<()> {
    let bytes = serde_json::to_vec(rec).map_err(internal)?;
    audit::append(b, rec.at, &bytes);
    Ok(())
}

/// Adds an audit record of a one-step action (pause, resume, a sink
/// dropped by a reload) to `b`.
pub fn audit_in(
    b: &mut Batch,
    who: &Principal,
    action: &str,
    scope: &str,
    outcome: &str,
    rows: u64,
    at: u64,
) -> Result<()> {
    audit_batch(b, &record(who, action, scope, outcome, rows, at, None))
}

/// Audits a maintenance action run directly on a stopped store (`store
/// repair`, `store quarantine drop`): one record, synced. `outcome` is
/// `dry_run`, `done` or `failed`; `rows` what it changed (or would).
pub fn audit_store_action(
    store: &Store,
    who: &Principal,
    action: &str,
    scope: &str,
    outcome: &str,
    rows: u64,
    at: u64,
) -> Result<()> {
    let mut b = Batch::new();
    audit_batch(&mut b, &record(who, action, scope, outcome, rows, at, None))?;
    store.commit(b, true)?;
    Ok(())
}

fn put_job(b: &mut Batch, job: &Job) -> Result<()> {
    let bytes = serde_json::to_vec(job).map_err(internal)?;
    stored::put(b, job.id, &bytes);
    Ok(())
}

fn record(
    who: &Principal,
    action: &str,
    scope: &str,
    outcome: &str,
    rows: u64,
    at: u64,
    job: Option<u64>,
) -> AuditRecord {
    AuditRecord {
        id: String::new(),
        at,
        who: who.clone(),
        action: action.to_owned(),
        scope: scope.to_owned(),
        dry_run: outcome == "dry_run",
        outcome: outcome.to_owned(),
        rows,
        job,
    }
}

/// A purge dry run: counts, and an audit row.
pub fn dry_run_purge(
    store: &Store,
    who: &Principal,
    tenant: &str,
    k: Kinds,
    now: u64,
) -> Result<DryRun> {
    writable(store)?;
    let ord = who.tenant_ord(store, tenant)?;
    let counts = purge_counts(store, ord, k)?;
    let scope = purge_scope(tenant, k);
    let mut b = Batch::new();
    audit_batch(
        &mut b,
        &record(who, "purge", &scope, "dry_run", counts.total(), now, None),
    )?;
    store.commit(b, true)?;
    Ok(DryRun {
        dry_run: true,
        action: "purge".into(),
        scope,
        rows: counts.total(),
        purge: Some(counts),
    })
}

/// A replay dry run: the real walk without the writes, and an audit row.
pub fn dry_run_replay(
    store: &Store,
    who: &Principal,
    req: &ReplayRequest,
    now: u64,
) -> Result<DryRun> {
    writable(store)?;
    let r = resolve_replay(store, who, req, now)?;
    let counted = replay::replay(store, &r.scope, now, true, u64::MAX, |_| {})?;
    let mut b = Batch::new();
    audit_batch(
        &mut b,
        &record(
            who,
            "replay",
            &r.label,
            "dry_run",
            counted.matched,
            now,
            None,
        ),
    )?;
    store.commit(b, true)?;
    Ok(DryRun {
        dry_run: true,
        action: "replay".into(),
        scope: r.label,
        rows: counted.matched,
        purge: None,
    })
}

fn create(
    store: &Store,
    who: &Principal,
    spec: JobSpec,
    scope: &str,
    estimate: u64,
    now: u64,
) -> Result<Job> {
    create_with(store, who, spec, scope, estimate, now, |_| Ok(()))
}

/// Creates a job with `extra` operations in its first batch (a resume
/// lifts its pause there).
pub(crate) fn create_with(
    store: &Store,
    who: &Principal,
    spec: JobSpec,
    scope: &str,
    estimate: u64,
    now: u64,
    extra: impl FnOnce(&mut Batch) -> Result<()>,
) -> Result<Job> {
    let _one_at_a_time = CREATING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let id = stored::next_id(store)?;
    let job = Job {
        id,
        spec,
        by: who.clone(),
        created_at: now,
        state: JobState::Running,
        estimate,
        progress: JobProgress::default(),
        cursor: None,
        replay_after: None,
        unpark: None,
        finished_at: None,
        scope_label: Some(scope.to_owned()),
        error: None,
    };
    let (action, _) = action_scope(&job);
    let mut b = Batch::new();
    extra(&mut b)?;
    put_job(&mut b, &job)?;
    audit_batch(
        &mut b,
        &record(who, action, scope, "started", estimate, now, Some(id)),
    )?;
    store.commit(b, true)?;
    Ok(job)
}

/// Creates a purge job (not yet run): its record and `started` audit row.
pub fn start_purge(
    store: &Store,
    who: &Principal,
    tenant: &str,
    k: Kinds,
    now: u64,
) -> Result<Job> {
    writable(store)?;
    let ord = who.tenant_ord(store, tenant)?;
    let estimate = purge_counts(store, ord, k)?.total();
    // Hooks ingested from now on get larger seqs and are not purged.
    let max_seq = store.next_seq()?.saturating_sub(1);
    let spec = JobSpec::Purge {
        tenant: tenant.to_owned(),
        ord,
        kinds: k,
        max_seq,
    };
    create(store, who, spec, &purge_scope(tenant, k), estimate, now)
}

/// Creates a replay job (not yet run). Time bounds are fixed now, so a
/// resumed job replays the same selection.
pub fn start_replay(store: &Store, who: &Principal, req: &ReplayRequest, now: u64) -> Result<Job> {
    writable(store)?;
    let r = resolve_replay(store, who, req, now)?;
    let estimate = replay::replay(store, &r.scope, now, true, u64::MAX, |_| {})?.matched;
    let mut fixed = req.clone();
    fixed.dry_run = false;
    match &r.scope {
        Scope::Range { from, to, .. } => {
            fixed.from = Some(*from);
            fixed.to = Some(*to);
        }
        Scope::Picked { picks, before, .. } => {
            let named = picked_request(store.node(), picks);
            fixed.ids = named.ids;
            fixed.rows = named.rows;
            fixed.to = Some(*before);
        }
    }
    let spec = JobSpec::Replay {
        request: fixed,
        ord: r.ord,
    };
    create(store, who, spec, &r.label, estimate, now)
}

/// Runs a job until it is done, fails, or `stop` is set (then it stays
/// `running` and the next [`resume_all`] picks it up). `progress` sees the
/// job after each committed chunk.
pub fn run(
    store: &Store,
    mut job: Job,
    now: &dyn Fn() -> u64,
    stop: &AtomicBool,
    mut progress: impl FnMut(&Job),
) -> Result<Job> {
    let outcome = match job.spec.clone() {
        JobSpec::Purge {
            ord,
            kinds,
            max_seq,
            ..
        } => run_purge(store, &mut job, ord, kinds, max_seq, stop, &mut progress),
        JobSpec::Replay { request, ord } => {
            run_replay(store, &mut job, &request, ord, now, stop, &mut progress)
        }
        JobSpec::Resume { scope, ord } => {
            run_resume(store, &mut job, &scope, ord, now, stop, &mut progress)
        }
    };
    let finished = match outcome {
        Ok(true) => JobState::Done,
        Ok(false) => return Ok(job),
        Err(e) => {
            job.error = Some(e.to_string());
            JobState::Failed
        }
    };
    job.state = finished;
    let at = now();
    job.finished_at = Some(at);
    let (action, scope) = action_scope(&job);
    let outcome = if finished == JobState::Done {
        "done"
    } else {
        "failed"
    };
    let mut b = Batch::new();
    put_job(&mut b, &job)?;
    audit_batch(
        &mut b,
        &record(
            &job.by,
            action,
            &scope,
            outcome,
            job.progress.rows(),
            at,
            Some(job.id),
        ),
    )?;
    store.commit(b, true)?;
    progress(&job);
    Ok(job)
}

/// Rows named in a replay's scope label before the rest is counted.
const ROWS_LISTED: usize = 5;

/// The scope of a replay in words: exactly what it names. Picks list their
/// rows (the first [`ROWS_LISTED`]), so the audit log says which rows.
fn replay_label(r: &ReplayRequest) -> String {
    if !r.ids.is_empty() || !r.rows.is_empty() {
        let mut parts = Vec::new();
        if !r.ids.is_empty() {
            parts.push(format!(
                "{} hook id(s), each with every dead sink",
                r.ids.len()
            ));
        }
        if !r.rows.is_empty() {
            let mut listed: Vec<String> = r.rows.iter().take(ROWS_LISTED).cloned().collect();
            if r.rows.len() > ROWS_LISTED {
                listed.push(format!("and {} more", r.rows.len() - ROWS_LISTED));
            }
            parts.push(format!(
                "{} dead row(s) {}",
                r.rows.len(),
                listed.join(", ")
            ));
        }
        return parts.join("; ");
    }
    let mut s = match &r.tenant {
        Some(t) => format!("tenant {t}"),
        None => "all tenants".to_owned(),
    };
    // A time past what the clock can show (a typed `to` of u64::MAX)
    // prints as its number rather than overflowing.
    let at = |ms: u64| match std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_millis(ms))
    {
        Some(t) if ms < 253_402_300_800_000 => humantime::format_rfc3339_millis(t).to_string(),
        _ => format!("{ms} ms"),
    };
    match (r.from, r.to) {
        (Some(0) | None, Some(t)) => s.push_str(&format!(", dead-lettered before {}", at(t))),
        (Some(f), Some(t)) => s.push_str(&format!(", dead-lettered from {} to {}", at(f), at(t))),
        (Some(f), None) => s.push_str(&format!(", dead-lettered from {}", at(f))),
        (None, None) => {}
    }
    s
}

fn run_purge(
    store: &Store,
    job: &mut Job,
    ord: u32,
    k: Kinds,
    max_seq: u64,
    stop: &AtomicBool,
    progress: &mut impl FnMut(&Job),
) -> Result<bool> {
    let kinds = PurgeKinds {
        pending: k.pending,
        dead: k.dead,
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let mut encode_err = None;
        let mut cursor = job.cursor.unwrap_or_default();
        let (n, done) = {
            let _rows = crate::rowlock::hold();
            let base = job.clone();
            transitions::purge_tenant_chunk(
                store,
                ord,
                kinds,
                max_seq,
                &mut cursor,
                |b, n, at, _| {
                    let mut next = base;
                    add_purged(&mut next.progress, n);
                    next.cursor = Some(*at);
                    if let Err(e) = put_job(b, &next) {
                        encode_err = Some(e);
                    }
                },
            )?
        };
        add_purged(&mut job.progress, &n);
        job.cursor = Some(cursor);
        if let Some(e) = encode_err {
            return Err(e);
        }
        progress(job);
        if done {
            return Ok(true);
        }
    }
}

fn run_resume(
    store: &Store,
    job: &mut Job,
    scope: &ankusa_store::pauses::Scope,
    ord: Option<u32>,
    now: &dyn Fn() -> u64,
    stop: &AtomicBool,
    progress: &mut impl FnMut(&Job),
) -> Result<bool> {
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let mut cursor = job.unpark.unwrap_or_default();
        let base = job.clone();
        let mut encode_err = None;
        let u = crate::unpark::chunk(store, scope, ord, &mut cursor, now(), |b, u, next| {
            let mut rec = base;
            rec.progress.resumed += u.rows;
            rec.unpark = Some(*next);
            if let Err(e) = put_job(b, &rec) {
                encode_err = Some(e);
            }
        })?;
        if let Some(e) = encode_err {
            return Err(e);
        }
        job.progress.resumed += u.rows;
        job.unpark = Some(cursor);
        progress(job);
        if u.done {
            return Ok(true);
        }
    }
}

fn add_purged(p: &mut JobProgress, n: &transitions::PurgeCount) {
    p.purged.pending += n.pending;
    p.purged.scheduled += n.scheduled;
    p.purged.dead += n.dead;
}

fn run_replay(
    store: &Store,
    job: &mut Job,
    req: &ReplayRequest,
    ord: Option<u32>,
    now: &dyn Fn() -> u64,
    stop: &AtomicBool,
    progress: &mut impl FnMut(&Job),
) -> Result<bool> {
    let ranged = req.ids.is_empty() && req.rows.is_empty();
    let mut scope = if ranged {
        Scope::Range {
            from: req.from.unwrap_or(0),
            to: req.to.unwrap_or(u64::MAX),
            tenant: ord,
            after: job.replay_after,
        }
    } else {
        // Fixed when the job was created: already normalized.
        Scope::Picked {
            picks: parse_picks(store.node(), req)?,
            tenant: ord,
            before: req.to.unwrap_or(u64::MAX),
        }
    };
    // Rounds of one chunk each, so a stop request is seen between chunks;
    // a round that finds nothing dead in scope ends the job.
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let base = job.clone();
        let mut encode_err = None;
        let r = replay::replay_with(
            store,
            &scope,
            now(),
            false,
            transitions::CHUNK as u64,
            |_| {},
            |b, r| {
                let mut next = base.clone();
                next.progress.replayed += r.revived;
                if ranged {
                    next.replay_after = r.resume.or(base.replay_after);
                }
                if let Err(e) = put_job(b, &next) {
                    encode_err = Some(e);
                }
            },
        )?;
        job.progress.replayed += r.revived;
        if let Some(e) = encode_err {
            return Err(e);
        }
        // The next round continues after the last row this one took.
        if let (Scope::Range { after, .. }, Some(at)) = (&mut scope, r.resume) {
            *after = Some(at);
            job.replay_after = Some(at);
        }
        progress(job);
        if r.matched == 0 {
            return Ok(true);
        }
    }
}

/// A replay's hook ids (each: every dead sink) and rows (`hk_...:SINK`:
/// that sink's row) as picks, on the node `node`.
fn parse_picks(node: Option<&NodeIdentity>, req: &ReplayRequest) -> Result<Vec<Pick>> {
    let mut picks = Vec::with_capacity(req.ids.len() + req.rows.len());
    for s in &req.ids {
        picks.push(Pick {
            hook: crate::reads::parse_hook_id(s, node)?,
            sink: None,
        });
    }
    for s in &req.rows {
        picks.push(parse_row(s, node)?);
    }
    Ok(picks)
}

/// Parses a dead row's name ([`crate::model::row_name`]): a hook id of the
/// node `node`, `:`, the sink.
pub fn parse_row(s: &str, node: Option<&NodeIdentity>) -> Result<Pick> {
    let bad = || {
        OpsError::BadRequest(format!(
            "{s:?} is not a dead row: a hook id, a colon and a sink (hk_0000000000000001:0)"
        ))
    };
    let (hook, sink) = s.split_once(':').ok_or_else(bad)?;
    let sink: u16 = sink.parse().map_err(|_| bad())?;
    if sink >= replay::MAX_SINKS {
        return Err(bad());
    }
    Ok(Pick {
        hook: crate::reads::parse_hook_id(hook, node)?,
        sink: Some(sink),
    })
}

/// The names of `picks`, as a request carries them.
fn picked_request(node: Option<&NodeIdentity>, picks: &[Pick]) -> ReplayRequest {
    let mut r = ReplayRequest::default();
    for p in picks {
        match p.sink {
            None => r.ids.push(p.hook.public(node)),
            Some(sink) => r
                .rows
                .push(crate::model::row_name(&p.hook.public(node), sink)),
        }
    }
    r
}

fn decode(id: u64, bytes: &[u8]) -> Result<Job> {
    serde_json::from_slice(bytes)
        .map_err(|e| OpsError::Internal(format!("job {id}: unreadable record: {e}")))
}

/// One job, if the caller may see it (its own, or any for an admin).
pub fn get(store: &Store, who: &Principal, id: u64) -> Result<Job> {
    let missing = || OpsError::NotFound(format!("no job {id}"));
    let bytes = stored::get(store, id)?.ok_or_else(missing)?;
    let job = decode(id, &bytes)?;
    if !who.is_admin() && (job.by.name != who.name || job.by.tenant != who.tenant) {
        return Err(missing());
    }
    Ok(job)
}

/// The newest jobs the caller may see.
pub fn list(store: &Store, who: &Principal, limit: usize) -> Result<Vec<Job>> {
    let limit = crate::reads::page_size(limit)?;
    let mut out = Vec::new();
    for (id, bytes) in stored::list(store, JOBS_SCANNED)? {
        let job = decode(id, &bytes)?;
        if who.is_admin() || (job.by.name == who.name && job.by.tenant == who.tenant) {
            out.push(job);
            if out.len() >= limit {
                break;
            }
        }
    }
    Ok(out)
}

/// Jobs a previous process left running (among the newest
/// [`JOBS_SCANNED`]), oldest first.
pub fn unfinished(store: &Store) -> Result<Vec<Job>> {
    let mut out = Vec::new();
    for (id, bytes) in stored::list(store, JOBS_SCANNED)? {
        let job = decode(id, &bytes)?;
        if job.state == JobState::Running {
            out.push(job);
        }
    }
    out.reverse();
    Ok(out)
}

/// The audit log, newest first (admin only).
pub fn audit_page(
    store: &Store,
    who: &Principal,
    cursor: Option<&str>,
    limit: usize,
) -> Result<AuditPage> {
    who.require_admin("the audit log")?;
    let limit = crate::reads::page_size(limit)?;
    let before = match cursor {
        Some(c) => Some(
            audit::AuditKey::parse_cursor(c)
                .ok_or_else(|| OpsError::BadRequest(format!("bad cursor {c:?}")))?,
        ),
        None => None,
    };
    let rows = audit::page(store, before, limit)?;
    let next = (rows.len() == limit)
        .then(|| rows.last().map(|r| r.key.cursor()))
        .flatten();
    let mut records = Vec::with_capacity(rows.len());
    for r in rows {
        let mut rec: AuditRecord = serde_json::from_slice(&r.record)
            .map_err(|e| OpsError::Internal(format!("audit record {}: {e}", r.key.cursor())))?;
        rec.id = r.key.cursor();
        records.push(rec);
    }
    Ok(AuditPage { records, next })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::tenants::TenantAllocator;

    #[test]
    fn a_row_is_named_by_hook_and_sink_and_the_label_lists_it() {
        let row = |s: u16| Pick {
            hook: ankusa_store::HookId(1),
            sink: Some(s),
        };
        assert_eq!(parse_row("hk_0000000000000001:1", None).unwrap(), row(1));
        for bad in [
            "hk_0000000000000001",
            "hk_0000000000000001:",
            "hk_0000000000000001:x",
            "hk_0000000000000001:64",
            "nope:1",
        ] {
            assert!(
                matches!(parse_row(bad, None), Err(OpsError::BadRequest(_))),
                "{bad}"
            );
        }
        let named = picked_request(None, &[row(1)]);
        assert_eq!(named.rows, ["hk_0000000000000001:1"]);
        assert_eq!(replay_label(&named), "1 dead row(s) hk_0000000000000001:1");
        let whole = Pick {
            hook: ankusa_store::HookId(2),
            sink: None,
        };
        assert_eq!(
            replay_label(&picked_request(None, &[row(0), whole])),
            "1 hook id(s), each with every dead sink; 1 dead row(s) hk_0000000000000001:0"
        );
    }

    #[test]
    fn jobs_created_at_once_get_distinct_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut alloc = TenantAllocator::load(&store, 100).unwrap();
        let mut b = Batch::new();
        let res = alloc.resolve(&store, ["a"], &mut b).unwrap();
        store.commit(b, true).unwrap();
        alloc.committed(res);
        let who = Principal::local(&crate::access::Peer::me());
        let kinds = Kinds {
            pending: true,
            dead: true,
        };
        let ids: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| start_purge(&store, &who, "a", kinds, 1_000).unwrap().id))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 8, "{ids:?}");
        assert_eq!(list(&store, &who, 100).unwrap().len(), 8);
    }
}
