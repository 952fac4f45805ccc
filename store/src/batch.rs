//! A write batch under construction: row operations plus counter deltas.
//!
//! Operations can only be added from inside the crate, and the index-key
//! encoders that matter (`D`, `F`, `X`, `A`) live in `transitions`, so a
//! caller outside the crate cannot assemble a batch that writes an index row
//! without its counters. The deltas become merge operands (mirrored into the
//! node aggregate) only when the batch is committed, in the same RocksDB
//! `WriteBatch` as the rows.

use std::collections::HashSet;

use crate::counters::{CounterDeltas, Field, Total};
use crate::schema::Family;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpKind {
    Put(Vec<u8>),
    Delete,
    /// Deletes `[key, end)`.
    DeleteRange(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Op {
    pub fam: Family,
    pub key: Vec<u8>,
    pub kind: OpKind,
}

/// Row operations and counter deltas that commit atomically.
#[derive(Debug, Default)]
pub struct Batch {
    pub(crate) ops: Vec<Op>,
    pub(crate) deltas: CounterDeltas,
    /// Active markers already put by this batch: rows of one tenant in one
    /// second share a marker.
    pub(crate) markers: HashSet<(u64, u32)>,
    /// Set by the format 2 -> 3 migration: its rows are counted per sink
    /// by the first recount instead ([`crate::sinks::recount_waiting`]),
    /// which saves a hook read per row moved.
    pub(crate) sinks_uncounted: bool,
    /// The policy changes this batch makes (`crate::policy`): the version it
    /// moves to, the count it leaves and which policy keys it leaves
    /// present, so two changes in one batch count and log as one step.
    pub(crate) policies: Option<PolicyPending>,
}

/// What a batch's policy changes so far leave (`crate::policy`): read by
/// the next change in the same batch, which the store cannot show yet.
#[derive(Debug, Default)]
pub(crate) struct PolicyPending {
    pub(crate) version: u64,
    pub(crate) count: Option<usize>,
    pub(crate) present: std::collections::HashMap<Vec<u8>, bool>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `other` after this batch's operations: one commit then
    /// applies both, in that order (the commit's sort by key is stable, so
    /// two writes of one key keep it). For committers that group many small
    /// changes (the daemon's delivery outcomes). A migration batch, whose
    /// rows are counted per sink later, is kept apart: merged into a batch
    /// that counts, its rows would be counted twice.
    pub fn absorb(&mut self, other: Batch) -> Result<(), Box<Batch>> {
        if other.sinks_uncounted != self.sinks_uncounted
            || (other.policies.is_some() && self.policies.is_some())
        {
            return Err(Box::new(other));
        }
        if other.policies.is_some() {
            self.policies = other.policies;
        }
        self.ops.extend(other.ops);
        self.deltas.absorb(&other.deltas);
        self.markers.extend(other.markers);
        Ok(())
    }

    /// Number of row operations (counter operands not included).
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.deltas.is_empty()
    }

    /// The counter deltas this batch will apply (before mirroring into ord 0).
    pub fn deltas(&self) -> &CounterDeltas {
        &self.deltas
    }

    pub(crate) fn put(&mut self, fam: Family, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push(Op {
            fam,
            key: key.into(),
            kind: OpKind::Put(value.into()),
        });
    }

    pub(crate) fn delete(&mut self, fam: Family, key: impl Into<Vec<u8>>) {
        self.ops.push(Op {
            fam,
            key: key.into(),
            kind: OpKind::Delete,
        });
    }

    pub(crate) fn delete_range(&mut self, fam: Family, from: Vec<u8>, to: Vec<u8>) {
        self.ops.push(Op {
            fam,
            key: from,
            kind: OpKind::DeleteRange(to),
        });
    }

    pub(crate) fn count(&mut self, ord: u32, field: Field, delta: i64) {
        self.deltas.add(ord, field, delta);
    }

    /// Counts `n` transitions of kind `t` in `ord`'s cumulative total.
    pub(crate) fn tally(&mut self, ord: u32, t: Total, n: u64) {
        self.deltas.add_total(ord, t, n);
    }

    /// A due row of `(seq, sink)` put (`+1`) or deleted (`-1`): counted in
    /// the rows waiting for its sink on commit.
    pub(crate) fn move_due(&mut self, seq: u64, sink: u16, delta: i64) {
        self.deltas.add_due_move(seq, sink, delta);
    }

    /// Hook `seq`, put by this batch, came through `source`.
    pub(crate) fn note_source(&mut self, seq: u64, source: &str) {
        self.deltas.note_source(seq, source);
    }

    pub(crate) fn count_quarantined(&mut self, delta: i64) {
        self.deltas.add_quarantined(delta);
    }
}
