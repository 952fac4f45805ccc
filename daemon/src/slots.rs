//! Sink positions that survive the file's order: a named sink keeps the
//! position its delivery rows name, wherever the file lists it.
//!
//! Rows name a sink by its position in its source's list (`seq:u64
//! sink:u16`). Before this, the position was the sink's place in the file,
//! so moving a sink up a line would have sent its waiting rows to another
//! sink, and a reload refused it. Now the configuration is aligned with
//! the positions already in use before anything reads it: at boot against
//! the store's sink catalog (the names and positions the last run
//! recorded), at a reload against the running configuration. A sink whose
//! name was at position `i` takes position `i` again; an unnamed sink is
//! named by its position and keeps it; a sink new to the source takes the
//! next free position at the end, in file order.
//!
//! Invariants:
//! - Alignment only permutes a source's sinks; it never drops, adds or
//!   changes one.
//! - It is all or nothing per source: when a position in use would be left
//!   without its sink (a sink dropped or renamed), the file's order is
//!   kept and the reload's own rules decide (a drop from the end, a
//!   rename, or a refusal naming the sink): positions never get a hole.

use crate::config::{Settings, SinkConfig};

/// The sinks of one source as a previous configuration (or the catalog)
/// had them: by position, each one's name (`None`: unnamed).
pub type Previous = Vec<Option<String>>;

/// Puts `sinks` in the order of `old`'s positions, if that needs no hole.
/// Returns whether it changed the order.
pub fn align(old: &[Option<String>], sinks: &mut Vec<SinkConfig>) -> bool {
    let mut slots: Vec<Option<SinkConfig>> = Vec::new();
    slots.resize_with(old.len().max(sinks.len()), || None);
    let mut rest = Vec::new();
    for (j, k) in sinks.iter().enumerate() {
        let at = match &k.name {
            Some(n) => old.iter().position(|o| o.as_deref() == Some(n.as_str())),
            None => (j < old.len() && old[j].is_none()).then_some(j),
        };
        match at {
            Some(i) if slots[i].is_none() => slots[i] = Some(k.clone()),
            _ => rest.push(k.clone()),
        }
    }
    if slots.iter().take(old.len()).any(Option::is_none) {
        // A position in use lost its sink: the file's order, and the
        // reload's rules, decide.
        return false;
    }
    let mut aligned: Vec<SinkConfig> = slots.into_iter().flatten().collect();
    aligned.extend(rest);
    let changed = aligned
        .iter()
        .zip(sinks.iter())
        .any(|(a, b)| a.name != b.name || a.url != b.url);
    *sinks = aligned;
    changed
}

/// Aligns every source of `new` that `previous` knows; returns the ids of
/// the sources whose sinks the file lists in another order.
pub fn align_all(
    new: &mut Settings,
    mut previous: impl FnMut(&str) -> Option<Previous>,
) -> Vec<String> {
    let mut moved = Vec::new();
    for s in &mut new.sources {
        if let Some(old) = previous(&s.id) {
            if align(&old, &mut s.sinks) {
                moved.push(s.id.clone());
            }
        }
    }
    moved
}

/// The positions a running configuration gives its sinks.
pub fn of_settings(old: &Settings, source: &str) -> Option<Previous> {
    old.sources
        .iter()
        .find(|s| s.id == source)
        .map(|s| s.sinks.iter().map(|k| k.name.clone()).collect())
}

/// The positions the store's catalog records for a source (an unnamed
/// sink is recorded under its position, which no name may be).
pub fn of_catalog(catalog: &[ankusa_store::sinks::SinkEntry], source: &str) -> Option<Previous> {
    let mut entries: Vec<_> = catalog.iter().filter(|e| e.source == source).collect();
    if entries.is_empty() {
        return None;
    }
    entries.sort_by_key(|e| e.index);
    // Positions 0..n, each once: anything else is not a catalog this
    // module can align to.
    if entries
        .iter()
        .enumerate()
        .any(|(i, e)| usize::from(e.index) != i)
    {
        return None;
    }
    Some(
        entries
            .iter()
            .map(|e| (!e.name.bytes().all(|b| b.is_ascii_digit())).then(|| e.name.clone()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sinks(names: &[Option<&str>]) -> Vec<SinkConfig> {
        let text = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let name = n.map_or(String::new(), |n| format!("name = \"{n}\"\n"));
                format!(
                    "[[sources.sinks]]\n{name}url = \"http://h/{}\"\n",
                    n.unwrap_or(&i.to_string())
                )
            })
            .collect::<String>();
        let cfg = format!("[store]\npath = \"s\"\n[[sources]]\nid = \"a\"\n{text}");
        let dir = std::env::temp_dir();
        Settings::parse(&cfg, &dir.join("x.toml"), &dir)
            .unwrap()
            .sources
            .remove(0)
            .sinks
    }

    fn names(s: &[SinkConfig]) -> Vec<Option<&str>> {
        s.iter().map(|k| k.name.as_deref()).collect()
    }

    fn old(names: &[Option<&str>]) -> Previous {
        names.iter().map(|n| n.map(str::to_owned)).collect()
    }

    #[test]
    fn a_reordered_file_keeps_every_named_sinks_position() {
        let mut s = sinks(&[Some("c"), Some("a"), Some("new"), Some("b")]);
        assert!(align(&old(&[Some("a"), Some("b"), Some("c")]), &mut s));
        assert_eq!(names(&s), [Some("a"), Some("b"), Some("c"), Some("new")]);
        let mut same = sinks(&[Some("a"), Some("b")]);
        assert!(!align(&old(&[Some("a"), Some("b")]), &mut same));
    }

    #[test]
    fn unnamed_sinks_keep_their_place_and_a_hole_keeps_the_file_order() {
        let mut s = sinks(&[None, Some("b"), Some("a")]);
        assert!(align(&old(&[None, Some("a"), Some("b")]), &mut s));
        assert_eq!(names(&s), [None, Some("a"), Some("b")]);
        // `b` is gone: the order is left to the reload's rules.
        let mut gone = sinks(&[Some("c"), Some("a")]);
        assert!(!align(&old(&[Some("a"), Some("b")]), &mut gone));
        assert_eq!(names(&gone), [Some("c"), Some("a")]);
        // An unnamed sink where a named one was is not that one.
        let mut replaced = sinks(&[None, Some("a")]);
        assert!(!align(&old(&[Some("b"), Some("a")]), &mut replaced));
    }

    #[test]
    fn the_catalog_names_unnamed_sinks_by_position() {
        let e = |index: u16, name: &str| ankusa_store::sinks::SinkEntry {
            source: "a".into(),
            index,
            name: name.into(),
            endpoint: String::new(),
        };
        let cat = [e(1, "ledger"), e(0, "0")];
        assert_eq!(of_catalog(&cat, "a"), Some(old(&[None, Some("ledger")])));
        assert_eq!(of_catalog(&cat, "b"), None);
        assert_eq!(
            of_catalog(&[e(1, "x")], "a"),
            None,
            "a gap is not aligned to"
        );
    }
}
