//! Operator operations on a store: what the admin API serves and what
//! `ankusa tenants` and `ankusa dlq` print.
//!
//! One implementation behind two transports. With a daemon running, the
//! command line asks it over its unix socket ([`client`]) and the daemon
//! answers from these functions ([`crate::daemon::admin`]); with none, the
//! command line opens the store itself and calls the same functions. Both
//! paths produce the same typed results ([`model`]), so the output is the
//! same either way.
//!
//! - [`access`]: who is calling and what they may see (admin or one tenant).
//! - [`model`]: the JSON shapes (stable; docs/admin-api.md).
//! - [`ops`]: bounded reads: stats, tenant pages, DLQ pages and entries.
//! - [`jobs`]: purge and replay as resumable, audited jobs.
//! - [`client`]: HTTP over the admin socket, for the command line.

pub mod access;
pub mod client;
pub mod jobs;
pub mod model;
pub mod ops;

use ankusa_store::StoreError;

/// Why an operation was refused or failed. Each maps to one HTTP status and
/// a stable `error` code.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
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
    /// The store cannot take writes (read-only or follower open).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

impl AdminError {
    /// The stable `error` code of the JSON body.
    pub fn code(&self) -> &'static str {
        match self {
            AdminError::Unauthorized(_) => "unauthorized",
            AdminError::Forbidden(_) => "forbidden",
            AdminError::NotFound(_) => "not_found",
            AdminError::BadRequest(_) => "bad_request",
            AdminError::Conflict(_) => "conflict",
            AdminError::Store(_) => "store_error",
            AdminError::Internal(_) => "internal",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            AdminError::Unauthorized(_) => 401,
            AdminError::Forbidden(_) => 403,
            AdminError::NotFound(_) => 404,
            AdminError::BadRequest(_) => 400,
            AdminError::Conflict(_) => 409,
            AdminError::Store(_) | AdminError::Internal(_) => 500,
        }
    }
}

pub type Result<T, E = AdminError> = std::result::Result<T, E>;
