//! Deliveries in flight per sink, counted where rows are claimed.
//!
//! `dispatch.per_sink` bounds the deliveries in flight to one sink (a
//! source's sink). It is enforced when the dispatcher claims rows, not when
//! a delivery starts: a row claimed for a sink at its bound would wait for
//! a permit while holding a slot of the node's `max_inflight` and of its
//! tenant, and one slow sink then ends up holding nearly every slot of the
//! node (issue 19: with four sinks, one answering in 200 ms, every sink was
//! served at the slow one's pace). Rows of a full sink stay due, and the
//! dispatcher walks past them to the tenant's other rows.
//!
//! Owns: which sink a due row means, and the room each sink has left in a
//! tick. A due row names its sink by position in its hook's source; when
//! one source only has that position the position names the sink, and
//! otherwise the hook's source is read (once per hook and tick, and only
//! for a row whose position is full for some source or that is claimed).
//!
//! A sink's own limits (`max_in_flight`, `rate`; configured or set at run
//! time, see `dispatch::steer`) lower its room the same way: a row of a
//! sink at its bound or out of tokens stays due, no attempt spent.
//!
//! Invariant: a tick never hands out more rows of a sink than its bound
//! (`per_sink`, or its lower `max_in_flight`) minus the rows of it in
//! flight, nor more than its rate's tokens ([`SinkRoom::take`] counts each
//! claim).

use std::collections::HashMap;

use ankusa_store::{queries, DueRow, Store, StoreError};

use super::config::Source;

/// One sink: a source (by its place in the configuration) and a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SinkKey {
    pub source: u32,
    pub sink: u16,
}

/// The configured sources and sinks, by source id and by position, with
/// each source's weight (its scheduler group's share).
#[derive(Debug, Default)]
pub struct SinkMap {
    index: HashMap<String, u32>,
    /// For each sink position, the sources that have it.
    by_position: Vec<Vec<u32>>,
    /// Each source's weight, by its index (1 when unset).
    weights: Vec<u32>,
}

impl SinkMap {
    pub fn new(sources: &[Source]) -> Self {
        SinkMap::weighted(
            sources
                .iter()
                .map(|s| (s.id.as_str(), s.sinks.len(), s.weight)),
        )
    }

    /// From each source's id, number of sinks and weight, in configuration
    /// order.
    pub fn weighted<'s>(sources: impl IntoIterator<Item = (&'s str, usize, u32)>) -> Self {
        let (mut weights, mut counts) = (Vec::new(), Vec::new());
        for (id, sinks, w) in sources {
            counts.push((id, sinks));
            weights.push(w.max(1));
        }
        let mut m = SinkMap::of(counts);
        m.weights = weights;
        m
    }

    /// The map of a reloaded configuration (each source's id, number of
    /// sinks and weight). A source keeps its index, which the in-flight
    /// counts and the scheduler's groups are keyed by; a new source takes
    /// the next one; a removed one keeps its index with no sinks, so that no
    /// index is ever given to another source.
    pub fn reconfigured<'s>(
        &self,
        sources: impl IntoIterator<Item = (&'s str, usize, u32)>,
    ) -> SinkMap {
        let mut m = SinkMap {
            index: self.index.clone(),
            by_position: Vec::new(),
            weights: vec![1; self.weights.len()],
        };
        let mut next = u32::try_from(self.index.len()).unwrap_or(u32::MAX);
        for (id, sinks, w) in sources {
            let i = match m.index.get(id) {
                Some(&i) => i,
                None => {
                    let i = next;
                    next = next.saturating_add(1);
                    m.index.insert(id.to_owned(), i);
                    i
                }
            };
            let at = i as usize;
            if m.weights.len() <= at {
                m.weights.resize(at + 1, 1);
            }
            m.weights[at] = w.max(1);
            for p in 0..sinks {
                if m.by_position.len() <= p {
                    m.by_position.resize_with(p + 1, Vec::new);
                }
                m.by_position[p].push(i);
            }
        }
        m
    }

    /// The weight of source `source` (by index) among the sources: 1 for a
    /// source without one, or one that is not configured.
    pub fn weight(&self, source: u32) -> u32 {
        self.weights
            .get(source as usize)
            .copied()
            .unwrap_or(1)
            .max(1)
    }

    /// From each source's id and number of sinks, in configuration order.
    pub fn of<'s>(sources: impl IntoIterator<Item = (&'s str, usize)>) -> Self {
        let mut m = SinkMap::default();
        for (i, (id, sinks)) in sources.into_iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            m.index.insert(id.to_owned(), i);
            for p in 0..sinks {
                if m.by_position.len() <= p {
                    m.by_position.resize_with(p + 1, Vec::new);
                }
                m.by_position[p].push(i);
            }
        }
        m
    }

    /// The sink `sink` of source `source`, if it is configured.
    pub fn key(&self, source: &str, sink: u16) -> Option<SinkKey> {
        let source = *self.index.get(source)?;
        self.by_position
            .get(usize::from(sink))?
            .contains(&source)
            .then_some(SinkKey { source, sink })
    }

    fn sources_at(&self, sink: u16) -> &[u32] {
        self.by_position
            .get(usize::from(sink))
            .map_or(&[], Vec::as_slice)
    }
}

/// The sink bounds of one tick: per limited sink, its in-flight bound and
/// the claims its rate allows now.
#[derive(Debug, Default, Clone)]
pub struct SinkBounds {
    pub in_flight: HashMap<SinkKey, u32>,
    pub tokens: HashMap<SinkKey, u32>,
}

/// The room each sink has left in one tick: `per_sink` minus its rows in
/// flight minus the rows this tick already took for it.
#[derive(Debug)]
pub struct SinkRoom<'a> {
    map: &'a SinkMap,
    cap: u32,
    used: HashMap<SinkKey, u32>,
    /// Sinks with a lower in-flight bound than `cap` (their limits).
    bounds: HashMap<SinkKey, u32>,
    /// Sinks with a rate: the claims it allows in what is left of this
    /// tick.
    tokens: HashMap<SinkKey, u32>,
    /// Rows the visit under way offered per sink whose room is within a
    /// walk's reach ([`SinkRoom::offer`]).
    offered: HashMap<SinkKey, u32>,
    /// Sources of the hooks read this tick (`None`: the hook is gone or
    /// its source is not configured).
    sources: HashMap<u64, Option<u32>>,
}

impl<'a> SinkRoom<'a> {
    /// `inflight`: rows in flight per sink now.
    pub fn new(map: &'a SinkMap, cap: u32, inflight: HashMap<SinkKey, u32>) -> Self {
        SinkRoom {
            map,
            cap,
            used: inflight,
            bounds: HashMap::new(),
            tokens: HashMap::new(),
            offered: HashMap::new(),
            sources: HashMap::new(),
        }
    }

    /// With the sinks' own limits: an in-flight bound (below `cap`, never
    /// above it) and the claims a rate allows this tick.
    pub fn limited(mut self, bounds: SinkBounds) -> Self {
        self.bounds = bounds.in_flight;
        self.tokens = bounds.tokens;
        self
    }

    /// No sink configured, so no bound (`bench dispatch-tick`).
    pub fn unbounded(map: &'a SinkMap) -> Self {
        SinkRoom::new(map, u32::MAX, HashMap::new())
    }

    /// The weight of source `source` ([`SinkMap::weight`]).
    pub fn weight(&self, source: u32) -> u32 {
        self.map.weight(source)
    }

    /// Whether `k` can take one more row now.
    pub fn has_room(&self, k: SinkKey) -> bool {
        self.room(k) > 0
    }

    /// Rows `k` can take now.
    pub fn room(&self, k: SinkKey) -> u32 {
        let cap = self.bounds.get(&k).map_or(self.cap, |&b| b.min(self.cap));
        let room = cap.saturating_sub(self.used.get(&k).copied().unwrap_or(0));
        self.tokens.get(&k).map_or(room, |&t| room.min(t))
    }

    /// The sink `row` is owed to, if it is configured.
    pub fn resolve(&mut self, store: &Store, row: &DueRow) -> Result<Option<SinkKey>, StoreError> {
        let sink = row.sink;
        let source = match self.map.sources_at(sink) {
            [] => None,
            [only] => Some(*only),
            _ => match self.sources.get(&row.seq) {
                Some(s) => *s,
                None => {
                    let s = queries::hook_source(store, row.seq)?
                        .and_then(|id| self.map.index.get(&id).copied());
                    self.sources.insert(row.seq, s);
                    s
                }
            },
        };
        Ok(source.map(|source| SinkKey { source, sink }))
    }

    /// The source (by index) of `row`'s hook, if it is configured: a read of
    /// the hook only where the row's sink position is shared by several
    /// sources, once per hook and tick.
    pub fn source(&mut self, store: &Store, row: &DueRow) -> Result<Option<u32>, StoreError> {
        Ok(self.resolve(store, row)?.map(|k| k.source))
    }

    /// A tenant's visit starts: nothing of it offered yet.
    pub fn begin_visit(&mut self) {
        self.offered.clear();
    }

    /// Room left for the visit under way: the sink's room minus the rows
    /// this visit already offered of it.
    fn room_to_offer(&self, k: SinkKey) -> u32 {
        self.room(k)
            .saturating_sub(self.offered.get(&k).copied().unwrap_or(0))
    }

    /// Counts a row a visit offers against its sink's room, so that one
    /// visit never offers more rows of a sink than it can take: a sink with
    /// room for one row (a rate's token) would otherwise fill the visit's
    /// `keys` with its own rows, which the claim refuses, and the tenant's
    /// rows for its other sinks behind them would not be read. Between
    /// tenants, the scheduler asks [`SinkRoom::take`] before it claims a
    /// row. Only a sink whose room is within `keys` is counted (a visit
    /// reads no more than `keys` rows), so the common case resolves
    /// nothing.
    /// Returns the sink when this row used up its room.
    pub fn offer(
        &mut self,
        store: &Store,
        row: &DueRow,
        keys: usize,
    ) -> Result<Option<SinkKey>, StoreError> {
        let reach = u32::try_from(keys).unwrap_or(u32::MAX);
        let tight = self.map.sources_at(row.sink).iter().any(|&source| {
            self.room(SinkKey {
                source,
                sink: row.sink,
            }) <= reach
        });
        if !tight {
            return Ok(None);
        }
        let Some(k) = self.resolve(store, row)? else {
            return Ok(None);
        };
        *self.offered.entry(k).or_insert(0) += 1;
        Ok((self.room_to_offer(k) == 0).then_some(k))
    }

    /// The sink of `row` when it is at its bound, counting what this visit
    /// offered (the row must wait), else `None`. Reads nothing for a
    /// position no source has full.
    pub fn full(&mut self, store: &Store, row: &DueRow) -> Result<Option<SinkKey>, StoreError> {
        let any_full = self.map.sources_at(row.sink).iter().any(|&source| {
            self.room_to_offer(SinkKey {
                source,
                sink: row.sink,
            }) == 0
        });
        if !any_full {
            return Ok(None);
        }
        Ok(self
            .resolve(store, row)?
            .filter(|k| self.room_to_offer(*k) == 0))
    }

    /// Takes one slot of `row`'s sink for a claim: `Ok(None)` when the sink
    /// is full (the row stays due), else the sink (`Some(None)` for a row
    /// whose sink is not configured: it is claimed, and its delivery
    /// records why it cannot be sent).
    pub fn take(
        &mut self,
        store: &Store,
        row: &DueRow,
    ) -> Result<Option<Option<SinkKey>>, StoreError> {
        match self.resolve(store, row)? {
            None => Ok(Some(None)),
            Some(k) if self.has_room(k) => {
                *self.used.entry(k).or_insert(0) += 1;
                if let Some(t) = self.tokens.get_mut(&k) {
                    *t = t.saturating_sub(1);
                }
                Ok(Some(Some(k)))
            }
            Some(_) => Ok(None),
        }
    }
}
