//! Pause and resume: of a tenant, of a sink, of a sink for one tenant.
//!
//! A pause keeps a scope's rows queued and unclaimed (the dispatcher skips a
//! paused tenant and parks the rows of a paused sink; see
//! `ankusa_store::pauses`); resuming makes them due at once. Both are
//! audited; a tenant-scoped caller may pause and resume its own tenant and
//! a sink for its own tenant, never a sink for everyone.
//!
//! Invariants:
//! - A pause is one synced batch: the pause record and its audit row.
//! - A resume deletes the pause in the batch that records it: for a sink
//!   scope, the batch that creates the job unparking its rows, so a crash
//!   after the resume leaves a running job (resumed at the next boot or
//!   command), never parked rows with no pause and no job.
//! - Pausing what is already paused changes nothing and says so.

use ankusa_store::pauses::{self, Origin, Pause, Scope, SinkRef};
use ankusa_store::{queries, sinks, transitions, Batch, Store};

use crate::access::Principal;
use crate::model::{JobSpec, PauseRequest, PauseView, Paused, PausesPage, Resumed};
use crate::{jobs, OpsError, Result};

/// Splits `source/sink` and resolves the sink (a name or a position)
/// against the store's sink catalog.
pub fn resolve_sink(store: &Store, name: &str) -> Result<SinkRef> {
    let Some((source, sink)) = name.split_once('/') else {
        return Err(OpsError::BadRequest(format!(
            "sink {name:?}: name a sink as SOURCE/SINK (the sink by its name or position), e.g. shop/0"
        )));
    };
    let catalog = sinks::catalog(store)?;
    match sinks::resolve(&catalog, source, sink) {
        Some(e) => Ok(SinkRef {
            source: e.source,
            sink: e.index,
        }),
        None => Err(OpsError::NotFound(format!(
            "no sink {name:?}: `ankusa sinks list` names the node's sinks"
        ))),
    }
}

/// The scope a request names, checked against the caller.
pub fn scope_of(
    store: &Store,
    who: &Principal,
    req: &PauseRequest,
) -> Result<(Scope, Option<u32>)> {
    let ord = match &req.tenant {
        Some(t) => Some(who.tenant_ord(store, t)?),
        None => None,
    };
    let sink = match &req.sink {
        Some(s) => Some(resolve_sink(store, s)?),
        None => None,
    };
    match (&req.tenant, &sink) {
        (None, None) => Err(OpsError::BadRequest(
            "name what to pause or resume: a tenant, a sink (SOURCE/SINK), or both".into(),
        )),
        (None, Some(_)) => {
            who.require_admin("pausing or resuming a sink for every tenant")?;
            Ok((Scope { tenant: None, sink }, None))
        }
        (Some(t), _) => Ok((
            Scope {
                tenant: Some(t.clone()),
                sink,
            },
            ord,
        )),
    }
}

fn view(pause: Pause) -> PauseView {
    PauseView {
        label: pause.scope.to_string(),
        pause,
    }
}

/// Every pause the caller may see: an admin all of them; a tenant caller
/// those of its tenant and the node-wide sink pauses that hold its rows.
pub fn list(store: &Store, who: &Principal) -> Result<PausesPage> {
    let pauses = pauses::list(store)?
        .into_iter()
        .filter(|p| match (&who.tenant, &p.scope.tenant) {
            (None, _) | (Some(_), None) => true,
            (Some(own), Some(t)) => own == t,
        })
        .map(view)
        .collect();
    Ok(PausesPage { pauses })
}

/// Which of `ids` are paused as a whole (a tenants page's PAUSED badges):
/// one read of the pauses, which are bounded ([`pauses::MAX_PAUSES`]).
pub fn paused_among<'a>(
    store: &Store,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>> {
    let paused: std::collections::HashSet<String> = pauses::list(store)?
        .into_iter()
        .filter(|p| p.scope.sink.is_none())
        .filter_map(|p| p.scope.tenant)
        .collect();
    Ok(ids
        .into_iter()
        .filter(|t| paused.contains(*t))
        .map(str::to_owned)
        .collect())
}

/// The pauses that hold `tenant`'s rows: of the tenant, of a sink for it,
/// and of a sink for every tenant (a tenant detail's header).
pub fn holding(store: &Store, tenant: &str) -> Result<Vec<PauseView>> {
    Ok(pauses::list(store)?
        .into_iter()
        .filter(|p| p.scope.tenant.as_deref().is_none_or(|t| t == tenant))
        .map(view)
        .collect())
}

/// Whether `tenant` is paused as a whole (the PAUSED badge).
pub fn tenant_paused(store: &Store, tenant: &str) -> Result<bool> {
    Ok(pauses::get(store, &Scope::tenant(tenant))?.is_some())
}

/// Puts a pause in force (audited), or answers the one already there.
pub fn pause(store: &Store, who: &Principal, req: &PauseRequest, now: u64) -> Result<Paused> {
    jobs::writable(store)?;
    let (scope, _) = scope_of(store, who, req)?;
    put(store, who, scope, Origin::Operator, now)
}

/// The one way a pause is written, by an operator or the circuit breaker.
pub fn put(
    store: &Store,
    who: &Principal,
    scope: Scope,
    origin: Origin,
    now: u64,
) -> Result<Paused> {
    if let Some(p) = pauses::get(store, &scope)? {
        return Ok(Paused {
            pause: view(p),
            created: false,
        });
    }
    if pauses::list(store)?.len() >= pauses::MAX_PAUSES {
        return Err(OpsError::Conflict(format!(
            "{} pauses are in force, the most a node keeps: resume some first",
            pauses::MAX_PAUSES
        )));
    }
    let pause = Pause {
        scope,
        at: now,
        origin,
        by: who.name.clone(),
    };
    let mut b = Batch::new();
    pauses::put(&mut b, &pause)?;
    jobs::audit_in(
        &mut b,
        who,
        "pause",
        &pause.scope.to_string(),
        "done",
        0,
        now,
    )?;
    store.commit(b, true)?;
    Ok(Paused {
        pause: view(pause),
        created: true,
    })
}

/// Lifts a pause (audited). A sink scope also starts the job that unparks
/// its rows; run it with [`crate::operator::Operator::finish`].
pub fn resume(store: &Store, who: &Principal, req: &PauseRequest, now: u64) -> Result<Resumed> {
    jobs::writable(store)?;
    let (scope, ord) = scope_of(store, who, req)?;
    lift(store, who, scope, ord, now)
}

/// The one way a pause is lifted, by an operator or the circuit breaker.
pub fn lift(
    store: &Store,
    who: &Principal,
    scope: Scope,
    ord: Option<u32>,
    now: u64,
) -> Result<Resumed> {
    let Some(pause) = pauses::get(store, &scope)? else {
        return Err(OpsError::NotFound(format!("{scope} is not paused")));
    };
    let label = scope.to_string();
    if !scope.parks() {
        let mut b = Batch::new();
        pauses::delete(&mut b, &scope)?;
        jobs::audit_in(&mut b, who, "resume", &label, "done", 0, now)?;
        store.commit(b, true)?;
        return Ok(Resumed {
            pause: view(pause),
            job: None,
        });
    }
    let spec = JobSpec::Resume {
        scope: scope.clone(),
        ord,
    };
    let job = jobs::create_with(store, who, spec, &label, 0, now, |b| {
        pauses::delete(b, &scope).map_err(OpsError::from)
    })?;
    Ok(Resumed {
        pause: view(pause),
        job: Some(job),
    })
}

/// One chunk of a resume job: unparks the scope's rows that no other pause
/// still holds, committing `record` (the job's next record) with them.
pub(crate) fn unpark_chunk(
    store: &Store,
    scope: &Scope,
    ord: Option<u32>,
    cursor: &mut transitions::UnparkCursor,
    now: u64,
    record: impl FnOnce(&mut Batch, &transitions::Unparked, &transitions::UnparkCursor),
) -> Result<transitions::Unparked> {
    let Some(sink) = &scope.sink else {
        return Ok(transitions::Unparked {
            rows: 0,
            done: true,
        });
    };
    // A row another pause still holds would only be parked again.
    let held = ankusa_store::pauses::Paused::load(store)?;
    let _rows = crate::rowlock::hold();
    let out = transitions::unpark_chunk(
        store,
        ord,
        cursor,
        now,
        |row_ord, seq, row_sink| {
            if row_sink != sink.sink {
                return Ok(false);
            }
            match queries::hook_source(store, seq)? {
                // A row whose hook is gone is unparked: the dispatcher
                // settles it, where a parked one would wait forever.
                None => Ok(true),
                Some(src) => Ok(src == sink.source && !held.row(row_ord, &src, row_sink)),
            }
        },
        record,
    )?;
    Ok(out)
}
