//! The bounded value types of the file: integers and durations whose range
//! is part of their type (`Int<MIN, MAX>`, `Dur<MIN_MS, MAX_MS>`), ratios,
//! addresses and secrets. A value out of range fails while deserializing,
//! so toml's span points at it; a secret never prints.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// An unsigned integer that must lie in `MIN..=MAX`; checked as it is read
/// so the error carries the value's position in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int<const MIN: u64, const MAX: u64>(pub u64);

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Int<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = u64::deserialize(d)?;
        if !(MIN..=MAX).contains(&v) {
            return Err(D::Error::custom(format!(
                "must be between {MIN} and {MAX}, got {v}"
            )));
        }
        Ok(Int(v))
    }
}

/// A duration written the human way (`"250ms"`, `"30s"`, `"5m"`), in
/// `MIN_MS..=MAX_MS` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur<const MIN_MS: u64, const MAX_MS: u64>(pub Duration);

impl<'de, const MIN_MS: u64, const MAX_MS: u64> Deserialize<'de> for Dur<MIN_MS, MAX_MS> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let v = humantime::parse_duration(s.trim()).map_err(|e| {
            D::Error::custom(format!(
                "`{s}` is not a duration ({e}); write e.g. \"500ms\", \"30s\", \"5m\""
            ))
        })?;
        let (lo, hi) = (Duration::from_millis(MIN_MS), Duration::from_millis(MAX_MS));
        if v < lo || v > hi {
            return Err(D::Error::custom(format!(
                "must be between {} and {}, got {s}",
                humantime::format_duration(lo),
                humantime::format_duration(hi)
            )));
        }
        Ok(Dur(v))
    }
}

/// A secret string: kept out of `Debug`.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A share in (0, 1], written as a TOML float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio(pub f64);

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !(v > 0.0 && v <= 1.0) {
            return Err(D::Error::custom(format!(
                "must be a share above 0 and at most 1 (e.g. 0.5), got {v}"
            )));
        }
        Ok(Ratio(v))
    }
}

pub(super) fn de_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(|_| {
        D::Error::custom(format!(
            "`{s}` is not an address; write IP:PORT, e.g. \"127.0.0.1:8080\""
        ))
    })
}

pub(super) fn de_opt_addr<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    de_addr(d).map(Some)
}
