//! The admin API's own JSON for the records the store has a type of its
//! own for.
//!
//! Why: the store's types are its in-memory form; what scripts, the command
//! line and the fleet console read is a wire format, and the jobs persist
//! theirs. With the JSON written from a mirror here, a field of a store type
//! can be renamed, added or dropped without changing a byte on the wire, and
//! the wire changes only here (`tests/it/admin_wire.rs` holds it to the
//! snapshot). The store's own reports (`ankusa store info --json` and the
//! like) are the store's, and are not written from here.
//!
//! Each mirror is a serde remote definition (`#[serde(remote = ...)]`): it
//! lists every field of its store type, so a field added to the store type
//! does not compile until the mirror says how it goes on the wire. The model
//! types keep the store's types in memory and name the mirror in a serde
//! `with`; an `Option` or a `Vec` of one goes through [`Opt`] or [`Seq`].
//!
//! Invariant: no struct or enum of the store is written to the admin API
//! by a `Serialize` of its own (those on the wire derive none). The two
//! scalar values, a rate and a node id, are: their serde is their text
//! (`Display`/`FromStr`), the one form the command line, the configuration
//! file and the API all share, and a mirror of it would be a second copy.

use std::marker::PhantomData;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod counts;
mod damage;
mod dlq;
mod info;
mod jobs;
mod node;
mod pauses;
mod policy;

pub use counts::{CountersJson, TenantInfoJson, TotalsJson};
pub use damage::{DamageJson, DamagedFileJson};
pub use dlq::{DeadRowJson, DlqOrderJson};
pub use info::{ActiveSummaryJson, OldestDueJson, StoreInfoJson};
pub use jobs::{DlqCursorJson, PurgeCursorJson, UnparkCursorJson};
pub use node::DrainJson;
pub use pauses::{OriginJson, PauseJson, ScopeJson};
pub use policy::{PolicyJson, SinkLimitsJson, SinkRefJson, StoredSinkLimitsJson, TenantPolicyJson};

/// How one store type `T` is written and read on the wire: what [`Opt`]
/// and [`Seq`] need of a mirror.
pub trait Mirror<T> {
    fn write<S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error>;
    fn read<'de, D: Deserializer<'de>>(d: D) -> Result<T, D::Error>;
}

/// A mirror's inherent `serialize`/`deserialize` (what a remote definition
/// generates, and what a serde `with` calls) as its [`Mirror`].
macro_rules! mirror {
    ($json:ty => $t:ty) => {
        impl $crate::wire::Mirror<$t> for $json {
            fn write<S: serde::Serializer>(v: &$t, s: S) -> Result<S::Ok, S::Error> {
                <$json>::serialize(v, s)
            }
            fn read<'de, D: serde::Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                <$json>::deserialize(d)
            }
        }
    };
}
use mirror;

/// `with = "Opt::<M>"`: an `Option` of what mirror `M` writes (`null` for
/// none). A field of it that an older node may leave out needs `default`,
/// as serde treats a missing field as `None` only for a plain `Option`.
pub struct Opt<M>(PhantomData<M>);

impl<M> Opt<M> {
    pub fn serialize<T, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error>
    where
        M: Mirror<T>,
    {
        match v {
            Some(v) => s.serialize_some(&Via::<M, T>(v, PhantomData)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, T, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error>
    where
        M: Mirror<T>,
    {
        Ok(Option::<Own<M, T>>::deserialize(d)?.map(|o| o.0))
    }
}

/// `with = "Seq::<M>"`: a `Vec` of what mirror `M` writes, as a JSON array.
pub struct Seq<M>(PhantomData<M>);

impl<M> Seq<M> {
    pub fn serialize<T, S: Serializer>(v: &[T], s: S) -> Result<S::Ok, S::Error>
    where
        M: Mirror<T>,
    {
        s.collect_seq(v.iter().map(|t| Via::<M, T>(t, PhantomData)))
    }

    pub fn deserialize<'de, T, D: Deserializer<'de>>(d: D) -> Result<Vec<T>, D::Error>
    where
        M: Mirror<T>,
    {
        Ok(Vec::<Own<M, T>>::deserialize(d)?
            .into_iter()
            .map(|o| o.0)
            .collect())
    }
}

/// A borrowed `T` that serializes through mirror `M`: a request body of a
/// store type (`Via::<PolicyJson, _>::new(&policy)`).
pub struct Via<'a, M, T>(&'a T, PhantomData<M>);

impl<'a, M, T> Via<'a, M, T> {
    pub fn new(v: &'a T) -> Self {
        Via(v, PhantomData)
    }
}

impl<M: Mirror<T>, T> Serialize for Via<'_, M, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        M::write(self.0, s)
    }
}

/// A `T` read through mirror `M`: a request body of a store type.
pub struct Own<M, T>(T, PhantomData<M>);

impl<M, T> Own<M, T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<'de, M: Mirror<T>, T> Deserialize<'de> for Own<M, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        M::read(d).map(|t| Own(t, PhantomData))
    }
}

#[cfg(test)]
mod tests;
