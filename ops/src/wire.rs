//! The admin API's own JSON for records the store has a type of its own
//! for.
//!
//! Why: the store's row types are its in-memory form; what scripts, the
//! command line and the fleet console read is a wire format. With the JSON
//! written from a mirror here, a field of the store's type can be renamed,
//! added or dropped without changing a byte on the wire, and the wire can
//! change only here (`tests/it/admin_wire.rs` holds it to the snapshot).
//! Each mirror is a serde `with` module, so the model types keep the
//! store's type in memory and callers convert nothing.

/// A dead-lettered row ([`ankusa_store::DeadRow`]) as the DLQ's JSON has it.
pub mod dead_row {
    use ankusa_store::DeadRow;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Json {
        ord: u32,
        at: u64,
        seq: u64,
        sink: u16,
        source_id: String,
        hook_id: String,
        /// Absent from a node that predates routing by type.
        #[serde(default)]
        event_type: Option<String>,
    }

    pub fn serialize<S: Serializer>(r: &DeadRow, s: S) -> Result<S::Ok, S::Error> {
        Json {
            ord: r.ord,
            at: r.at,
            seq: r.seq,
            sink: r.sink,
            source_id: r.source_id.clone(),
            hook_id: r.hook_id.clone(),
            event_type: r.event_type.clone(),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DeadRow, D::Error> {
        let j = Json::deserialize(d)?;
        Ok(DeadRow {
            ord: j.ord,
            at: j.at,
            seq: j.seq,
            sink: j.sink,
            source_id: j.source_id,
            hook_id: j.hook_id,
            event_type: j.event_type,
        })
    }
}
