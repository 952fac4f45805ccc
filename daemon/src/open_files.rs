//! The open-file limit: raised at boot, and checked against what the node
//! can hold open at once, so a flood of connections runs into a connection
//! cap with a clear refusal rather than into `EMFILE` inside the store.
//!
//! The budget ([`needed`]): the store's table cache
//! ([`ankusa_store::schema::MAX_OPEN_FILES`]) and its other files (WAL,
//! manifest, logs, lock), the process's own (runtime, stdio, archive
//! files), every listener's connection cap, and two sockets per delivery
//! slot (one in use, one idle in the pool).

use super::config::Settings;

/// RocksDB's files besides the table cache, and some to spare.
pub const STORE_OTHER: u64 = 64;
/// The process's own descriptors: runtime, stdio, archive files, the lock.
pub const PROCESS: u64 = 128;
/// Connections each admin listener serves at once.
pub const ADMIN_CONNECTIONS: usize = 64;

/// The limit found, the limit set, and what the configuration needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub soft_before: u64,
    pub soft: u64,
    pub hard: u64,
    pub needed: u64,
}

/// Descriptors the configuration can hold open at once.
pub fn needed(s: &Settings) -> u64 {
    let store = u64::try_from(ankusa_store::schema::MAX_OPEN_FILES).unwrap_or(0) + STORE_OTHER;
    let admin_listeners = u64::from(s.admin.socket) + u64::from(s.admin.listen.is_some());
    let delivery = if s.dispatch.enabled {
        2 * s.dispatch.max_inflight as u64
    } else {
        0
    };
    store
        + PROCESS
        + s.max_connections as u64
        + admin_listeners * ADMIN_CONNECTIONS as u64
        + delivery
}

/// Raises the soft open-file limit to the hard one and checks it covers
/// [`needed`]. The error says what to raise or lower.
pub fn raise(s: &Settings) -> Result<Budget, String> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft_before, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| format!("cannot read the open-file limit: {e}"))?;
    let soft = if soft_before < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => hard,
            Err(e) => {
                tracing::warn!(error = %e, soft_before, hard, "cannot raise the open-file limit");
                soft_before
            }
        }
    } else {
        soft_before
    };
    let b = Budget {
        soft_before,
        soft,
        hard,
        needed: needed(s),
    };
    if b.soft < b.needed {
        return Err(format!(
            "the open-file limit is {} (hard limit {}), below the {} this configuration can hold open \
             ({} store files, {} for the process, http.max_connections {}, {} per admin listener, \
             2 per dispatch.max_inflight): raise the hard limit (`ulimit -n`, LimitNOFILE= in a \
             systemd unit) or lower http.max_connections or dispatch.max_inflight",
            b.soft,
            b.hard,
            b.needed,
            u64::try_from(ankusa_store::schema::MAX_OPEN_FILES).unwrap_or(0) + STORE_OTHER,
            PROCESS,
            s.max_connections,
            ADMIN_CONNECTIONS,
        ));
    }
    Ok(b)
}
