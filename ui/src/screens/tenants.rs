//! The tenants list: ordinal order by pages of the tenants family, name
//! order under a prefix filter (a range scan of the names), or ranked by a
//! counter. A ranking is one bounded scan taken when the operator picks the
//! sort; refreshes then re-read only the visible rows' counters. Rate
//! columns (delivered/s, accepted/s; retried/s and dead-lettered/s when
//! wide) come from the app's samples of those same rows; sorting by a rate
//! orders the page shown (only the rows on screen have rates: a rate of
//! every tenant would need every tenant's counters read every refresh).

use ankusa_store::counters::Field;
use ankusa_store::tenants::TenantInfo;
use ankusa_store::Total;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::pages::Pages;
use super::{Next, Screen, NAME_COL};
use crate::data::{Request, TenantsAfter, TenantsData, TenantsQuery, RANK_LIMIT};
use crate::fmt::{age, bytes, cut_mid, num};
use crate::theme::{block, loading, Theme, DEAD, PAUSED};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantsState {
    pub filter: String,
    pub sort: Option<Field>,
    /// Where the current page starts (an ordinal, or a name under a prefix
    /// filter), and the pages before.
    pub pages: Pages<TenantsAfter>,
    pub page: Option<TenantsData>,
    /// Counter order: the ranking (taken when the sort was picked) and the
    /// page shown of it.
    pub ranked: Option<(Field, Vec<TenantInfo>, u64)>,
    pub rank_page: usize,
    pub sel: usize,
    /// Sorted by this rate (the page shown), in [`TenantsState::rate_order`].
    pub rate_sort: Option<Total>,
    /// The page's ordinals by the rate, fastest first (set by the app when
    /// the rows' rates change).
    pub rate_order: Vec<u32>,
    /// Ids of the page's (or the ranking's) tenants paused as a whole, as
    /// of their last reading.
    pub paused: Vec<String>,
    /// Ids of the page's (or the ranking's) tenants with a policy of
    /// their own (marked `*`).
    pub policies: Vec<String>,
}

/// What the list is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Ordinal,
    /// Ranked by a counter (a bounded scan when picked).
    Counter(Field),
    /// The page shown, by a rate.
    Rate(Total),
}

/// The sort keys `s` cycles through.
const SORTS: [SortKey; 9] = [
    SortKey::Ordinal,
    SortKey::Counter(Field::Pending),
    SortKey::Counter(Field::Scheduled),
    SortKey::Counter(Field::Inflight),
    SortKey::Counter(Field::Dead),
    SortKey::Counter(Field::Bytes),
    SortKey::Counter(Field::ArchivePending),
    SortKey::Rate(Total::Delivered),
    SortKey::Rate(Total::Accepted),
];

/// Rate columns shown: two at any width, four from this width on.
const WIDE: u16 = 120;

impl TenantsState {
    /// The ranked rows on the current page of `n` rows, filtered by name
    /// prefix (the same rule as the unsorted list's range scan).
    pub fn ranked_visible(&self, n: usize) -> Vec<&TenantInfo> {
        let Some((_, rows, _)) = &self.ranked else {
            return Vec::new();
        };
        let prefix = self.filter.as_str();
        rows.iter()
            .filter(|t| t.id.starts_with(prefix))
            .skip(self.rank_page * n)
            .take(n)
            .collect()
    }

    /// The rows the screen shows, `n` to a page.
    pub fn rows(&self, n: usize) -> Vec<&TenantInfo> {
        if self.sort.is_some() {
            return self.ranked_visible(n);
        }
        let mut rows: Vec<&TenantInfo> = match &self.page {
            Some(p) => p.rows.iter().collect(),
            None => Vec::new(),
        };
        if self.rate_sort.is_some() {
            rows.sort_by_key(|t| {
                self.rate_order
                    .iter()
                    .position(|o| *o == t.ord)
                    .unwrap_or(usize::MAX)
            });
        }
        rows
    }

    pub fn requests(&self, n: usize) -> Vec<Request> {
        match (self.sort, &self.ranked) {
            (Some(f), Some((rf, _, _))) if *rf == f => {
                let ords: Vec<u32> = self.ranked_visible(n).iter().map(|t| t.ord).collect();
                if ords.is_empty() {
                    Vec::new()
                } else {
                    vec![Request::CountersOf(ords)]
                }
            }
            (Some(f), _) => vec![Request::Rank {
                field: f,
                limit: RANK_LIMIT,
            }],
            (None, _) => vec![Request::Tenants(TenantsQuery {
                after: self.pages.at.clone(),
                filter: self.filter.clone(),
                limit: n,
            })],
        }
    }

    /// A page arrived; taken only if it answers the page shown now.
    pub fn on_page(&mut self, p: TenantsData) -> bool {
        if p.query.after == self.pages.at && p.query.filter == self.filter {
            self.paused = p.paused.clone();
            self.policies = p.policies.clone();
            self.page = Some(p);
            return true;
        }
        false
    }

    /// A ranking arrived; taken only if it is by the current sort.
    pub fn on_ranked(
        &mut self,
        field: Field,
        rows: Vec<TenantInfo>,
        (paused, policies): (Vec<String>, Vec<String>),
        at: u64,
        status: &mut String,
    ) -> bool {
        if self.sort == Some(field) {
            status.clear();
            self.paused = paused;
            self.policies = policies;
            self.ranked = Some((field, rows, at));
            return true;
        }
        false
    }

    pub fn on_counters(&mut self, cs: Vec<(u32, ankusa_store::Counters, ankusa_store::Totals)>) {
        if let Some((_, rows, _)) = &mut self.ranked {
            for (ord, c, totals) in cs {
                if let Some(t) = rows.iter_mut().find(|t| t.ord == ord) {
                    t.counters = c;
                    t.totals = totals;
                }
            }
        }
    }

    pub fn key(&self) -> SortKey {
        match (self.sort, self.rate_sort) {
            (Some(f), _) => SortKey::Counter(f),
            (None, Some(t)) => SortKey::Rate(t),
            (None, None) => SortKey::Ordinal,
        }
    }

    /// The sort after the current one (`s`).
    pub fn next_sort(&self) -> SortKey {
        let k = self.key();
        let i = SORTS.iter().position(|f| *f == k).unwrap_or(0);
        SORTS[(i + 1) % SORTS.len()]
    }

    pub fn set_sort(&mut self, k: SortKey, status: &mut String) {
        self.sort = match k {
            SortKey::Counter(f) => Some(f),
            _ => None,
        };
        self.rate_sort = match k {
            SortKey::Rate(t) => Some(t),
            _ => None,
        };
        self.rate_order.clear();
        self.ranked = None;
        self.rank_page = 0;
        self.sel = 0;
        *status = match k {
            SortKey::Counter(f) => format!("ranking the top {RANK_LIMIT} tenants by {}", f.name()),
            SortKey::Rate(t) => format!("this page by {}/s", t.name()),
            SortKey::Ordinal => "ordinal order".into(),
        };
    }

    pub fn set_filter(&mut self, text: String) {
        self.filter = text.trim().to_owned();
        self.pages.reset();
        self.page = None;
        self.rank_page = 0;
        self.sel = 0;
    }

    /// `g`: back to the first page; whether it moved.
    pub fn first_page(&mut self) -> bool {
        if self.sort.is_none() && self.pages.first() {
            return true;
        }
        if self.rank_page > 0 {
            self.rank_page = 0;
            return true;
        }
        false
    }

    /// PgDn / PgUp over pages of `n` rows; whether the page changed.
    pub fn page(&mut self, down: bool, n: usize, status: &mut String) -> bool {
        if self.sort.is_some() {
            let total = self.ranked.as_ref().map_or(0, |r| r.1.len());
            if down && (self.rank_page + 1) * n < total {
                self.rank_page += 1;
            } else if !down && self.rank_page > 0 {
                self.rank_page -= 1;
            } else {
                return false;
            }
            self.sel = 0;
            return true;
        }
        if down {
            let Some(p) = &self.page else {
                return false;
            };
            let Some(next) = p.next.clone() else {
                *status = "last page".into();
                return false;
            };
            self.pages.forward(next);
        } else if !self.pages.backward() {
            return false;
        }
        self.sel = 0;
        self.page = None;
        true
    }

    /// Whether the tenant is paused as a whole (its PAUSED badge).
    pub fn is_paused(&self, id: &str) -> bool {
        self.paused.iter().any(|p| p == id)
    }

    /// The selected tenant: its id, and whether it is paused (`H`/`U`).
    pub fn selected(&self, n: usize) -> Option<(String, bool)> {
        self.rows(n)
            .get(self.sel)
            .map(|t| (t.id.clone(), self.is_paused(&t.id)))
    }

    /// Enter: the selected tenant's detail.
    pub fn open(&self, n: usize) -> Next {
        match self.rows(n).get(self.sel) {
            Some(t) => Next::Push(Screen::Tenant { ord: t.ord }),
            None => Next::Stay,
        }
    }
}

fn counter_cells(c: &ankusa_store::Counters) -> Vec<String> {
    vec![
        num(c.pending),
        num(c.scheduled),
        num(c.inflight),
        num(c.dead),
        bytes(c.bytes),
        num(c.archive_pending),
    ]
}

const COUNTER_TITLES: [&str; 6] = ["pending", "sched", "inflight", DEAD, "bytes", "archive"];

/// The dead count's column: after ord and tenant, `COUNTER_TITLES[3]`.
const DEAD_COL: usize = 2 + 3;

/// The rate columns at a width.
fn rate_cols(width: u16) -> &'static [Total] {
    if width >= WIDE {
        &[
            Total::Delivered,
            Total::Accepted,
            Total::Retried,
            Total::DeadLettered,
        ]
    } else {
        &[Total::Delivered, Total::Accepted]
    }
}

pub fn draw(
    f: &mut Frame,
    t: &TenantsState,
    rows: Vec<&TenantInfo>,
    now: u64,
    rates: (&crate::rates::RateBook, bool),
    theme: &Theme,
    area: Rect,
) {
    let (book, live) = rates;
    let order = match t.key() {
        // A prefix filter is a range scan of the names: name order.
        SortKey::Ordinal if !t.filter.is_empty() => "name order".to_owned(),
        SortKey::Ordinal => "ordinal order".to_owned(),
        SortKey::Counter(fl) => format!("by {} ↓", fl.name()),
        SortKey::Rate(r) => format!("this page by {}/s ↓", r.name()),
    };
    let mut title = format!(" Tenants ({order}");
    if !t.filter.is_empty() {
        title.push_str(&format!(", name starts with {:?}", t.filter));
    }
    match (&t.sort, &t.page, &t.ranked) {
        (None, Some(p), _) => {
            title.push_str(&format!(", page {}", t.pages.number()));
            if p.next.is_none() {
                title.push_str(", last");
            }
            title.push_str(&format!(", {} tenants)", num(i64::from(p.total))));
        }
        (Some(_), _, Some((_, rows, at))) => {
            title.push_str(&format!(
                ", page {}, top {} ranked {} ago; r re-ranks)",
                t.rank_page + 1,
                rows.len(),
                age(now.saturating_sub(*at))
            ));
        }
        _ => title.push(')'),
    }
    if !live {
        title.push_str(" no daemon: no rates ");
    }
    if rows.is_empty() && t.page.is_none() && t.ranked.is_none() {
        return loading(f, title, theme, area);
    }
    // Narrow: bytes and archive give way to the rates.
    let wide = area.width >= WIDE;
    let shown_fields: &[Field] = if wide { &Field::ALL } else { &Field::ALL[..4] };
    let rate_cols = rate_cols(area.width);
    let mut head = vec!["ord".to_owned(), "tenant".to_owned()];
    for (i, fl) in shown_fields.iter().enumerate() {
        let h = COUNTER_TITLES[i];
        head.push(if t.key() == SortKey::Counter(*fl) {
            format!("{h}↓")
        } else {
            h.to_owned()
        });
    }
    for r in rate_cols {
        let h = super::trends::short(*r);
        head.push(if t.key() == SortKey::Rate(*r) {
            format!("{h}↓")
        } else {
            h.to_owned()
        });
    }
    // The name column takes what the page's longest name (with its marks)
    // needs, from the width the figures leave, and gives up width only
    // when there is none; a cut name keeps both ends (`tenant-…-000042`).
    let marks = |ti: &TenantInfo| {
        let steered = t.policies.iter().any(|p| p == &ti.id);
        let paused = t.is_paused(&ti.id);
        usize::from(steered) * 2 + usize::from(paused) * (PAUSED.len() + 1)
    };
    let fixed_cols = 1 + shown_fields.len() + rate_cols.len();
    let fixed =
        6 + 8 * shown_fields.len().min(4) + if wide { 8 + 7 } else { 0 } + 7 * rate_cols.len();
    // One column of spacing between each two columns.
    let room = usize::from(area.width)
        .saturating_sub(2 + fixed + fixed_cols)
        .max(NAME_COL);
    let name_w = rows
        .iter()
        .map(|ti| ti.id.chars().count() + marks(ti))
        .max()
        .unwrap_or(0)
        .max(NAME_COL)
        .min(room);
    let body: Vec<Row> = rows
        .iter()
        .enumerate()
        .map(|(i, ti)| {
            // A paused tenant's name makes room for the badge.
            // So does the `*` of a tenant with a policy of its own.
            let paused = t.is_paused(&ti.id);
            let steered = t.policies.iter().any(|p| p == &ti.id);
            let mark = if steered { " *" } else { "" };
            let name = if paused {
                Line::from(vec![
                    Span::raw(format!(
                        "{}{mark} ",
                        cut_mid(&ti.id, name_w.saturating_sub(PAUSED.len() + 1 + mark.len()))
                    )),
                    theme.paused_badge(),
                ])
            } else {
                Line::from(format!(
                    "{}{mark}",
                    cut_mid(&ti.id, name_w.saturating_sub(mark.len()))
                ))
            };
            let mut cells = vec![ti.ord.to_string(), String::new()];
            cells.extend(
                counter_cells(&ti.counters)
                    .into_iter()
                    .take(shown_fields.len()),
            );
            for r in rate_cols {
                cells.push(super::trends::rate_cell(book.tenant(ti.ord), *r, live));
            }
            // The count sits under the "dead" heading: the colour adds to
            // the words, it does not replace them.
            let dead = ti.counters.dead > 0;
            let mut name = Some(name);
            let r = Row::new(cells.into_iter().enumerate().map(|(c, text)| {
                if c == 1 {
                    Cell::from(name.take().unwrap_or_default())
                } else if dead && c == DEAD_COL {
                    Cell::from(text).style(theme.dead())
                } else {
                    Cell::from(text)
                }
            }));
            if i == t.sel {
                r.style(theme.selected())
            } else {
                r
            }
        })
        .collect();
    let mut widths = vec![
        Constraint::Length(6),
        Constraint::Length(u16::try_from(name_w).unwrap_or(u16::MAX)),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
    ];
    if wide {
        widths.extend([Constraint::Length(8), Constraint::Length(7)]);
    }
    widths.extend(rate_cols.iter().map(|_| Constraint::Length(7)));
    let empty = rows.is_empty();
    let table = Table::new(body, widths)
        .header(Row::new(head).style(theme.title()))
        .block(block(title, theme));
    f.render_widget(table, area);
    if empty {
        let inner = Rect {
            y: area.y + 2,
            height: 1,
            ..area.inner(ratatui::layout::Margin::new(1, 0))
        };
        f.render_widget(Paragraph::new("  no tenants match"), inner);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_dead_column_is_the_dead_counter() {
        assert_eq!(super::COUNTER_TITLES[super::DEAD_COL - 2], super::DEAD);
    }
}
