//! Fault points: named places between two writes where a test can make the
//! store fail or the process die, to prove that a failure *there* loses
//! nothing.
//!
//! A point is armed on one store handle ([`Store::arm_fault`]) or, for a
//! subprocess such as the real daemon, through the environment:
//! `ANKUSA_FAULTS="cleanup.after_delete=abort,dispatch.cleanup=error"`, read
//! when a store is opened. `error` makes the point return
//! [`StoreError::Fault`]; `abort` ends the process at once (no destructors,
//! no flush: what a SIGKILL at that instant would leave).
//!
//! Fault points exist only in test builds and with the `faults` feature,
//! which only the workspace's dev-dependencies enable: a release build
//! compiles [`Faults::hit`] to nothing, so no configuration or environment
//! can make a production node fail on purpose.

use crate::error::Result;

/// What an armed point does when reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Return [`StoreError::Fault`] from the point.
    Error,
    /// `std::process::abort()`: the process dies between the two writes.
    Abort,
}

/// The variable a subprocess reads its armed points from.
pub const ENV: &str = "ANKUSA_FAULTS";

#[cfg(any(test, feature = "faults"))]
mod imp {
    use super::*;
    use crate::error::StoreError;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// The armed points of one store handle.
    #[derive(Debug, Default)]
    pub struct Faults {
        armed: Mutex<HashMap<String, Action>>,
    }

    impl Faults {
        /// The points armed by [`ENV`]; a malformed entry is ignored with a
        /// warning (tests set it, and a typo must not arm something else).
        pub fn from_env() -> Faults {
            let f = Faults::default();
            if let Ok(spec) = std::env::var(ENV) {
                for item in spec.split(',').filter(|s| !s.is_empty()) {
                    match item.split_once('=') {
                        Some((p, "error")) => f.arm(p, Some(Action::Error)),
                        Some((p, "abort")) => f.arm(p, Some(Action::Abort)),
                        _ => tracing::warn!(item, "ignoring malformed {ENV} entry"),
                    }
                }
            }
            f
        }

        pub fn arm(&self, point: &str, action: Option<Action>) {
            let mut a = self.armed.lock().unwrap_or_else(|e| e.into_inner());
            match action {
                Some(act) => a.insert(point.to_owned(), act),
                None => a.remove(point),
            };
        }

        pub fn hit(&self, point: &'static str) -> Result<()> {
            let act = self
                .armed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(point)
                .copied();
            match act {
                None => Ok(()),
                Some(Action::Error) => Err(StoreError::Fault(point)),
                Some(Action::Abort) => {
                    tracing::error!(point, "fault point: aborting the process");
                    std::process::abort()
                }
            }
        }
    }
}

#[cfg(not(any(test, feature = "faults")))]
mod imp {
    use super::*;

    /// Without the `faults` feature no point can be armed.
    #[derive(Debug, Default)]
    pub struct Faults;

    impl Faults {
        pub fn from_env() -> Faults {
            Faults
        }

        pub fn arm(&self, _point: &str, _action: Option<Action>) {}

        #[inline(always)]
        pub fn hit(&self, _point: &'static str) -> Result<()> {
            Ok(())
        }
    }
}

pub use imp::Faults;
