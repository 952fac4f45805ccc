//! Tenants over their policy: those whose cap or rate, not the node's
//! ceiling, bounded what a tick could read for them, and since when.
//!
//! Owns the "since" of each tenant a tick found filling the room its
//! policy leaves (`Turn::policy_binds`), so `/metrics` can say which
//! tenant has been held back, and for how long, without a label per
//! tenant ever seen (the alert "a tenant over its policy for long",
//! docs/alerts.md).
//!
//! Invariants: a tenant is in the table only while every visit of it
//! since `since` found it held; a visit that found room to spare removes
//! it, and so does going unvisited for [`STALE_MS`] (it left the active
//! set: nothing of it is due). So the table is bounded by the active
//! tenants.
//!
//! Cost: a tick's [`PolicyHeld::note`] is O(tenants visited). The sweep of
//! stale entries and the top-N the metrics show ([`PolicyHeld::report`])
//! walk the whole table, so the dispatcher asks for them at most once every
//! [`REPORT_MS`], not every tick: with a `[tenants] rate` default every
//! backlogged tenant can be held at once.

use std::collections::HashMap;

/// A held tenant not visited for this long has left the active set.
pub const STALE_MS: u64 = 10_000;

/// The metrics' view of the table is rebuilt at most this often.
pub const REPORT_MS: u64 = 1_000;

#[derive(Debug, Clone)]
struct Held {
    since: u64,
    seen: u64,
    /// Its name, read once when it became held (`None`: not readable, or
    /// a tenant since deleted; it is counted but not labelled).
    name: Option<String>,
}

/// The tenants a tick found over their policy.
#[derive(Debug, Default)]
pub struct PolicyHeld {
    tenants: HashMap<u32, Held>,
}

impl PolicyHeld {
    /// Records one tick's visits at `now`: each tenant visited and whether
    /// its policy held it. `name` is asked once per tenant newly held.
    /// O(visits): stale entries go at the next [`PolicyHeld::report`].
    pub fn note(
        &mut self,
        now: u64,
        visits: &[(u32, bool)],
        mut name: impl FnMut(u32) -> Option<String>,
    ) {
        for &(ord, held) in visits {
            if !held {
                self.tenants.remove(&ord);
                continue;
            }
            let h = self.tenants.entry(ord).or_insert_with(|| Held {
                since: now,
                seen: now,
                name: name(ord),
            });
            h.seen = now;
        }
    }

    /// Drops the tenants unvisited for [`STALE_MS`], then says how many
    /// are held and which `top` have been held longest, by name with the
    /// milliseconds held, longest first. O(table): the top is selected in
    /// linear time, and only its names are copied.
    pub fn report(&mut self, now: u64, top: usize) -> (usize, Vec<(String, u64)>) {
        self.tenants
            .retain(|_, h| now.saturating_sub(h.seen) < STALE_MS);
        let mut named: Vec<(&str, u64)> = self
            .tenants
            .values()
            .filter_map(|h| Some((h.name.as_deref()?, now.saturating_sub(h.since))))
            .collect();
        let longest = |a: &(&str, u64), b: &(&str, u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0));
        if named.len() > top && top > 0 {
            named.select_nth_unstable_by(top - 1, longest);
        }
        named.truncate(top);
        named.sort_by(longest);
        let named = named
            .into_iter()
            .map(|(n, ms)| (n.to_owned(), ms))
            .collect();
        (self.tenants.len(), named)
    }

    pub fn is_empty(&self) -> bool {
        self.tenants.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(ord: u32) -> Option<String> {
        Some(format!("t{ord}"))
    }

    #[test]
    fn a_tenant_held_on_every_visit_keeps_its_since_and_one_with_room_leaves() {
        let mut h = PolicyHeld::default();
        h.note(1_000, &[(1, true), (2, true), (3, false)], name);
        h.note(5_000, &[(1, true), (2, false)], name);
        let (n, top) = h.report(9_000, 10);
        assert_eq!(n, 1);
        assert_eq!(top, vec![("t1".to_string(), 8_000)]);
        // Held again later, it starts over.
        h.note(9_500, &[(2, true)], name);
        assert_eq!(h.report(10_000, 10).1[1], ("t2".to_string(), 500));
    }

    #[test]
    fn a_tenant_left_unvisited_goes_and_the_report_is_bounded() {
        let mut h = PolicyHeld::default();
        let all: Vec<(u32, bool)> = (0..50).map(|o| (o, true)).collect();
        h.note(0, &all, name);
        h.note(STALE_MS - 1, &[(7, true)], name);
        assert_eq!(h.report(STALE_MS - 1, 3).0, 50);
        assert_eq!(h.report(STALE_MS - 1, 3).1.len(), 3);
        h.note(STALE_MS, &[(7, true)], name);
        assert_eq!(h.report(STALE_MS, 3).0, 1, "the other 49 went unvisited");
        // The top is the held longest, in order, whatever the table's order.
        let mut t = PolicyHeld::default();
        for o in (0..200u32).rev() {
            t.note(u64::from(o) * 10, &[(o, true)], name);
        }
        t.note(
            5_000,
            &(0..200u32).map(|o| (o, true)).collect::<Vec<_>>(),
            name,
        );
        let top: Vec<String> = t.report(5_000, 10).1.into_iter().map(|x| x.0).collect();
        let want: Vec<String> = (0..10).map(|o| format!("t{o}")).collect();
        assert_eq!(top, want);
        let mut asked = 0;
        h.note(STALE_MS + 1, &[(7, true), (8, true)], |o| {
            asked += 1;
            name(o)
        });
        assert_eq!(asked, 1, "a name is read once, when a tenant becomes held");
    }

    #[test]
    fn an_unnamed_tenant_is_counted_not_labelled() {
        let mut h = PolicyHeld::default();
        h.note(0, &[(1, true)], |_| None);
        assert_eq!(h.report(10, 10), (1, vec![]));
    }
}
