//! A deterministic simulator that drives schedulers through scenarios.
//!
//! Time is an integer step; nothing reads a clock, and every random draw comes from
//! the scenario's seed through [`rng`], keyed by what it decides (a row's size by the
//! tenant and the row's index, a failure by the row and the attempt), so every
//! scheduler sees the same sizes and the same failures whatever order it serves in.

pub mod engine;
pub mod metrics;
pub mod policies;
pub mod rng;
pub mod scenario;
pub mod suite;

use std::path::PathBuf;

/// Errors of loading scenarios and running the suite.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A scenario file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A scenario file is not valid TOML for the schema.
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message, naming the line and the key.
        message: String,
    },
    /// A scenario parses but a field's value is unusable.
    #[error("{file}: field `{field}`: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The field, as a path like `tenants[2].hold`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}
