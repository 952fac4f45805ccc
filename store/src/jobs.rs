//! Background job records (long purges and replays) in the meta family.
//!
//! A job's record says what it does, who asked, and how far it got. The
//! admin API owns the record's schema; the store owns where records live
//! and that they commit with the work they describe. Invariants:
//! - Keys are `m:job:` and the id as a big-endian `u64`, so ids sort in
//!   creation order and a listing is one bounded scan.
//! - Ids are never reused: the next id is one past the largest stored.
//! - A job step puts the job's updated record in the same batch as the
//!   rows it changed ([`put`] takes the step's batch), so after a crash the
//!   record's progress and cursor are exactly what was committed.
//! - Values are a version byte (1) and the record.

use std::ops::ControlFlow;

use crate::batch::Batch;
use crate::error::{DecodeError, Result};
use crate::schema::Family;
use crate::store::{Dir, Store};

const PREFIX: &[u8] = b"m:job:";
const VERSION: u8 = 1;

fn key(id: u64) -> Vec<u8> {
    let mut k = PREFIX.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn id_of(k: &[u8]) -> std::result::Result<u64, DecodeError> {
    let rest = k
        .strip_prefix(PREFIX)
        .filter(|r| r.len() == 8)
        .ok_or(DecodeError::new("job key", "not m:job: and 8 bytes"))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(rest);
    Ok(u64::from_be_bytes(a))
}

fn value(v: &[u8]) -> std::result::Result<Vec<u8>, DecodeError> {
    match v.split_first() {
        Some((&VERSION, rest)) => Ok(rest.to_vec()),
        _ => Err(DecodeError::new("job record", "unknown version")),
    }
}

/// Adds (or replaces) job `id`'s record in `b`.
pub fn put(b: &mut Batch, id: u64, record: &[u8]) {
    let mut v = Vec::with_capacity(record.len() + 1);
    v.push(VERSION);
    v.extend_from_slice(record);
    b.put(Family::Meta, key(id), v);
}

/// Job `id`'s record.
pub fn get(store: &Store, id: u64) -> Result<Option<Vec<u8>>> {
    match store.get(Family::Meta, &key(id))? {
        Some(v) => Ok(Some(value(&v)?)),
        None => Ok(None),
    }
}

/// At most `limit` jobs, newest first.
pub fn list(store: &Store, limit: usize) -> Result<Vec<(u64, Vec<u8>)>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let mut hi = PREFIX.to_vec();
    hi.extend_from_slice(&[0xff; 9]);
    store.scan(Family::Meta, PREFIX, &hi, Dir::Reverse, |k, v| {
        out.push((id_of(k)?, value(v)?));
        Ok(if out.len() >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })?;
    Ok(out)
}

/// The id the next job gets: one past the largest stored (1 when none).
pub fn next_id(store: &Store) -> Result<u64> {
    Ok(list(store, 1)?.first().map_or(1, |(id, _)| id + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_ordered_never_reused_and_records_replace() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        assert_eq!(next_id(&store).unwrap(), 1);
        for id in 1..=3 {
            assert_eq!(next_id(&store).unwrap(), id);
            let mut b = Batch::new();
            put(&mut b, id, format!("job {id}").as_bytes());
            store.commit(b, true).unwrap();
        }
        let mut b = Batch::new();
        put(&mut b, 2, b"job 2 done");
        store.commit(b, true).unwrap();
        assert_eq!(get(&store, 2).unwrap().unwrap(), b"job 2 done");
        let all = list(&store, 10).unwrap();
        let ids: Vec<u64> = all.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![3, 2, 1]);
        assert_eq!(next_id(&store).unwrap(), 4);
        // Format and allocator meta keys are not jobs.
        assert!(get(&store, 99).unwrap().is_none());
    }
}
