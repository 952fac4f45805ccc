//! The console's integration tests as one test binary: each test binary
//! links RocksDB, and on two cores linking four of them was a large part of
//! `make test`'s build. A module per area; `common` holds what they share
//! (the fixture store at a fixed clock, the synchronous runner, the
//! rendering and the `snap!` macro).

// A test crate: its helpers panic on what a test did not expect, which is
// the failure report (the workspace refuses unwrap/expect elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod common;
mod chrome;
mod drain;
mod fleet;
mod flows;
mod migration;
mod policy;
mod rates;
mod screens;
mod sinks;
mod state;
