//! End-to-end tests of the `ankusa` binary (daemon, console, store commands
//! together), as one test binary: each integration-test binary links RocksDB,
//! and on two cores linking nine of them was most of `make test`'s build.
//! Each module is one area; `common` holds what they share.

// A test crate: its helpers panic on what a test did not expect, which is
// the failure report (the workspace refuses unwrap/expect elsewhere).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_api;
mod admin_wire;
mod audit_parity;
mod backup;
mod batch;
mod breaker;
mod chaos;
mod cli_migrate;
mod cli_mistakes;
mod cli_store;
mod cluster;
mod common;
mod console_pty;
mod console_sinks;
mod daemon_archive;
mod daemon_crash;
mod daemon_dispatch;
mod daemon_ingest;
mod demo;
mod dist;
mod drain;
mod fleet;
mod fleet_console;
mod fleet_load;
mod fleet_metrics;
mod hostile;
mod layers;
mod pause;
mod reload;
mod routing;
mod sink_identity;
mod store_damage;
mod store_faults;
