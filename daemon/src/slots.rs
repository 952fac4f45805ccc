//! Sink positions, which a sink keeps for life and no other sink ever takes.
//!
//! Rows name a sink by its position in its source's list (`seq:u64
//! sink:u16`), and so do stored sink limits, pauses and dead rows. A
//! position that passed from one sink to another would hand the first
//! sink's rows to the second: a hook delivered to an endpoint it was not
//! addressed to, which is worse than a hook lost (issue 47: a restart with
//! a sink taken out of the middle of the file sent its waiting rows to the
//! sink below it).
//!
//! Owns: the alignment of a configuration with the positions already given
//! out, at boot against the store's sink catalog and at a reload against
//! the running configuration (and the catalog's tombstones), and the checks
//! a sink must pass to leave, which boot and reload share.
//!
//! Alignment: a sink of the file takes the position of the sink it is:
//! the same name; for an unnamed sink, the same URL (or, against a catalog
//! an earlier release wrote, which has no URL digests, its place in the
//! file); for a renamed sink, the same URL.
//! A sink new to the source takes the next position never used, in file
//! order. A position whose sink the file no longer has is *leaving*: it
//! becomes a tombstone ([`SinkConfig::tombstone`]) if [`check_leaving`]
//! lets it go, and a tombstone stays one for good, in the configuration and
//! in the catalog, even when its whole source leaves.
//!
//! Invariants:
//! - A position given to a sink is never given to another; positions are
//!   never renumbered. Alignment permutes a source's sinks and adds
//!   tombstones; it never changes a sink's settings.
//! - A sink leaves only with no row due or in flight for it, and, at a
//!   reload, only once it has been retired for a whole generation: no
//!   request admitted while it still took new hooks may be in flight, or
//!   that request could write a row for it after it is gone.

use std::collections::BTreeMap;

use ankusa_store::sinks::{SinkEntry, SinkRef, SinkState};

use crate::config::{url_digest, Settings, SinkConfig, MAX_SINKS};

/// One position of a source as the running configuration, or the store's
/// catalog, had it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The configured name; `None`: unnamed (named by its position).
    pub name: Option<String>,
    /// SHA-256 of its URL (`None`: unknown, in a catalog entry an earlier
    /// release wrote, or a tombstone).
    pub url: Option<[u8; 32]>,
    pub state: SinkState,
    /// For a retired sink, the generation since which it has been retired.
    pub retired_since: u64,
}

impl Slot {
    fn open(&self) -> bool {
        self.state != SinkState::Dropped
    }

    /// The name operators see it under: its name, or its position.
    fn label(&self, source: &str, pos: usize) -> String {
        match &self.name {
            Some(n) => format!("{source}/{n}"),
            None => format!("{source}/{pos}"),
        }
    }
}

/// The positions each source had, by source id.
pub type Previous = BTreeMap<String, Vec<Slot>>;

/// A sink the new configuration no longer has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaving {
    pub sink: SinkRef,
    /// `SOURCE/NAME` as operators knew it.
    pub label: String,
    /// Since which generation it has been retired; `None`: it was not.
    pub retired_since: Option<u64>,
}

/// What aligning a configuration found.
#[derive(Debug, Default)]
pub struct Alignment {
    /// Sources whose sinks the file lists in another order than their
    /// positions.
    pub reordered: Vec<String>,
    /// Sinks that leave: tombstones once [`check_leaving`] lets them go.
    pub leaving: Vec<Leaving>,
    /// The tombstones of sources the file no longer has (catalog entries
    /// to keep, so the same id added back starts after them).
    pub ghosts: Vec<SinkEntry>,
}

/// The positions a catalog records, by source. Positions the catalog skips
/// (none that this release wrote) count as tombstones.
pub fn of_catalog(catalog: &[SinkEntry]) -> Previous {
    let mut out = Previous::new();
    for e in catalog {
        let slots = out.entry(e.source.clone()).or_default();
        let at = usize::from(e.index);
        if slots.len() <= at {
            slots.resize(
                at + 1,
                Slot {
                    name: None,
                    url: None,
                    state: SinkState::Dropped,
                    retired_since: 0,
                },
            );
        }
        // An unnamed sink is recorded under its position, which no name may
        // be.
        let unnamed = e.name.bytes().all(|b| b.is_ascii_digit());
        slots[at] = Slot {
            name: (!unnamed || e.state == SinkState::Dropped).then(|| e.name.clone()),
            url: e.url_digest,
            state: e.state,
            retired_since: 0,
        };
    }
    out
}

/// The positions a running configuration gives, with the catalog's for the
/// sources it does not have (their tombstones).
pub fn of_settings(old: &Settings, catalog: &[SinkEntry]) -> Previous {
    let mut out = of_catalog(catalog);
    for s in &old.sources {
        out.insert(
            s.id.clone(),
            s.sinks
                .iter()
                .map(|k| Slot {
                    name: k.name.clone(),
                    url: (!k.dropped).then(|| url_digest(&k.url)),
                    state: match (k.dropped, k.retired) {
                        (true, _) => SinkState::Dropped,
                        (false, true) => SinkState::Retired,
                        (false, false) => SinkState::Live,
                    },
                    retired_since: k.retired_since,
                })
                .collect(),
        );
    }
    out
}

/// Puts every source of `new` at the positions `previous` gives out, with
/// tombstones where a position has no sink now; `generation` is the one the
/// new configuration will run as (a sink it retires is retired since then).
/// Refused when a source would need more than [`MAX_SINKS`] positions.
pub fn align_all(
    new: &mut Settings,
    previous: &Previous,
    generation: u64,
) -> Result<Alignment, Vec<String>> {
    let mut out = Alignment::default();
    let mut refused = Vec::new();
    for s in &mut new.sources {
        let old = previous.get(&s.id).map(Vec::as_slice).unwrap_or_default();
        match align(&s.id, old, &mut s.sinks, generation) {
            Ok((reordered, leaving)) => {
                if reordered {
                    out.reordered.push(s.id.clone());
                }
                out.leaving.extend(leaving);
            }
            Err(why) => refused.push(why),
        }
    }
    for (id, slots) in previous {
        if new.sources.iter().any(|s| &s.id == id) {
            continue;
        }
        for (pos, slot) in slots.iter().enumerate() {
            let index = u16::try_from(pos).unwrap_or(u16::MAX);
            if slot.open() {
                out.leaving.push(leaving(id, pos, slot));
            }
            out.ghosts.push(SinkEntry {
                state: SinkState::Dropped,
                url_digest: None,
                ..SinkEntry::live(
                    id.clone(),
                    index,
                    slot.name.clone().unwrap_or_else(|| pos.to_string()),
                    String::new(),
                )
            });
        }
    }
    if refused.is_empty() {
        Ok(out)
    } else {
        Err(refused)
    }
}

fn leaving(source: &str, pos: usize, slot: &Slot) -> Leaving {
    Leaving {
        sink: SinkRef::new(source, u16::try_from(pos).unwrap_or(u16::MAX)),
        label: slot.label(source, pos),
        retired_since: (slot.state == SinkState::Retired).then_some(slot.retired_since),
    }
}

/// Aligns one source's sinks with `old`; returns whether the file lists
/// them in another order, and the sinks that leave.
fn align(
    source: &str,
    old: &[Slot],
    sinks: &mut Vec<SinkConfig>,
    generation: u64,
) -> Result<(bool, Vec<Leaving>), String> {
    let mut at: Vec<Option<usize>> = vec![None; sinks.len()];
    let mut taken = vec![false; old.len()];
    let digests: Vec<[u8; 32]> = sinks.iter().map(|k| url_digest(&k.url)).collect();
    let mut matching = |want: &dyn Fn(usize, &SinkConfig, &Slot) -> bool| {
        for (j, k) in sinks.iter().enumerate() {
            if at[j].is_some() {
                continue;
            }
            let found = (0..old.len()).find(|&i| !taken[i] && old[i].open() && want(j, k, &old[i]));
            if let Some(i) = found {
                at[j] = Some(i);
                taken[i] = true;
            }
        }
    };
    // The same name.
    matching(&|_, k, o| k.name.is_some() && k.name == o.name);
    // An unnamed sink: the same URL. Another URL is another sink, since
    // nothing else says it is the same one. Only against a catalog entry an
    // earlier release wrote, which has no URL digest, is an unnamed sink
    // known by its place in the list, as that release knew it.
    matching(&|j, k, o| k.name.is_none() && o.name.is_none() && o.url == Some(digests[j]));
    for (j, k) in sinks.iter().enumerate() {
        if at[j].is_none()
            && k.name.is_none()
            && j < old.len()
            && !taken[j]
            && old[j].open()
            && old[j].name.is_none()
            && old[j].url.is_none()
        {
            at[j] = Some(j);
            taken[j] = true;
        }
    }
    // A new name on the same URL: a rename.
    for j in 0..sinks.len() {
        if at[j].is_some() {
            continue;
        }
        let renamed =
            (0..old.len()).find(|&i| !taken[i] && old[i].open() && old[i].url == Some(digests[j]));
        if let Some(i) = renamed {
            at[j] = Some(i);
            taken[i] = true;
        }
    }
    let added = at.iter().filter(|a| a.is_none()).count();
    if old.len() + added > MAX_SINKS {
        return Err(format!(
            "source {source} would need {} sink positions, and a source has {MAX_SINKS}: a \
             position is never given to another sink, so each sink it ever had, dropped ones \
             included, keeps one. Add the new sinks to a new source",
            old.len() + added
        ));
    }
    let mut slots: Vec<Option<SinkConfig>> = vec![None; old.len()];
    let mut rest = Vec::new();
    let mut order = Vec::new();
    for (j, k) in sinks.drain(..).enumerate() {
        match at[j] {
            Some(i) => {
                slots[i] = Some(k);
                order.push((i, j));
            }
            None => rest.push((j, k)),
        }
    }
    let mut gone = Vec::new();
    let mut aligned = Vec::with_capacity(old.len() + rest.len());
    for (i, (slot, prev)) in slots.into_iter().zip(old).enumerate() {
        match slot {
            Some(mut k) => {
                if k.retired {
                    k.retired_since = if prev.state == SinkState::Retired {
                        prev.retired_since
                    } else {
                        generation
                    };
                }
                aligned.push(k);
            }
            None => {
                if prev.open() {
                    gone.push(leaving(source, i, prev));
                }
                aligned.push(SinkConfig::tombstone(
                    prev.name.clone().unwrap_or_else(|| i.to_string()),
                ));
            }
        }
    }
    for (j, mut k) in rest {
        if k.retired {
            k.retired_since = generation;
        }
        order.push((aligned.len(), j));
        aligned.push(k);
    }
    order.sort_unstable();
    let reordered = order.windows(2).any(|w| w[0].1 > w[1].1);
    *sinks = aligned;
    Ok((reordered, gone))
}

/// Rows still owed to a sink: due (first attempts, retries, parked) and in
/// flight.
pub type Owed<'a> = dyn FnMut(&SinkRef) -> Result<i64, ankusa_store::StoreError> + 'a;

/// Whether the sinks in `leaving` may go, at boot (`admitted: None`: no
/// request is in flight) or at a reload (`admitted`: the oldest generation
/// a request in flight was admitted under). Every reason, one per sink.
/// Boot and reload say the same thing of a sink rows are owed to.
pub fn check_leaving(
    leaving: &[Leaving],
    owed: &mut Owed<'_>,
    admitted: Option<u64>,
) -> Result<Result<(), Vec<String>>, ankusa_store::StoreError> {
    let mut refused = Vec::new();
    for l in leaving {
        let n = owed(&l.sink)?;
        if n > 0 {
            let rows = if n == 1 { "1 row is" } else { "rows are" };
            let rows = if n == 1 {
                rows.to_owned()
            } else {
                format!("{n} {rows}")
            };
            refused.push(format!(
                "sink {} is gone from the file but {rows} owed to it (due or being delivered): \
                 put it back with retired = true until they are delivered (or purge them), then \
                 remove it",
                l.label
            ));
            continue;
        }
        let Some(oldest) = admitted else { continue };
        match l.retired_since {
            None => refused.push(format!(
                "sink {} is gone from the file but was not retired: a request admitted before \
                 this reload may still write a row for it. Set retired = true, reload, then \
                 remove it",
                l.label
            )),
            Some(since) if oldest < since => refused.push(format!(
                "sink {} was retired by configuration generation {since}, and a request \
                 admitted under generation {oldest}, when it still took new hooks, is in \
                 flight: reload again once it is answered",
                l.label
            )),
            Some(_) => {}
        }
    }
    Ok(if refused.is_empty() {
        Ok(())
    } else {
        Err(refused)
    })
}

/// Deletes what was keyed by the sinks that left (their stored limits and
/// their pauses, node-wide and per tenant), each in one synced batch with
/// its audit record (`sink_dropped`, by `who`). Their dead rows stay,
/// listed under `SOURCE/NAME (dropped)`. Nothing could inherit what is left
/// behind (no sink takes the position again), so a failure here only
/// leaves records to clean by hand; the caller logs it.
pub fn forget(
    store: &ankusa_store::Store,
    leaving: &[Leaving],
    who: &ankusa_ops::access::Principal,
    now: u64,
) -> Result<(), ankusa_ops::OpsError> {
    use ankusa_store::{pauses, policy, Batch};
    if leaving.is_empty() {
        return Ok(());
    }
    let paused = pauses::list(store)?;
    for l in leaving {
        let mut b = Batch::new();
        let mut forgot = Vec::new();
        if policy::sink(store, &l.sink)?.is_some() {
            policy::put_sink(
                store,
                &mut b,
                &policy::StoredSinkLimits {
                    sink: l.sink.clone(),
                    limits: policy::SinkLimits::default(),
                    at: now,
                    by: who.name.clone(),
                },
            )?;
            forgot.push("its limits".to_owned());
        }
        let mut n = 0;
        for p in paused
            .iter()
            .filter(|p| p.scope.sink.as_ref() == Some(&l.sink))
        {
            pauses::delete(&mut b, &p.scope)?;
            n += 1;
        }
        if n > 0 {
            forgot.push(format!("{n} pauses"));
        }
        let scope = if forgot.is_empty() {
            l.label.clone()
        } else {
            format!("{} (deleted {})", l.label, forgot.join(" and "))
        };
        ankusa_ops::jobs::audit_in(&mut b, who, "sink_dropped", &scope, "done", n, now)?;
        store.commit(b, true)?;
        tracing::warn!(sink = %l.label, deleted = %forgot.join(", "), "sink dropped: its position is kept as a tombstone");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
