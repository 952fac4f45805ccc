//! Who carries out the console's guarded actions.
//!
//! The console decides *what* (the exact scope, a dry-run count, a typed
//! confirmation) and shows progress; an [`Operator`] does it. The binary
//! provides the one implementation: through the daemon's admin API when a
//! daemon runs (FOLLOW mode), or as audited jobs on the store the console
//! holds (WRITE mode). Either way the action is the same code as
//! `ankusa tenants purge` and `ankusa dlq replay`, and writes the same audit
//! records with the operator's identity. Without an operator (tests, an old
//! embedding) WRITE mode falls back to the console's own transitions.

use std::sync::Arc;

use ankusa_store::Store;

use crate::data::ActionScope;

/// Carries out purge and replay (never the migration, which the console
/// runs step by step itself).
pub trait Operator: Send + Sync {
    /// The rows the action would touch now. `store` is the console's own
    /// handle in WRITE mode, `None` beside a daemon.
    fn dry_run(&self, store: Option<&Store>, scope: &ActionScope) -> Result<u64, String>;

    /// Runs the action to its end, calling `progress(done, expected)` as it
    /// goes; returns the rows touched.
    fn run(
        &self,
        store: Option<&Store>,
        scope: &ActionScope,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, String>;
}

/// A shareable operator with a `Debug` that says what it is.
#[derive(Clone)]
pub struct OperatorHandle(pub Arc<dyn Operator>);

impl std::fmt::Debug for OperatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorHandle")
    }
}
