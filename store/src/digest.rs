//! A digest of a store's logical content, so two replicas can be compared
//! (docs/cluster.md): every key and value of every family, in key order,
//! through SHA-256, family by family.
//!
//! What it covers is what a store *means*: hooks, rows, indexes, tenants,
//! counters (read merged, so how the operands were grouped into files does
//! not matter), the DLQ, pauses, policies, jobs, the audit trail, the sink
//! catalog, the node identity. What it leaves out is what one copy may
//! hold that another need not: RocksDB's files and their layout, the write
//! probe (`m:probe`, put and deleted in one write, so never seen unless a
//! write is torn), and the replication bookkeeping under `m:raft:`, which
//! records where this copy is in the log rather than what it holds.
//!
//! Two stores with equal digests hold the same keys with the same values;
//! the per-family digests say where two that differ part.

use std::ops::ControlFlow;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::error::Result;
use crate::keys::meta;
use crate::quarantine::to_hex;
use crate::schema::Family;
use crate::store::Store;

/// One family's part of a [`StoreDigest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FamilyDigest {
    /// The RocksDB name of the family.
    pub family: &'static str,
    /// Keys digested.
    pub keys: u64,
    /// SHA-256 of the family's keys and values, hex.
    pub sha256: String,
}

/// The digest of a store's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreDigest {
    /// SHA-256 over the families' digests in [`Family::ALL`]'s order, hex.
    pub sha256: String,
    /// Keys digested, every family.
    pub keys: u64,
    pub families: Vec<FamilyDigest>,
}

/// Whether a key of `fam` is left out of the digest (see the module doc).
pub fn excluded(fam: Family, key: &[u8]) -> bool {
    fam == Family::Meta && (key == meta::PROBE || key.starts_with(meta::REPLICATION_PREFIX))
}

/// Digests every family of `store`, calling `progress(family, keys so far)`
/// every 100,000 keys.
pub fn run(store: &Store, mut progress: impl FnMut(&str, u64)) -> Result<StoreDigest> {
    let mut all = Sha256::new();
    let mut families = Vec::with_capacity(Family::ALL.len());
    let mut total = 0u64;
    for fam in Family::ALL {
        let mut h = Sha256::new();
        let mut keys = 0u64;
        store.scan_family(fam, |k, v| {
            if !excluded(fam, k) {
                // Lengths first: ("ab","c") and ("a","bc") must differ.
                h.update((k.len() as u64).to_be_bytes());
                h.update(k);
                h.update((v.len() as u64).to_be_bytes());
                h.update(v);
                keys += 1;
                if keys.is_multiple_of(100_000) {
                    progress(fam.name(), keys);
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        let sum = h.finalize();
        all.update(fam.name().as_bytes());
        all.update(keys.to_be_bytes());
        all.update(sum);
        total += keys;
        families.push(FamilyDigest {
            family: fam.name(),
            keys,
            sha256: to_hex(&sum),
        });
    }
    Ok(StoreDigest {
        sha256: to_hex(&all.finalize()),
        keys: total,
        families,
    })
}

#[cfg(test)]
mod tests;
