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
//! - Pausing what is already paused changes nothing and says so, with one
//!   exception: an operator pausing a scope the circuit breaker paused
//!   takes the pause over (origin operator, audited), so the breaker can
//!   never lift it.
//! - The breaker lifts only its own pause ([`lift_own`]): the origin check
//!   and the delete are one step under [`PAUSES`], as are a put's check
//!   and write, so an operator's takeover cannot fall between them.

use ankusa_store::pauses::{self, Origin, Pause, Scope};
use ankusa_store::{sinks, Batch, Store};

use crate::access::Principal;
use crate::model::{JobSpec, PauseRequest, Paused, Resumed};
use crate::reads::{self, pause_view};
use crate::{jobs, OpsError, Result};

/// Serializes each read-decide-write of a pause record in this process.
static PAUSES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn hold() -> std::sync::MutexGuard<'static, ()> {
    // A panic mid-check left no partial write (each write is one batch).
    PAUSES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        Some(s) => Some(reads::resolve_sink(store, s)?),
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
    let _pauses = hold();
    let catalog = sinks::catalog(store)?;
    let existing = pauses::get(store, &scope)?;
    match &existing {
        // The operator's word outlasts the breaker's.
        Some(p) if p.origin == Origin::Breaker && origin == Origin::Operator => {}
        Some(p) => {
            return Ok(Paused {
                pause: pause_view(p.clone(), &catalog),
                created: false,
            })
        }
        None => {}
    }
    if existing.is_none() && pauses::list(store)?.len() >= pauses::MAX_PAUSES {
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
        &pause.scope.label(&catalog),
        "done",
        0,
        now,
    )?;
    store.commit(b, true)?;
    Ok(Paused {
        pause: pause_view(pause, &catalog),
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

/// Lifts a pause whoever put it (an operator's resume).
pub fn lift(
    store: &Store,
    who: &Principal,
    scope: Scope,
    ord: Option<u32>,
    now: u64,
) -> Result<Resumed> {
    lift_from(store, who, scope, ord, None, now)
}

/// Lifts a pause only if `origin` put it (the circuit breaker lifting its
/// own): a pause of another origin is a conflict and stays.
pub fn lift_own(
    store: &Store,
    who: &Principal,
    scope: Scope,
    origin: Origin,
    now: u64,
) -> Result<Resumed> {
    lift_from(store, who, scope, None, Some(origin), now)
}

/// The one way a pause is lifted, by an operator or the circuit breaker.
fn lift_from(
    store: &Store,
    who: &Principal,
    scope: Scope,
    ord: Option<u32>,
    origin: Option<Origin>,
    now: u64,
) -> Result<Resumed> {
    let _pauses = hold();
    let Some(pause) = pauses::get(store, &scope)? else {
        return Err(OpsError::NotFound(format!("{scope} is not paused")));
    };
    if origin.is_some_and(|o| o != pause.origin) {
        return Err(OpsError::Conflict(format!(
            "{scope} was paused by {:?}, not lifted",
            pause.origin
        )));
    }
    let catalog = sinks::catalog(store)?;
    let label = scope.label(&catalog);
    if !scope.parks() {
        let mut b = Batch::new();
        pauses::delete(&mut b, &scope)?;
        jobs::audit_in(&mut b, who, "resume", &label, "done", 0, now)?;
        store.commit(b, true)?;
        return Ok(Resumed {
            pause: pause_view(pause, &catalog),
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
        pause: pause_view(pause, &catalog),
        job: Some(job),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{Peer, Principal};

    fn breaker() -> Principal {
        Principal {
            name: "breaker".into(),
            os_user: None,
            tenant: None,
        }
    }

    /// An operator's pause is never the breaker's to lift: an operator
    /// pausing a breaker-paused sink takes the pause over, the breaker's
    /// own pause never replaces the operator's, and `lift_own` refuses a
    /// pause of another origin.
    #[test]
    fn the_breaker_never_lifts_an_operators_pause() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let op = Principal::local(&Peer::me());
        let scope = Scope::sink("shop", 0);

        let p = put(&store, &breaker(), scope.clone(), Origin::Breaker, 10).unwrap();
        assert!(p.created && p.pause.pause.origin == Origin::Breaker);
        let p = put(&store, &op, scope.clone(), Origin::Operator, 20).unwrap();
        assert!(p.created, "the operator takes the breaker's pause over");
        assert_eq!(p.pause.pause.origin, Origin::Operator);
        let p = put(&store, &breaker(), scope.clone(), Origin::Breaker, 30).unwrap();
        assert!(!p.created && p.pause.pause.origin == Origin::Operator);
        let e = lift_own(&store, &breaker(), scope.clone(), Origin::Breaker, 40).unwrap_err();
        assert!(matches!(e, OpsError::Conflict(_)), "{e}");
        assert!(pauses::get(&store, &scope).unwrap().is_some());

        // The operator's resume lifts any pause; the breaker lifts its own.
        let r = lift(&store, &op, scope.clone(), None, 50).unwrap();
        assert!(r.job.is_some(), "a sink's resume unparks its rows");
        put(&store, &breaker(), scope.clone(), Origin::Breaker, 60).unwrap();
        let r = lift_own(&store, &breaker(), scope.clone(), Origin::Breaker, 70).unwrap();
        assert_eq!(r.pause.pause.by, "breaker");
        assert!(pauses::get(&store, &scope).unwrap().is_none());
    }
}
