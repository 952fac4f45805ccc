//! The store's integration tests as one test binary: each test binary
//! links RocksDB, and on two cores linking four of them (the helpers were a
//! binary of their own) was a large part of `make test`'s build. A module
//! per area; `common` holds what they share. proptest finds this `main.rs`
//! and keeps a module's regressions in `store/tests/proptest-regressions/`
//! (`transitions.txt` for `transitions.rs`).

// A test crate: its helpers panic on what a test did not expect, which is
// the failure report (the workspace refuses unwrap/expect elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod migrate;
mod open;
mod pauses;
mod transitions;
mod waiting;
