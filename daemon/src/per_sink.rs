//! A map keyed by sink (a source id and a position) that is read by `&str`
//! without allocating.
//!
//! Why: the breakers and the health board are each looked up once or twice
//! per delivery attempt, and a `(String, u16)` key made every lookup copy
//! the source id into a new `String`. Keyed by source first, a lookup
//! borrows the id it is given.

use std::collections::HashMap;

/// One value per sink.
#[derive(Debug)]
pub struct PerSink<T> {
    by_source: HashMap<String, HashMap<u16, T>>,
}

impl<T> Default for PerSink<T> {
    fn default() -> Self {
        PerSink {
            by_source: HashMap::new(),
        }
    }
}

impl<T> PerSink<T> {
    pub fn get(&self, source: &str, sink: u16) -> Option<&T> {
        self.by_source.get(source)?.get(&sink)
    }

    pub fn insert(&mut self, source: &str, sink: u16, value: T) {
        self.by_source
            .entry(source.to_owned())
            .or_default()
            .insert(sink, value);
    }

    pub fn is_empty(&self) -> bool {
        self.by_source.values().all(HashMap::is_empty)
    }

    /// Every sink and its value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = ((&String, &u16), &T)> {
        self.by_source
            .iter()
            .flat_map(|(src, m)| m.iter().map(move |(i, v)| ((src, i), v)))
    }

    /// Every sink, by source id and then position (the order `/metrics`
    /// lists them in).
    pub fn sorted_keys(&self) -> Vec<(&str, u16)> {
        let mut keys: Vec<(&str, u16)> = self.iter().map(|((s, i), _)| (s.as_str(), *i)).collect();
        keys.sort_unstable();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_is_found_by_its_source_and_position_and_listed_in_order() {
        let mut m = PerSink::default();
        assert!(m.is_empty());
        m.insert("shop", 1, "b");
        m.insert("blog", 0, "c");
        m.insert("shop", 0, "a");
        assert_eq!(m.get("shop", 0), Some(&"a"));
        assert_eq!(m.get("shop", 2), None);
        assert_eq!(m.get("nope", 0), None);
        assert_eq!(m.sorted_keys(), vec![("blog", 0), ("shop", 0), ("shop", 1)]);
        assert_eq!(m.iter().count(), 3);
        assert!(!m.is_empty());
    }
}
