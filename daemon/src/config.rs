//! The daemon's configuration: a TOML file read with serde.
//!
//! Owns: the file's schema (every key, its default and its range, mirrored in
//! `docs/configuration.md`), and turning it into [`Settings`], the checked
//! form the rest of the daemon uses.
//!
//! Invariants:
//! - Unknown keys are errors (`deny_unknown_fields` everywhere): a typo must
//!   not silently fall back to a default.
//! - Ranges are checked *while* deserializing (the bounded types below), so
//!   toml's error span points at the offending value and every error names
//!   the file, the line and the key.
//! - Checks that span several keys (duplicate source ids, `tenant` with
//!   `tenant_header`) keep the source's span and report its line too.
//! - Secrets (tokens, signing secrets) never appear in `Debug` output or in
//!   error messages.
//!
//! Files: `file` (the schema, a struct per table), `bounded` (the ranged
//! value types), `secrets` (rotation) and `settings` (the checks across
//! keys and the checked form).

mod bounded;
mod cluster;
mod file;
mod secrets;
mod settings;

use bounded::{de_addr, de_opt_addr};
use secrets::rotated;
use settings::to_usize;

pub use bounded::{Dur, Int, Ratio, Secret};
pub use cluster::{ClusterSection, ClusterSettings};
pub use file::{
    AdminSection, ArchiveSection, BreakerSection, Config, DispatchSection, SinkConfig, SourceConfig,
};
pub use secrets::{live, Expiring, RotatedSecret, RotatedToken};
pub use settings::{
    endpoint, url_digest, AdminSettings, ArchiveSettings, DispatchSettings, Generation, Settings,
    Source, TenantRule, WriterSettings,
};

use std::fmt;

/// Longest source id: it is a URL path segment and is stored with every hook.
pub const MAX_SOURCE_ID: usize = 64;
/// Sinks per source: a hook owes one delivery row per sink.
pub const MAX_SINKS: usize = ankusa_ops::replay::MAX_SINKS as usize;
/// Extra headers a source may keep with its hooks.
pub const MAX_FORWARD_HEADERS: usize = 16;
const MIB: u64 = 1024 * 1024;

/// A configuration error, already rendered with file, line and key.
#[derive(Debug)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests;
