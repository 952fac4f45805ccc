//! The actions screen (`8`, `:actions`): what this console did in this
//! session (time, action, result) and, for the selected one, the `ankusa`
//! command line and the admin API `curl` that do the same
//! (`crate::data::equivalent`), so an operator can repeat it from a
//! script. The audit log (`GET /v1/admin/audit`) holds every action of
//! every console; this is this session's.
//!
//! Invariants: at most [`MAX`] entries, newest first; an entry is added
//! when a guarded action ends, done or failed, never when it is only
//! offered or dry-run.

use std::collections::VecDeque;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use crate::data::equivalent::Equivalent;
use crate::fmt::{cut, utc};
use crate::theme::{block, Theme};

/// Entries kept at most.
pub const MAX: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub at: u64,
    /// The action and its scope, as the guard showed it.
    pub what: String,
    /// `done: 12 row(s)`, or why it failed.
    pub result: String,
    pub ok: bool,
    pub equivalent: Option<Equivalent>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionsLog {
    /// Newest first.
    pub entries: VecDeque<Entry>,
    pub sel: usize,
}

impl ActionsLog {
    pub fn push(&mut self, e: Entry) {
        self.entries.push_front(e);
        self.entries.truncate(MAX);
        self.sel = 0;
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn selected(&self) -> Option<&Entry> {
        self.entries.get(self.sel)
    }
}

pub fn draw(f: &mut Frame, log: &ActionsLog, theme: &Theme, area: Rect) {
    let [list, detail] = Layout::vertical([Constraint::Min(4), Constraint::Length(8)]).areas(area);
    let title = format!(
        " Actions of this console ({}; every console's: the audit log) ",
        log.len()
    );
    let w = usize::from(area.width).saturating_sub(2 + 20 + 2 + 2);
    let (what_w, result_w) = (w * 3 / 5, w - w * 3 / 5);
    let rows: Vec<Row> = log
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let r = Row::new(vec![
                Span::raw(utc(e.at)),
                Span::raw(cut(&e.what, what_w)),
                Span::styled(
                    cut(&e.result, result_w),
                    if e.ok { theme.plain() } else { theme.warn() },
                ),
            ]);
            if i == log.sel {
                r.style(theme.selected())
            } else {
                r
            }
        })
        .collect();
    let widths = [
        Constraint::Length(20),
        Constraint::Length(u16::try_from(what_w).unwrap_or(u16::MAX)),
        Constraint::Min(8),
    ];
    let table = Table::new(rows, widths)
        .header(Row::new(vec!["at (UTC)", "action", "result"]).style(theme.title()))
        .block(block(title, theme));
    f.render_widget(table, list);
    let lines: Vec<Line> = match log.selected() {
        None => vec![Line::from(
            "  no action yet: pause, replay, purge, :policy, :limit, :drain ... list here, with the command that does the same",
        )],
        Some(e) => match &e.equivalent {
            None => vec![Line::from("  (no command line does this: it runs in the console)")],
            Some(eq) => {
                let mut v = vec![
                    Line::from(Span::styled(" the same from a shell:", theme.title())),
                    Line::from(format!("  $ {}", eq.cli)),
                ];
                match &eq.curl {
                    Some(c) => v.push(Line::from(format!("  $ {c}"))),
                    None => v.push(Line::from("  (no admin API call: it runs on a stopped store)")),
                }
                v
            }
        },
    };
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block(" Selected ".into(), theme)),
        detail,
    );
}
