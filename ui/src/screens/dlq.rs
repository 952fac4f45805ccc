//! The DLQ: dead rows of every tenant or of one, newest or oldest first,
//! by cursor pages; rows marked with `x` are what `R` replays. Marks
//! survive paging and a change of order, and are cleared by an action
//! that finished.

use std::collections::BTreeSet;

use ankusa_store::queries::{DlqCursor, DlqOrder};
use ankusa_store::rows::DeadRow;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

use super::pages::Pages;
use super::{Next, Screen};
use crate::data::{DlqData, Request};
use crate::fmt::{age, cut_left, cut_mid, fit, num, utc};
use crate::theme::{block, loading, Theme};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DlqState {
    /// Newest first (what just failed) or oldest first (what waited longest).
    pub order: DlqOrder,
    /// Where the shown page starts, and the pages before.
    pub pages: Pages<DlqCursor>,
    pub data: Option<DlqData>,
    pub sel: usize,
    pub marked: BTreeSet<(u64, u64, u16)>,
    pub marked_rows: Vec<DeadRow>,
    /// `:dlq-type PATTERN`: only rows of hooks whose event type matches.
    pub event_type: Option<String>,
}

impl DlqState {
    pub fn requests(&self, ord: Option<u32>, list_rows: usize) -> Vec<Request> {
        vec![Request::Dlq {
            ord,
            cursor: self.pages.at,
            limit: list_rows,
            order: self.order,
            event_type: self.event_type.clone(),
        }]
    }

    /// A page arrived for the DLQ of `shown` (the screen's tenant); taken
    /// only if it answers the page shown now.
    pub fn on_page(&mut self, shown: Option<u32>, d: DlqData) -> bool {
        if shown == d.ord
            && d.cursor == self.pages.at
            && d.order == self.order
            && d.event_type == self.event_type
        {
            self.data = Some(d);
            return true;
        }
        false
    }

    pub fn rows_shown(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.page.entries.len())
    }

    pub fn selected(&self) -> Option<&DeadRow> {
        self.data
            .as_ref()
            .and_then(|d| d.page.entries.get(self.sel))
    }

    /// `o`: the other order. Its pages start over; marks stay.
    pub fn toggle_order(&mut self) {
        self.order = match self.order {
            DlqOrder::NewestFirst => DlqOrder::OldestFirst,
            DlqOrder::OldestFirst => DlqOrder::NewestFirst,
        };
        self.pages.reset();
        self.sel = 0;
        self.data = None;
    }

    /// `:dlq-type`: narrow to a type pattern (or, `None`, every row). Its
    /// pages start over; marks stay.
    pub fn set_event_type(&mut self, pattern: Option<String>) {
        self.event_type = pattern;
        self.pages.reset();
        self.sel = 0;
        self.data = None;
    }

    /// `x`: mark or unmark the selected row, then move down.
    pub fn toggle_mark(&mut self) {
        let Some(row) = self.selected().cloned() else {
            return;
        };
        let key = (row.at, row.seq, row.sink);
        if !self.marked.remove(&key) {
            self.marked.insert(key);
            self.marked_rows.push(row);
        } else {
            self.marked_rows.retain(|r| (r.at, r.seq, r.sink) != key);
        }
        self.sel = (self.sel + 1).min(self.rows_shown().saturating_sub(1));
    }

    /// What `R` replays: the marked rows, else the selected one.
    pub fn replay_rows(&self) -> Vec<DeadRow> {
        if self.marked_rows.is_empty() {
            self.selected().cloned().into_iter().collect()
        } else {
            self.marked_rows.clone()
        }
    }

    pub fn clear_marks(&mut self) {
        self.marked.clear();
        self.marked_rows.clear();
    }

    /// `g`: back to the first page; whether it moved.
    pub fn first_page(&mut self) -> bool {
        self.pages.first()
    }

    /// PgDn / PgUp; whether the page changed.
    pub fn page(&mut self, down: bool, status: &mut String) -> bool {
        if down {
            let Some(next) = self.data.as_ref().and_then(|d| d.page.next) else {
                *status = "last page".into();
                return false;
            };
            self.pages.forward(next);
        } else if !self.pages.backward() {
            return false;
        }
        self.sel = 0;
        self.data = None;
        true
    }

    /// Enter: the selected row's detail.
    pub fn open(&self) -> Next {
        match self.selected().cloned() {
            Some(row) => Next::Push(Screen::DeadDetail { row }),
            None => Next::Stay,
        }
    }

    /// A row's sink as operators name it (`SOURCE/NAME`), from the shown
    /// page's catalog; by its position before a page has come.
    pub fn sink_of(&self, row: &DeadRow) -> String {
        match &self.data {
            Some(d) => d.sink(row),
            None => format!("{}/{}", row.source_id, row.sink),
        }
    }

    /// The shown tenant's name: the screen's, else the page's.
    pub fn name_of(&self, ord: u32, name: Option<String>) -> String {
        name.unwrap_or_else(|| self.data.as_ref().map_or("?", |d| d.name(ord)).to_owned())
    }
}

pub fn draw(
    f: &mut Frame,
    ord: Option<u32>,
    name: Option<&str>,
    dlq: &DlqState,
    now: u64,
    theme: &Theme,
    area: Rect,
) {
    let who = match (ord, name) {
        (Some(_), Some(n)) => format!("tenant {n}"),
        (Some(o), None) => format!("ord {o}"),
        (None, _) => "all tenants".into(),
    };
    let Some(d) = &dlq.data else {
        return loading(f, format!(" DLQ: {who} "), theme, area);
    };
    let title = format!(
        " DLQ: {who}{}, {}, page {}, {} dead{}{} ",
        d.event_type
            .as_ref()
            .map_or(String::new(), |p| format!(", type {p}")),
        match dlq.order {
            DlqOrder::NewestFirst => "newest first",
            DlqOrder::OldestFirst => "oldest first",
        },
        dlq.pages.number(),
        num(d.total),
        if dlq.marked.is_empty() {
            String::new()
        } else {
            format!(", {} marked", dlq.marked.len())
        },
        if d.page.next.is_some() {
            ", more: PgDn"
        } else {
            ""
        }
    );
    // The tenant, hook and sink columns get what their longest entry on
    // the page needs, and give up width only when the screen has none to
    // spare: a hook id keeps its end (the sequence tells two rows apart),
    // a tenant and a sink both ends. Where that would cut much, the time
    // of death goes first (its age stays; the detail has the time).
    let names: Vec<String> = d.page.entries.iter().map(|e| d.sink(e)).collect();
    let longest = |it: &mut dyn Iterator<Item = usize>, head: &str| {
        it.max().unwrap_or(0).max(head.chars().count())
    };
    let tenant_w = longest(
        &mut d.page.entries.iter().map(|e| d.name(e.ord).chars().count()),
        "tenant",
    );
    let hook_w = longest(
        &mut d.page.entries.iter().map(|e| e.hook_id.chars().count()),
        "hook",
    );
    let sink_w = longest(&mut names.iter().map(|n| n.chars().count()), "sink");
    // The event type column only where types exist (a relay that does not
    // route keeps the screen it had), or the page is narrowed to one.
    let typed = d.event_type.is_some() || d.page.entries.iter().any(|e| e.event_type.is_some());
    let type_w = if typed {
        longest(
            &mut d
                .page
                .entries
                .iter()
                .map(|e| e.event_type.as_deref().unwrap_or("-").chars().count()),
            "type",
        )
    } else {
        0
    };
    let extra = if typed { type_w.min(12) + 1 } else { 0 };
    let inner = usize::from(area.width).saturating_sub(2);
    // With the time: five columns, four gaps; without it, four and three
    // (and the type's, when shown). The time stays while the tenant and
    // the hook fit whole beside it and the sink keeps 16 characters.
    let with_time = inner >= 20 + 7 + 4 + tenant_w + hook_w + sink_w.min(16) + extra;
    let gaps = usize::from(typed);
    let room = if with_time {
        inner.saturating_sub(20 + 7 + 4 + gaps)
    } else {
        inner.saturating_sub(7 + 3 + gaps)
    };
    let mut want = vec![(tenant_w, 6), (hook_w, 14), (sink_w, 8)];
    if typed {
        want.push((type_w, 6));
    }
    let w = fit(&want, room);
    let rows: Vec<Row> = d
        .page
        .entries
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(i, (e, sink))| {
            let mark = if dlq.marked.contains(&(e.at, e.seq, e.sink)) {
                "*"
            } else {
                " "
            };
            let age = age(now.saturating_sub(e.at));
            let mut cells = if with_time {
                vec![format!("{mark}{}", utc(e.at)), age]
            } else {
                vec![format!("{mark}{age}")]
            };
            cells.extend([
                cut_mid(d.name(e.ord), w[0]),
                cut_left(&e.hook_id, w[1]),
                cut_mid(sink, w[2]),
            ]);
            if typed {
                cells.push(cut_mid(e.event_type.as_deref().unwrap_or("-"), w[3]));
            }
            let r = Row::new(cells);
            if i == dlq.sel {
                r.style(theme.selected())
            } else {
                r
            }
        })
        .collect();
    let empty = rows.is_empty();
    let width = |x: usize| Constraint::Length(u16::try_from(x).unwrap_or(u16::MAX));
    let mut widths = if with_time {
        vec![Constraint::Length(20), Constraint::Length(7)]
    } else {
        vec![Constraint::Length(7)]
    };
    widths.extend([width(w[0]), width(w[1])]);
    let last = |x: usize| Constraint::Min(u16::try_from(x).unwrap_or(u16::MAX));
    if typed {
        widths.extend([width(w[2]), last(w[3])]);
    } else {
        widths.push(last(w[2]));
    }
    let mut head = if with_time {
        vec![" dead at (UTC)", "age"]
    } else {
        vec![" age"]
    };
    head.extend(["tenant", "hook", "sink"]);
    if typed {
        head.push("type");
    }
    let table = Table::new(rows, widths)
        .header(Row::new(head).style(theme.title()))
        .block(block(title, theme));
    f.render_widget(table, area);
    if empty {
        let inner = Rect {
            y: area.y + 2,
            height: 1,
            ..area.inner(ratatui::layout::Margin::new(1, 0))
        };
        f.render_widget(Paragraph::new("  the DLQ is empty"), inner);
    }
}
