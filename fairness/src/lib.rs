//! Ankusa's fair scheduler and the deterministic simulator that proves it.
//!
//! * [`scheduler`]: the pure scheduler the dispatcher calls every tick. Caps are hard
//!   unless [`Config::spare`] lends a capped tenant the slots nobody else can use
//!   ([`Spare`]); a paused tenant is simply left out of the tick's input.
//! * [`sim`]: a step-driven simulator, the baseline schedulers it compares against,
//!   the metrics, and the built-in scenarios.
//! * [`run_suite`]: the entry point behind `ankusa bench fairness`.
//!
//! `docs/fairness.md` holds the scenario schema and the measured table.

pub mod scheduler;
pub mod sim;

pub use scheduler::{Claim, Config, HeadRow, Limits, Offer, RowKind, Scheduler, Spare, TenantHead};
pub use sim::suite::{run_suite, SuiteOptions, SuiteReport};
pub use sim::Error;
