//! Tenant policy and sink limits: read, set and clear, audited.
//!
//! A tenant's policy (weight, share, cap, rate) and a sink's limits
//! (`max_in_flight`, rate) override the daemon's configured defaults; the
//! dispatcher applies a change on its next tick (`ankusa_store::policy`).
//! Setting merges the named fields into what is stored; clearing removes
//! the whole override, so the defaults apply again.
//!
//! Invariants:
//! - A change is one synced batch: the policy row, the policy version and
//!   the audit record (`tenant_policy` or `sink_limits`, whose scope says
//!   what changed from what to what).
//! - Only an admin changes a policy; a tenant-scoped caller reads its own
//!   tenant's, and no other.
//! - A change that changes nothing writes nothing and says so.

use ankusa_store::policy::{self, Policy, SinkLimits, StoredSinkLimits, TenantPolicy};
use ankusa_store::{sinks, Batch, Store};

use crate::access::Principal;
use crate::model::{PolicyChange, SinkLimitsChange};
use crate::reads;
use crate::{jobs, OpsError, Result};

/// Serializes each read-merge-write of a policy row (and of the version
/// every write moves) in this process; the store has one writer process.
static POLICIES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn hold() -> std::sync::MutexGuard<'static, ()> {
    // Each write is one batch: a panic mid-decision left nothing partial.
    POLICIES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A tenant's stored policy (none: the defaults apply).
pub fn tenant(store: &Store, who: &Principal, tenant: &str) -> Result<Option<TenantPolicy>> {
    who.tenant_ord(store, tenant)?;
    Ok(policy::tenant(store, tenant)?)
}

/// Merges `set` into the tenant's policy (admin only; audited).
pub fn set_tenant(
    store: &Store,
    who: &Principal,
    tenant: &str,
    set: &Policy,
    now: u64,
) -> Result<PolicyChange> {
    who.require_admin("setting a tenant's policy")?;
    if set.is_empty() {
        return Err(OpsError::BadRequest(
            "name what to set: weight, share, cap or rate (to remove the policy, clear it)".into(),
        ));
    }
    change_tenant(store, who, tenant, now, |old| set.over(old))
}

/// Removes the tenant's policy: the defaults apply again (admin only;
/// audited).
pub fn clear_tenant(
    store: &Store,
    who: &Principal,
    tenant: &str,
    now: u64,
) -> Result<PolicyChange> {
    who.require_admin("clearing a tenant's policy")?;
    change_tenant(store, who, tenant, now, |_| Policy::default())
}

fn change_tenant(
    store: &Store,
    who: &Principal,
    tenant: &str,
    now: u64,
    next: impl FnOnce(&Policy) -> Policy,
) -> Result<PolicyChange> {
    jobs::writable(store)?;
    who.tenant_ord(store, tenant)?;
    let _policies = hold();
    let before = policy::tenant(store, tenant)?.map(|t| t.policy);
    let after = next(&before.unwrap_or_default());
    let step = Step {
        store,
        who,
        now,
        action: "tenant_policy",
        code: "policy_invalid",
        label: format!("tenant {tenant}"),
    };
    let (after, changed) = step.run(
        before,
        after,
        Policy::check,
        Policy::is_empty,
        describe_tenant,
        |b, policy| {
            policy::put_tenant(
                store,
                b,
                &TenantPolicy {
                    tenant: tenant.to_owned(),
                    policy,
                    at: now,
                    by: who.name.clone(),
                },
            )
        },
    )?;
    Ok(PolicyChange {
        tenant: tenant.to_owned(),
        before,
        after,
        changed,
    })
}

/// One change of a stored policy or limits, whichever: checked, written
/// with the version and the audit record in one synced batch, or nothing
/// written when nothing changes.
struct Step<'a> {
    store: &'a Store,
    who: &'a Principal,
    now: u64,
    action: &'static str,
    code: &'static str,
    label: String,
}

impl Step<'_> {
    /// `(after, changed)`: `after` none when it sets nothing.
    fn run<P: Copy + Default + PartialEq>(
        &self,
        before: Option<P>,
        after: P,
        check: impl Fn(&P) -> std::result::Result<(), String>,
        is_empty: impl Fn(&P) -> bool,
        describe: impl Fn(&P, &P) -> String,
        put: impl FnOnce(&mut Batch, P) -> ankusa_store::Result<()>,
    ) -> Result<(Option<P>, bool)> {
        check(&after).map_err(|e| OpsError::Invalid {
            code: self.code,
            message: e,
        })?;
        let after = (!is_empty(&after)).then_some(after);
        let changed = before != after;
        if !changed {
            return Ok((after, false));
        }
        if before.is_none() && policy::count(self.store)? >= policy::MAX_POLICIES {
            return Err(OpsError::Conflict(format!(
                "{} policies are stored, the most a node keeps: clear some first",
                policy::MAX_POLICIES
            )));
        }
        let mut b = Batch::new();
        put(&mut b, after.unwrap_or_default())?;
        let scope = format!(
            "{}: {}",
            self.label,
            describe(&before.unwrap_or_default(), &after.unwrap_or_default())
        );
        jobs::audit_in(&mut b, self.who, self.action, &scope, "done", 0, self.now)?;
        self.store.commit(b, true)?;
        Ok((after, true))
    }
}

/// A sink's stored limits (none: its configuration applies).
pub fn sink(store: &Store, name: &str) -> Result<Option<StoredSinkLimits>> {
    let s = reads::resolve_sink(store, name)?;
    Ok(policy::sink(store, &s)?)
}

/// Merges `set` into the sink's limits (admin only; audited).
pub fn set_sink(
    store: &Store,
    who: &Principal,
    name: &str,
    set: &SinkLimits,
    now: u64,
) -> Result<SinkLimitsChange> {
    who.require_admin("limiting a sink")?;
    if set.is_empty() {
        return Err(OpsError::BadRequest(
            "name what to set: max_in_flight or rate (to remove the limits, clear them)".into(),
        ));
    }
    change_sink(store, who, name, now, |old| set.over(old))
}

/// Removes the sink's limits: its configuration applies again (admin
/// only; audited).
pub fn clear_sink(
    store: &Store,
    who: &Principal,
    name: &str,
    now: u64,
) -> Result<SinkLimitsChange> {
    who.require_admin("clearing a sink's limits")?;
    change_sink(store, who, name, now, |_| SinkLimits::default())
}

fn change_sink(
    store: &Store,
    who: &Principal,
    name: &str,
    now: u64,
    next: impl FnOnce(&SinkLimits) -> SinkLimits,
) -> Result<SinkLimitsChange> {
    jobs::writable(store)?;
    let sink = reads::resolve_sink(store, name)?;
    let label = sinks::display(&sinks::catalog(store)?, &sink.source, sink.sink);
    let _policies = hold();
    let before = policy::sink(store, &sink)?.map(|s| s.limits);
    let after = next(&before.unwrap_or_default());
    let step = Step {
        store,
        who,
        now,
        action: "sink_limits",
        code: "limits_invalid",
        label: format!("sink {label}"),
    };
    let (after, changed) = step.run(
        before,
        after,
        SinkLimits::check,
        SinkLimits::is_empty,
        describe_sink,
        |b, limits| {
            policy::put_sink(
                store,
                b,
                &StoredSinkLimits {
                    sink: sink.clone(),
                    limits,
                    at: now,
                    by: who.name.clone(),
                },
            )
        },
    )?;
    Ok(SinkLimitsChange {
        sink: label,
        before,
        after,
        changed,
    })
}

fn field<T: std::fmt::Display>(out: &mut Vec<String>, name: &str, a: Option<T>, b: Option<T>) {
    let show = |v: Option<T>| v.map_or_else(|| "default".to_owned(), |v| v.to_string());
    let (a, b) = (show(a), show(b));
    if a != b {
        out.push(format!("{name} {a} -> {b}"));
    }
}

/// `weight default -> 4, cap 20 -> default`: what the audit records.
pub fn describe_tenant(a: &Policy, b: &Policy) -> String {
    let mut d = Vec::new();
    field(&mut d, "weight", a.weight, b.weight);
    field(&mut d, "share", a.share, b.share);
    field(&mut d, "cap", a.cap, b.cap);
    field(&mut d, "rate", a.rate, b.rate);
    if d.is_empty() {
        "unchanged".into()
    } else {
        d.join(", ")
    }
}

pub fn describe_sink(a: &SinkLimits, b: &SinkLimits) -> String {
    let mut d = Vec::new();
    field(&mut d, "max_in_flight", a.max_in_flight, b.max_in_flight);
    field(&mut d, "rate", a.rate, b.rate);
    if d.is_empty() {
        "unchanged".into()
    } else {
        d.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_store::policy::Rate;

    #[test]
    fn the_audit_text_names_each_changed_field_from_and_to() {
        let a = Policy {
            cap: Some(20),
            ..Policy::default()
        };
        let b = Policy {
            weight: Some(4),
            rate: Some(Rate::from_milli(50_000)),
            ..Policy::default()
        };
        assert_eq!(
            describe_tenant(&a, &b),
            "weight default -> 4, cap 20 -> default, rate default -> 50/s"
        );
        assert_eq!(describe_tenant(&a, &a), "unchanged");
    }
}
