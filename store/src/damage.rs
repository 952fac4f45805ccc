//! A damaged table file: what the store learned from the first read that
//! met one, in words an operator can act on.
//!
//! RocksDB checksums every block it reads, so a flipped byte in an SST file
//! never reads as other data: each read that needs the block fails with a
//! `Corruption` status, every time, until the file is replaced. Nothing in
//! the process can mend it (the rows in the block are gone from this copy),
//! so the store turns the status into a [`Damage`]: the file, its column
//! family and key range (from RocksDB's list of live files), the first
//! error and how many reads failed since. Readiness reports it, `/metrics`
//! counts it and `store check` names it; docs/deployment.md ("A damaged
//! table file") is the way out.
//!
//! Invariants:
//! - Only a read that failed with `Corruption` records damage; the read
//!   path pays nothing otherwise.
//! - A handle's damage is never cleared: the file does not heal while it
//!   is open. A restore replaces the store, and the next open starts clean.
//! - A damaged read is an error ([`crate::StoreError::Damaged`]), never a
//!   short or empty result.

/// The damaged file, as RocksDB lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedFile {
    /// The file's name in the store directory (`000012.sst`).
    pub name: String,
    /// The column family whose rows it holds.
    pub family: String,
    /// Its smallest and largest key, rendered by [`render_key`].
    pub first_key: String,
    pub last_key: String,
    /// Its LSM level.
    pub level: i32,
}

impl std::fmt::Display for DamagedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (family {}, level {}, keys {} to {})",
            self.name, self.family, self.level, self.first_key, self.last_key
        )
    }
}

/// What a handle knows of the damage it met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// When the first damaged read failed (ms since the epoch).
    pub since_ms: u64,
    /// The file, when RocksDB's message names one that is still live.
    pub file: Option<DamagedFile>,
    /// RocksDB's words for the first failure.
    pub error: String,
    /// Reads that failed on damage since.
    pub failed_reads: u64,
}

/// Whether a RocksDB status message reports damage.
pub(crate) fn is_corruption(message: &str) -> bool {
    message.starts_with("Corruption:") || message.contains(" Corruption: ")
}

/// The `NNNNNN.sst` a RocksDB corruption message names, if any (it reads
/// `... in /path/to/000012.sst offset 599257 size 4076`).
pub(crate) fn file_named(message: &str) -> Option<String> {
    message
        .split_whitespace()
        .find(|w| w.ends_with(".sst"))
        .and_then(|w| w.rsplit('/').next())
        .map(str::to_owned)
}

/// A key as an operator can quote it: an index key's one-letter prefix as
/// a letter, the rest in hex (48 digits at most, then `…`).
pub fn render_key(key: &[u8]) -> String {
    let (head, rest) = match key.first() {
        Some(b) if b.is_ascii_alphabetic() => (format!("{}:", *b as char), &key[1..]),
        _ => (String::new(), key),
    };
    let mut hex: String = rest.iter().take(24).map(|b| format!("{b:02x}")).collect();
    if rest.len() > 24 {
        hex.push('…');
    }
    if hex.is_empty() && head.is_empty() {
        return "(empty)".into();
    }
    format!("{head}{hex}")
}

/// The live file called `name`, described.
pub(crate) fn describe(db: &rocksdb::DB, name: &str) -> Option<DamagedFile> {
    let files = db.live_files().ok()?;
    let f = files
        .into_iter()
        .find(|f| f.name.trim_start_matches('/') == name)?;
    Some(DamagedFile {
        name: name.to_owned(),
        family: f.column_family_name,
        first_key: f.start_key.as_deref().map_or("?".into(), render_key),
        last_key: f.end_key.as_deref().map_or("?".into(), render_key),
        level: f.level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corruption_message_names_its_file() {
        let m = "Corruption: block checksum mismatch: stored(context removed) = 1, computed = 2, type = 4  in /var/s/store/000012.sst offset 599257 size 4076";
        assert!(is_corruption(m));
        assert_eq!(file_named(m).as_deref(), Some("000012.sst"));
        assert!(!is_corruption("IO error: No space left on device"));
        assert_eq!(file_named("Corruption: bad WAL record"), None);
    }

    /// The point reads (a hook by id, one read or many) meet a damaged
    /// block of the hooks family as `Damaged`, the store remembers the
    /// file, and no read returns a hook other than the one written.
    #[test]
    fn a_point_read_of_a_damaged_hooks_file_is_named_never_wrong() {
        use crate::fixture::{self, FixtureSpec};
        use crate::{queries, Family, Store, StoreError};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let hooks = {
            let store = Store::create_or_open(&path).unwrap();
            let rep = fixture::write(&store, &FixtureSpec::new(8, 4_000, 3, 1_000_000), |_, _| {})
                .unwrap();
            store.flush().unwrap();
            store.compact(Family::Hooks).unwrap();
            rep.hooks
        };
        // Bytes flipped a third of the way into the hooks family's table.
        let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), &path).unwrap();
        let sst = {
            let db = rocksdb::DB::open_cf_for_read_only(
                &rocksdb::Options::default(),
                &path,
                &names,
                false,
            )
            .unwrap();
            let f = db
                .live_files()
                .unwrap()
                .into_iter()
                .filter(|f| f.column_family_name == Family::Hooks.name())
                .max_by_key(|f| f.size)
                .expect("the fixture has a hooks table file");
            path.join(f.name.trim_start_matches('/'))
        };
        let mut bytes = std::fs::read(&sst).unwrap();
        let at = bytes.len() / 3;
        for b in &mut bytes[at..at + 32] {
            *b ^= 0xA5;
        }
        std::fs::write(&sst, &bytes).unwrap();

        let store = Store::open(&path).unwrap();
        let (mut read, mut damaged) = (0u64, 0u64);
        for seq in 1..=hooks {
            match queries::hook(&store, seq) {
                Ok(Some(env)) => {
                    // What a read returns is the hook written under that id.
                    let body = String::from_utf8_lossy(&env.body).into_owned();
                    assert!(
                        body.contains(&format!("\"n\":{seq},")),
                        "hook {seq} read as {body}"
                    );
                    read += 1;
                }
                Ok(None) => {}
                Err(StoreError::Damaged { family, file, .. }) => {
                    assert_eq!(family, "hooks");
                    let named = sst.file_name().unwrap().to_str().unwrap();
                    assert!(
                        file.as_deref().is_some_and(|f| f.contains(named)),
                        "{file:?}"
                    );
                    damaged += 1;
                }
                Err(e) => panic!("hook {seq}: {e}"),
            }
        }
        assert!(damaged > 0, "no read met the damaged block ({read} read)");
        assert!(
            read > damaged,
            "{read} read, {damaged} damaged: one block, not the file"
        );
        let d = store.damage().expect("the store remembers the damage");
        assert_eq!(d.file.as_ref().map(|f| f.family.as_str()), Some("hooks"));
        assert!(d.failed_reads >= damaged);
    }

    #[test]
    fn keys_render_with_their_prefix_letter() {
        assert_eq!(render_key(b"D\x00\x00\x00\x0c"), "D:0000000c");
        assert_eq!(render_key(&[0u8, 1]), "0001");
        assert_eq!(render_key(b""), "(empty)");
        assert!(render_key(&[b'x'; 40]).ends_with('…'));
    }
}
