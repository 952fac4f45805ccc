//! The audit trail: one row per destructive operator action (purge,
//! replay), dry runs included, in the `audit` family.
//!
//! The store does not interpret a record: the admin API owns its schema
//! (JSON today) and the store owns ordering and paging. Invariants:
//! - Keys are `at:u64 n:u32` big-endian, so a reverse scan is newest first
//!   and two records written in the same millisecond by one process never
//!   collide (`n` is a process-wide counter, started from the pid). Two processes never write one
//!   store at once (the RocksDB lock), so that is enough.
//! - Values are a version byte (1) and the record; an unknown version is a
//!   decode error, never a panic.
//! - A record is written in the same batch as the first effect of the
//!   action it describes, or on its own before the action starts when the
//!   action is a background job: an action never runs unaudited.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::batch::Batch;
use crate::error::{DecodeError, Result};
use crate::schema::Family;
use crate::store::{Dir, Store};

const VERSION: u8 = 1;

/// The tie-breaker's counter, started per process from its pid (shifted
/// up), so a process restarted within the same millisecond as the last
/// record of its predecessor does not overwrite it.
static NEXT: AtomicU32 = AtomicU32::new(0);
static SEEDED: std::sync::Once = std::sync::Once::new();

/// Where an audit record sits: its time and a tie-breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AuditKey {
    pub at: u64,
    pub n: u32,
}

impl AuditKey {
    fn encode(&self) -> [u8; 12] {
        let mut k = [0u8; 12];
        k[..8].copy_from_slice(&self.at.to_be_bytes());
        k[8..].copy_from_slice(&self.n.to_be_bytes());
        k
    }

    fn decode(k: &[u8]) -> std::result::Result<Self, DecodeError> {
        let (at, n) = k
            .split_at_checked(8)
            .filter(|(_, n)| n.len() == 4)
            .ok_or(DecodeError::new("audit key", "not 12 bytes"))?;
        let mut a = [0u8; 8];
        a.copy_from_slice(at);
        let mut b = [0u8; 4];
        b.copy_from_slice(n);
        Ok(AuditKey {
            at: u64::from_be_bytes(a),
            n: u32::from_be_bytes(b),
        })
    }

    /// The cursor form used by pages: `at.n`.
    pub fn cursor(&self) -> String {
        format!("{}.{}", self.at, self.n)
    }

    pub fn parse_cursor(s: &str) -> Option<Self> {
        let (a, n) = s.split_once('.')?;
        Some(AuditKey {
            at: a.parse().ok()?,
            n: n.parse().ok()?,
        })
    }
}

/// One stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub key: AuditKey,
    pub record: Vec<u8>,
}

/// Adds a record written at `at` (ms since the epoch) to `b`.
pub fn append(b: &mut Batch, at: u64, record: &[u8]) -> AuditKey {
    SEEDED.call_once(|| NEXT.store(std::process::id().wrapping_shl(12), Ordering::Relaxed));
    let key = AuditKey {
        at,
        n: NEXT.fetch_add(1, Ordering::Relaxed),
    };
    let mut v = Vec::with_capacity(record.len() + 1);
    v.push(VERSION);
    v.extend_from_slice(record);
    b.put(Family::Audit, key.encode().to_vec(), v);
    key
}

/// At most `limit` records older than `before` (all when `None`), newest
/// first. One bounded reverse scan.
pub fn page(store: &Store, before: Option<AuditKey>, limit: usize) -> Result<Vec<AuditRow>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let hi = match before {
        Some(k) => k.encode().to_vec(),
        None => vec![0xff; 13],
    };
    store.scan(Family::Audit, &[], &hi, Dir::Reverse, |k, v| {
        let key = AuditKey::decode(k)?;
        let record = match v.split_first() {
            Some((&VERSION, rest)) => rest.to_vec(),
            _ => return Err(DecodeError::new("audit value", "unknown version").into()),
        };
        out.push(AuditRow { key, record });
        Ok(if out.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_page_newest_first_and_resume_from_a_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let mut keys = Vec::new();
        for i in 0..5u64 {
            let mut b = Batch::new();
            // Two records in one millisecond must not collide.
            keys.push(append(&mut b, 1_000 + i / 2, format!("r{i}").as_bytes()));
            store.commit(b, true).unwrap();
        }
        let first = page(&store, None, 3).unwrap();
        let names: Vec<_> = first.iter().map(|r| r.record.clone()).collect();
        assert_eq!(names, vec![b"r4".to_vec(), b"r3".to_vec(), b"r2".to_vec()]);
        let cursor = AuditKey::parse_cursor(&first[2].key.cursor()).unwrap();
        let rest = page(&store, Some(cursor), 10).unwrap();
        let names: Vec<_> = rest.iter().map(|r| r.record.clone()).collect();
        assert_eq!(names, vec![b"r1".to_vec(), b"r0".to_vec()]);
        assert_eq!(keys.len(), 5);
    }

    #[test]
    fn garbage_keys_are_errors() {
        assert!(AuditKey::decode(b"short").is_err());
        assert!(AuditKey::parse_cursor("x.y").is_none());
    }
}
