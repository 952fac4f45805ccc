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
use crate::fmt::{age, cut, num, utc};
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
}

impl DlqState {
    pub fn requests(&self, ord: Option<u32>, list_rows: usize) -> Vec<Request> {
        vec![Request::Dlq {
            ord,
            cursor: self.pages.at,
            limit: list_rows,
            order: self.order,
        }]
    }

    /// A page arrived for the DLQ of `shown` (the screen's tenant); taken
    /// only if it answers the page shown now.
    pub fn on_page(&mut self, shown: Option<u32>, d: DlqData) -> bool {
        if shown == d.ord && d.cursor == self.pages.at && d.order == self.order {
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
        " DLQ: {who}, {}, page {}, {} dead{}{} ",
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
    let rows: Vec<Row> = d
        .page
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mark = if dlq.marked.contains(&(e.at, e.seq, e.sink)) {
                "*"
            } else {
                " "
            };
            let r = Row::new(vec![
                format!("{mark}{}", utc(e.at)),
                age(now.saturating_sub(e.at)),
                cut(d.name(e.ord), 16),
                e.hook_id.clone(),
                e.sink.to_string(),
                e.source_id.clone(),
            ]);
            if i == dlq.sel {
                r.style(theme.selected())
            } else {
                r
            }
        })
        .collect();
    let empty = rows.is_empty();
    let table = Table::new(
        rows,
        [
            Constraint::Length(20),
            Constraint::Length(7),
            Constraint::Length(16),
            Constraint::Length(19),
            Constraint::Length(4),
            Constraint::Min(6),
        ],
    )
    .header(
        Row::new(vec![
            " dead at (UTC)",
            "age",
            "tenant",
            "hook",
            "sink",
            "source",
        ])
        .style(theme.title()),
    )
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
