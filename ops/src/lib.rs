//! `ankusa-ops`: the operator operations, the one implementation behind the
//! admin API, the command line and the console.
//!
//! Floors: this crate stands on `ankusa-store` only. The daemon serves it
//! (its admin API), the console and the command line call it; none of them
//! carries a copy of an operation, so what the console confirms is what the
//! node does, and a new operation is added here once.
//!
//! One implementation behind two transports ([`operator::Operator`]): with a
//! daemon running, callers ask it over its unix socket ([`client`]) and the
//! daemon answers from these functions; with none, the caller holds the
//! store and calls the same functions. Both paths produce the same typed
//! results ([`model`]) and write the same audit records.
//!
//! - [`access`]: who is calling and what they may see (admin or one tenant),
//!   and the token digests they are checked against.
//! - [`model`]: the JSON shapes (stable; docs/admin-api.md).
//! - [`reads`]: bounded reads: stats, tenant pages, DLQ pages and entries.
//! - [`jobs`]: purge and replay as resumable, audited jobs.
//! - [`node`]: drain and undrain.
//! - [`backup`]: backups of the store (named, complete or absent, with a
//!   retention) and their restore.
//! - [`pauses`]: pause and resume of tenants and sinks.
//! - [`replay`]: dead rows back to due, chunk by chunk.
//! - `unpark`: a resume job's chunks (parked rows due again).
//! - [`rowlock`]: the lock every read-then-write of existing rows takes
//!   (the daemon's dispatcher too).
//! - [`preview`]: the bounded, redacted view of a hook (the API's and the
//!   console's).
//! - [`client`]: HTTP over the admin socket; [`socket_path`] says where it
//!   is, [`routes`] what its paths are.
//! - [`operator`]: the one type callers act through, daemon or store.
//! - [`fleet`]: several nodes at once: the fleet file, one question to
//!   every node under one deadline, and the merged answers.

pub mod access;
pub mod backup;
pub mod client;
pub mod event_type;
pub mod fleet;
pub mod jobs;
pub mod model;
pub mod node;
pub mod operator;
pub mod pauses;
pub mod policy;
pub mod preview;
pub mod reads;
pub mod replay;
pub mod routes;
pub mod rowlock;
mod unpark;
pub mod wire;

use std::path::{Path, PathBuf};

use ankusa_store::StoreError;

/// Why an operation was refused or failed. Each maps to one HTTP status and
/// a stable `error` code.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// No credentials, or credentials that match nothing.
    #[error("{0}")]
    Unauthorized(String),
    /// Known caller, operation out of its scope (node-wide reads and the
    /// audit log for a tenant token).
    #[error("{0}")]
    Forbidden(String),
    /// Unknown, or out of the caller's scope: a tenant token cannot tell
    /// another tenant from one that does not exist.
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    /// A request refused with its own stable code (`unknown_field`,
    /// `header_ambiguous`, `tenant_invalid`, `path_invalid`), so a script
    /// can tell a misspelt field from a malformed one.
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// A request body past the admin API's limit.
    #[error("{0}")]
    TooLarge(String),
    /// The store cannot take writes (read-only or follower open).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A daemon that cannot be reached now: no connection, or no answer
    /// within the client's timeout (a node of a fleet that is down).
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl OpsError {
    /// The stable `error` code of the JSON body.
    pub fn code(&self) -> &'static str {
        match self {
            OpsError::Unauthorized(_) => "unauthorized",
            OpsError::Forbidden(_) => "forbidden",
            OpsError::NotFound(_) => "not_found",
            OpsError::BadRequest(_) => "bad_request",
            OpsError::Invalid { code, .. } => code,
            OpsError::TooLarge(_) => "body_too_large",
            OpsError::Conflict(_) => "conflict",
            OpsError::Store(_) => "store_error",
            OpsError::Unavailable(_) => "unavailable",
            OpsError::Internal(_) => "internal",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            OpsError::Unauthorized(_) => 401,
            OpsError::Forbidden(_) => 403,
            OpsError::NotFound(_) => 404,
            OpsError::BadRequest(_) | OpsError::Invalid { .. } => 400,
            OpsError::TooLarge(_) => 413,
            OpsError::Conflict(_) => 409,
            OpsError::Store(_) | OpsError::Internal(_) => 500,
            OpsError::Unavailable(_) => 503,
        }
    }
}

pub type Result<T, E = OpsError> = std::result::Result<T, E>;

/// The admin socket's file name inside the store directory.
pub const SOCKET: &str = "admin.sock";

/// Where a store's admin socket is.
pub fn socket_path(store: &Path) -> PathBuf {
    store.join(SOCKET)
}
