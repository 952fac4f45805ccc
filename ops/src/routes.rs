//! The admin API's routes, written once: the daemon's router registers
//! these paths and the client ([`crate::operator::Operator`]) fills them, so
//! the two cannot drift apart.

/// `GET`: node stats (admin).
pub const STATS: &str = "/v1/admin/stats";
/// `GET`: a page of tenants.
pub const TENANTS: &str = "/v1/admin/tenants";
/// `GET`: one tenant.
pub const TENANT: &str = "/v1/admin/tenants/{tenant}";
/// `POST`: purge one tenant's rows (a dry run, or a job).
pub const PURGE: &str = "/v1/admin/tenants/{tenant}/purge";
/// `GET`: one tenant's policy; `PUT`: set fields of it (admin);
/// `DELETE`: clear it (admin).
pub const TENANT_POLICY: &str = "/v1/admin/tenants/{tenant}/policy";
/// `GET`: one sink's limits; `PUT`: set fields of them (admin); `DELETE`:
/// clear them (admin). The sink as `SOURCE/SINK`, percent-encoded.
pub const SINK_LIMITS: &str = "/v1/admin/sinks/{sink}/limits";
/// `GET`: a page of the DLQ.
pub const DLQ: &str = "/v1/admin/dlq";
/// `GET`: one dead hook.
pub const DLQ_ENTRY: &str = "/v1/admin/dlq/{hook_id}";
/// `POST`: replay dead rows (a dry run, or a job).
pub const REPLAY: &str = "/v1/admin/replay";
/// `GET`: the caller's jobs.
pub const JOBS: &str = "/v1/admin/jobs";
/// `GET`: one job.
pub const JOB: &str = "/v1/admin/jobs/{id}";
/// `GET`: the audit log (admin).
pub const AUDIT: &str = "/v1/admin/audit";
/// `GET`: the pauses in force; `POST`: pause a scope.
pub const PAUSES: &str = "/v1/admin/pauses";
/// `POST`: resume a paused scope.
pub const RESUME: &str = "/v1/admin/pauses/resume";
/// `GET`: whether the node drains, and what it owes.
pub const NODE: &str = "/v1/admin/node";
/// `POST`: start draining.
pub const DRAIN: &str = "/v1/admin/node/drain";
/// `POST`: stop draining.
pub const UNDRAIN: &str = "/v1/admin/node/undrain";
/// `POST`: take a backup of the store (admin; audited).
pub const BACKUP: &str = "/v1/admin/node/backup";
/// `GET`: the daemon's samples of the node's last hour (admin).
pub const HISTORY: &str = "/v1/admin/history";
/// `GET`: the node's sinks.
pub const SINKS: &str = "/v1/admin/sinks";
/// `POST`: re-read the daemon's configuration file and apply it (admin).
pub const CONFIG_RELOAD: &str = "/v1/admin/config:reload";
/// `POST`: what a candidate file would change, applying nothing (admin).
pub const CONFIG_CHECK: &str = "/v1/admin/config:check";
/// `GET`: Prometheus metrics (admin).
pub const METRICS: &str = "/metrics";

/// `route` with its one `{parameter}` replaced by `value`, percent-encoded
/// (tenant ids and hook ids are plain, but nothing a user typed goes into a
/// URL raw). A route without a parameter comes back as it is.
pub fn fill(route: &str, value: &str) -> String {
    match (route.find('{'), route.find('}')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}{}{}", &route[..open], encode(value), &route[close + 1..])
        }
        _ => route.to_owned(),
    }
}

/// Percent-encodes a path segment or a query value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_is_filled_with_an_encoded_value() {
        assert_eq!(
            fill(PURGE, "acme/eu west"),
            "/v1/admin/tenants/acme%2Feu%20west/purge"
        );
        assert_eq!(fill(JOB, "7"), "/v1/admin/jobs/7");
        assert_eq!(fill(STATS, "x"), STATS);
    }
}
