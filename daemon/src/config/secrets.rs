//! Rotated secrets and tokens: a key may list several values, each with an
//! optional expiry stamp, so a sink's signing secret or an admin token can
//! be replaced without a window in which the peer's copy is refused.

use super::Secret;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use std::fmt;

/// Secrets one configuration key may list at most (a rotation needs two;
/// a few more allow a staged one).
pub const MAX_ROTATED: usize = 8;

/// An RFC 3339 instant (`"2026-12-08T12:00:00Z"`), read as Unix
/// milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp(pub u64);

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let t = humantime::parse_rfc3339_weak(s.trim()).map_err(|e| {
            D::Error::custom(format!(
                "`{s}` is not an RFC 3339 time ({e}); write e.g. \"2026-12-08T12:00:00Z\""
            ))
        })?;
        let ms = t
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| D::Error::custom(format!("`{s}` is before 1970")))?
            .as_millis();
        Ok(Stamp(u64::try_from(ms).unwrap_or(u64::MAX)))
    }
}

/// One entry of `signing_secrets`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotatedSecret {
    pub secret: Secret,
    /// Not accepted (or not signed with) from this instant on.
    pub expires: Option<Stamp>,
}

/// One entry of a source's `tokens`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotatedToken {
    pub token: Secret,
    pub expires: Option<Stamp>,
}

/// A secret (a key or a token digest) and when it stops counting.
#[derive(Clone, PartialEq, Eq)]
pub struct Expiring<T> {
    pub value: T,
    /// Unix ms; `None`: never.
    pub expires_at: Option<u64>,
}

impl<T> Expiring<T> {
    pub fn never(value: T) -> Expiring<T> {
        Expiring {
            value,
            expires_at: None,
        }
    }

    /// Whether it still counts at `now_ms`.
    pub fn live(&self, now_ms: u64) -> bool {
        self.expires_at.is_none_or(|at| now_ms < at)
    }
}

impl<T> fmt::Debug for Expiring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<redacted, expires {:?}>", self.expires_at)
    }
}

/// The values of `list` that count at `now_ms`.
pub fn live<T>(list: &[Expiring<T>], now_ms: u64) -> impl Iterator<Item = &T> {
    list.iter()
        .filter(move |e| e.live(now_ms))
        .map(|e| &e.value)
}

/// A key's one secret or its rotated list, decoded by `decode`; the two
/// spellings are exclusive.
pub(super) fn rotated<T>(
    key: &str,
    one: Option<&Secret>,
    many: &[(Secret, Option<Stamp>)],
    decode: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<Expiring<T>>, String> {
    match (one, many.is_empty()) {
        (Some(_), false) => Err(format!(
            "{key} and {key}s are exclusive: list every one in {key}s"
        )),
        (Some(Secret(s)), true) => Ok(vec![Expiring::never(
            decode(s).map_err(|m| format!("{key}: {m}"))?,
        )]),
        (None, _) if many.len() > MAX_ROTATED => Err(format!(
            "{key}s lists {} entries, the limit is {MAX_ROTATED}",
            many.len()
        )),
        (None, _) => many
            .iter()
            .enumerate()
            .map(|(i, (Secret(s), exp))| {
                Ok(Expiring {
                    value: decode(s).map_err(|m| format!("{key}s[{i}]: {m}"))?,
                    expires_at: exp.map(|e| e.0),
                })
            })
            .collect(),
    }
}
