//! The format 2 → 3 migration.
//!
//! A migration is a sequence of *steps*. A step reads at most [`STEP_ROWS`]
//! old rows from where the previous step stopped, and returns one batch
//! holding their format 3 replacements, the counter deltas that seed the
//! per-tenant counters, any new tenant ordinals, and the new cursor. The
//! batch commits in one synced write, so a migration killed at any point
//! (Ctrl-C, `kill -9`, power loss) resumes from its last cursor with nothing
//! counted twice.
//!
//! Invariants:
//! - The cursor (`m:migrating:3`) records the phase and the last old key
//!   moved; a step seeks to just after it, never to the family's start (the
//!   moved keys are tombstones, and re-walking them would make the migration
//!   quadratic).
//! - New prefixes (`D`, `F`, `X`, `A`) never collide with old ones (`d`,
//!   `f`), so a half-migrated range never holds two layouts under one prefix.
//!   `x` and `a` keep their keys and get new values in place; the cursor says
//!   which side of it is new.
//! - Ordinals are allocated once, in first-sight order, by the migration's
//!   single allocator; past `tenants.max` the migration still completes (the
//!   cap refuses new tenants at ingest; it never strands existing rows).
//! - The format stamp changes in the same write as the last step.
//! - [`Migration::run`] builds the next step while the previous one is
//!   written on a second thread, but writes strictly in order, each only
//!   after the previous is durable, so an interruption leaves exactly what
//!   [`Migration::step`] would. A step that allocates ordinals is written
//!   before the next is built; a failed write discards what was built ahead
//!   and reloads the cursor and the allocator from the store.
//! - A step deletes the old `d`/`f` keys it moved with one range delete from
//!   the first to the last key it read: the scan read every key in between
//!   and nothing else writes, so the old family after each step is what
//!   point deletes would leave.
//! - The hooks' tenants and the old delivery rows are read once, in key
//!   order, into a lookup kept on the store handle (see `Lookup`); it
//!   answers exactly as the per-row reads it replaces, which keeps rows
//!   random in seq from costing a random block read each.
//! - A step's operations are written in key order (a stable sort: operations
//!   on one key keep their order), which changes nothing but the cost of the
//!   memtable inserts.
//! - During the due phase, and on the migration's handle only, the index
//!   and deliveries families do not compact automatically and use small
//!   memtables ([`crate::schema::migration_options`]); the finish waits for
//!   the deferred compaction, so the migration's time includes it.
//!
//! Phases: 1 due (`d`), 2 inflight (`f`), 3 dead (`x`), 4 archive (`a`),
//! 5 finish (delete what is left of the old `d` and `f` ranges, stamp 3).
//!
//! Files: this one (phases, cursor, plan and status), `step` (building and
//! writing steps) and `lookup` (the old rows' lookup).

mod lookup;
mod step;

pub(crate) use lookup::Lookup;
pub use step::{Migration, StepOutcome};

use lookup::{old_history, put_delivery, Consumed};
use step::INVALID;

use std::ops::ControlFlow;
use std::path::Path;

use serde::Serialize;

use crate::codec::{put_bytes16, Reader};
use crate::error::{DecodeError, Result, StoreError};
use crate::keys::{bounds, meta, prefix};
use crate::schema::{Family, FORMAT, FORMAT_V2};
use crate::store::{probe, Dir, Store};
/// Old rows per step (one synced write each). Each step waits for one
/// fsync of the write-ahead log (about 2 MB at this size), which on a busy
/// disk costs milliseconds: at 10^6 rows 16,384 measured 15-25% faster than
/// 4,096, and 65,536 no faster than 16,384.
pub const STEP_ROWS: usize = 16384;

/// The history note of a dead row whose last attempt the old release did
/// not keep.
pub const DEAD_BEFORE_UPGRADE: &str =
    "dead-lettered before the upgrade to format 3 (the old release kept no detail of this attempt)";

/// The one-line description `--dry-run` prints.
pub const DESCRIPTION: &str =
    "2 -> 3: re-key due/inflight/dead by tenant ordinal, seed per-tenant counters";

/// A migration phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Due = 1,
    Inflight = 2,
    Dead = 3,
    Archive = 4,
    Finish = 5,
}

impl Phase {
    pub const ROWS: [Phase; 4] = [Phase::Due, Phase::Inflight, Phase::Dead, Phase::Archive];

    fn from_u8(b: u8) -> Result<Phase, DecodeError> {
        match b {
            1 => Ok(Phase::Due),
            2 => Ok(Phase::Inflight),
            3 => Ok(Phase::Dead),
            4 => Ok(Phase::Archive),
            5 => Ok(Phase::Finish),
            o => Err(DecodeError::new(
                "migration cursor",
                format!("unknown phase {o}"),
            )),
        }
    }

    fn next(self) -> Phase {
        match self {
            Phase::Due => Phase::Inflight,
            Phase::Inflight => Phase::Dead,
            Phase::Dead => Phase::Archive,
            Phase::Archive | Phase::Finish => Phase::Finish,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Due => "due",
            Phase::Inflight => "inflight",
            Phase::Dead => "dead",
            Phase::Archive => "archive",
            Phase::Finish => "finish",
        }
    }

    fn prefix(self) -> u8 {
        match self {
            Phase::Due => prefix::V2_DUE,
            Phase::Inflight => prefix::V2_INFLIGHT,
            Phase::Dead => prefix::DEAD,
            Phase::Archive => prefix::ARCHIVE,
            Phase::Finish => prefix::V2_DUE,
        }
    }

    fn index(self) -> usize {
        (self as usize).saturating_sub(1).min(3)
    }
}

/// Where a migration stands; stored at `m:migrating:3`.
///
/// Layout: `1:u8 phase:u8 started_at:u64 done:u64×4 total:u64×4
/// last_key:bytes16` (an empty `last_key` means "from the phase's start").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cursor {
    pub phase: Phase,
    /// When the migration started (ms): due rows later than this become
    /// retries (kind 1), earlier ones first attempts.
    pub started_at: u64,
    /// Rows moved per phase (due, inflight, dead, archive).
    pub done: [u64; 4],
    /// Rows counted per phase when the migration started.
    pub total: [u64; 4],
    #[serde(skip)]
    pub last_key: Vec<u8>,
}

impl Cursor {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.last_key.len());
        out.push(1);
        out.push(self.phase as u8);
        out.extend_from_slice(&self.started_at.to_be_bytes());
        for v in self.done.iter().chain(self.total.iter()) {
            out.extend_from_slice(&v.to_be_bytes());
        }
        put_bytes16(&mut out, &self.last_key);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(b, "migration cursor");
        r.expect_u8(1)?;
        let phase = Phase::from_u8(r.u8()?)?;
        let started_at = r.u64()?;
        let mut done = [0u64; 4];
        let mut total = [0u64; 4];
        for d in &mut done {
            *d = r.u64()?;
        }
        for t in &mut total {
            *t = r.u64()?;
        }
        let last_key = r.bytes16()?.to_vec();
        r.finish()?;
        Ok(Self {
            phase,
            started_at,
            done,
            total,
            last_key,
        })
    }

    pub fn rows_done(&self) -> u64 {
        self.done.iter().sum()
    }

    pub fn rows_total(&self) -> u64 {
        self.total.iter().sum()
    }
}

/// What a migration would do, counted exactly (a key scan, no values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub from: u32,
    pub to: u32,
    pub description: &'static str,
    /// Rows per phase: due, inflight, dead, archive.
    pub rows: [u64; 4],
    /// Set when a previous run was interrupted: where it stands.
    pub resume: Option<Cursor>,
}

/// The state of a store with respect to this migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// Format 2, not started.
    Needed,
    /// Started and interrupted (or running elsewhere).
    InProgress { cursor: Cursor },
    /// Already format 3.
    Done,
}

/// Reads a store's migration status without taking its lock.
pub fn status(path: &Path) -> Result<Status> {
    let p = probe(path)?;
    if let Some(c) = p.cursor {
        return Ok(Status::InProgress {
            cursor: Cursor::decode(&c)?,
        });
    }
    match p.format {
        Some(f) if f == FORMAT_V2 => Ok(Status::Needed),
        Some(f) if f == FORMAT => Ok(Status::Done),
        Some(f) if f > FORMAT => Err(StoreError::FormatNewer {
            path: path.to_path_buf(),
            found: f,
            supported: FORMAT,
        }),
        _ => Err(StoreError::Unstamped {
            path: path.to_path_buf(),
        }),
    }
}

fn count_prefix(store: &Store, p: u8) -> Result<u64> {
    let (lo, hi) = bounds::family(p);
    let mut n = 0u64;
    store.scan(Family::Index, &lo, &hi, Dir::Forward, |_, _| {
        n += 1;
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(n)
}

/// Counts what the migration will move. `store` is opened with
/// [`Store::open_any_format`].
pub fn plan(store: &Store) -> Result<Plan> {
    let resume = match store.get(Family::Meta, meta::MIGRATING_3)? {
        Some(b) => Some(Cursor::decode(&b)?),
        None => None,
    };
    let format = store.format()?;
    if resume.is_none() && format != Some(FORMAT_V2) {
        return Err(match format {
            Some(f) if f > FORMAT => StoreError::FormatNewer {
                path: store.path().to_path_buf(),
                found: f,
                supported: FORMAT,
            },
            Some(_) => StoreError::NothingToMigrate {
                path: store.path().to_path_buf(),
            },
            None => StoreError::Unstamped {
                path: store.path().to_path_buf(),
            },
        });
    }
    let rows = match &resume {
        // After the due and inflight phases the old prefixes shrink, so the
        // totals recorded at the start are the ones to report.
        Some(c) => c.total,
        None => [
            count_prefix(store, prefix::V2_DUE)?,
            count_prefix(store, prefix::V2_INFLIGHT)?,
            count_prefix(store, prefix::DEAD)?,
            count_prefix(store, prefix::ARCHIVE)?,
        ],
    };
    Ok(Plan {
        from: FORMAT_V2,
        to: FORMAT,
        description: DESCRIPTION,
        rows,
        resume,
    })
}

#[cfg(test)]
mod tests;
