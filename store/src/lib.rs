//! `ankusa-store`: Ankusa's durable queue on RocksDB, format 3.
//!
//! The layout (documented byte for byte in `docs/storage.md`) keys every
//! queue index by a dense tenant ordinal, keeps six per-tenant counters as
//! merge operands, and indexes "which tenants have work due" by second, so
//! that every question an operator or the dispatcher asks is answered by
//! point reads and bounded scans instead of a fold of the backlog.
//!
//! Module map:
//! - [`store`]: opening (primary, read-only, follower), format fence, scans.
//! - [`schema`]: column families and the one options function.
//! - [`keys`], [`values`], [`rows`]: codecs; total decoders.
//! - [`transitions`]: every row state change, with its marker and counter
//!   deltas; the only writer of due/inflight/dead/active keys.
//! - [`counters`]: the merge-operand counters and their operator.
//! - [`tenants`]: ordinals, the writer's allocator, tenant pages.
//! - [`queries`]: bounded reads (counters, active index, DLQ pages, gauges).
//! - [`dedupe`]: idempotency-key expiry sweep.
//! - `due_writes`: which tenants had due rows written, for the dispatcher.
//! - [`node`]: the node's drain flag.
//! - [`pauses`]: paused tenants and sinks; parked rows.
//! - [`sinks`]: the sink catalog the daemon writes at boot.
//! - [`quarantine`]: rows that do not decode, moved aside with their counts.
//! - [`repair`]: `store repair`, what derives rebuilt, what cannot decode quarantined.
//! - [`check`]: the offline audit behind `ankusa store check`.
//! - [`info`]: the summary behind `ankusa store info`.
//! - [`fixture`]: realistic stores written through the real transitions
//!   (and format 2 stores for the upgrade path).
//! - [`migrate`]: the resumable format 2 → 3 migration.
//! - [`lock`]: who holds a store.
//! - [`faults`]: fault points between two writes, armed only by tests.
//! - [`audit`]: the trail of destructive operator actions.
//! - [`jobs`]: background job records, committed with their work.
//! - [`tombstones`]: how many deleted entries a read stepped over (tests, benches).

pub mod audit;
pub mod batch;
pub mod check;
mod clock;
mod codec;
pub mod counters;
pub mod damage;
pub mod dedupe;
pub mod digest;
mod due_writes;
pub mod error;
pub mod faults;
pub mod fixture;
pub mod info;
pub mod jobs;
pub mod keys;
pub mod lock;
pub mod migrate;
pub mod node;
pub mod node_id;
pub mod pauses;
pub mod policy;
pub mod quarantine;
pub mod queries;
pub mod repair;
pub mod replicate;
pub mod rows;
pub mod schema;
pub mod sinks;
pub mod store;
pub mod tenants;
pub mod tombstones;
pub mod transitions;
pub mod values;
pub mod waiting;

pub use batch::Batch;
pub use counters::{Counters, Field, Total, Totals};
pub use error::{DecodeError, Result, StoreError};
pub use node_id::{NodeId, NodeIdentity};
pub use rows::{DeadRow, DueRow, InflightRow};
pub use schema::{Family, MemoryBudget, FORMAT};
pub use store::{Mode, Store, StoreMemory, WriteFault};
pub use values::{Envelope, HookId, HookIdError, Kind};

pub use clock::system_now_ms;
