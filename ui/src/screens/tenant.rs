//! One tenant's detail: its counters, its first due row, its heatmap row
//! and the newest rows of its DLQ, read for one ordinal (point reads and
//! bounded pages).

use ankusa_store::values::Kind;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

use super::heatmap::{heat_axis, heat_cells};
use super::{Next, Screen, NAME_COL};
use crate::data::{Request, TenantData};
use crate::fmt::{age, bytes, cut, num, utc};
use crate::heatmap::{legend, zoom_label, HeatSpec};
use crate::theme::{block, loading, Theme};

/// Rows of the tenant's DLQ shown when the terminal is `height` high.
pub fn dlq_rows(height: u16) -> usize {
    usize::from(height.saturating_sub(18)).clamp(3, 20)
}

pub fn requests(ord: u32, height: u16, heat: HeatSpec) -> Vec<Request> {
    vec![Request::Tenant {
        ord,
        dlq_limit: dlq_rows(height),
        heat,
    }]
}

/// Enter or `d`: this tenant's DLQ, titled with its name once known.
pub fn open_dlq(ord: u32, detail: Option<&TenantData>) -> Next {
    let name = detail.filter(|t| t.ord == ord).map(|t| t.name.clone());
    Next::Push(Screen::Dlq {
        ord: Some(ord),
        name,
    })
}

pub fn draw(
    f: &mut Frame,
    t: Option<&TenantData>,
    spec: HeatSpec,
    now: u64,
    theme: &Theme,
    area: Rect,
) {
    let Some(t) = t else {
        return loading(f, " Tenant ".into(), theme, area);
    };
    let c = &t.counters;
    let dlq_rows = t.dlq.entries.len().max(1) as u16;
    let [top, heat, dl] = Layout::vertical([
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Min(dlq_rows.min(3) + 3),
    ])
    .areas(area);
    let first = match &t.first_due {
        Some(r) if r.at <= now => {
            format!("{} overdue (since {})", age(now - r.at), utc(r.at))
        }
        Some(r) => format!(
            "in {} ({}, {})",
            age(r.at - now),
            utc(r.at),
            if r.kind == Kind::Retry {
                "a retry"
            } else {
                "first attempt"
            }
        ),
        None => "nothing due".into(),
    };
    let lines = vec![
        Line::from(vec![Span::raw(format!(
            " pending {}   scheduled {}   inflight {}",
            num(c.pending),
            num(c.scheduled),
            num(c.inflight)
        ))]),
        Line::from(format!(
            " dead {}   bytes {}   archive pending {}",
            num(c.dead),
            bytes(c.bytes),
            num(c.archive_pending)
        )),
        Line::from(format!(" oldest due: {first}")),
        Line::from(" Enter/d: this tenant's DLQ   +/-: zoom the heatmap row"),
    ];
    f.render_widget(
        Paragraph::new(lines).block(block(format!(" Tenant {} (ord {}) ", t.name, t.ord), theme)),
        top,
    );
    let mut row = vec![Span::raw(" ".repeat(NAME_COL + 1))];
    row.extend(heat_cells(&t.heat, spec.cap, spec.now_col, theme));
    let heat_lines = vec![
        heat_axis(&spec, NAME_COL + 1),
        Line::from({
            let mut v = vec![Span::raw(format!(
                "{:<w$} ",
                cut(&t.name, NAME_COL),
                w = NAME_COL
            ))];
            v.extend(row.into_iter().skip(1));
            v
        }),
        Line::from(format!("{}{}", " ".repeat(NAME_COL + 1), legend(spec.cap))),
    ];
    f.render_widget(
        Paragraph::new(heat_lines).block(block(
            format!(" Due rows by {} bucket ", zoom_label(spec.bucket_ms)),
            theme,
        )),
        heat,
    );
    let rows: Vec<Row> = t
        .dlq
        .entries
        .iter()
        .map(|e| {
            Row::new(vec![
                utc(e.at),
                age(now.saturating_sub(e.at)),
                e.hook_id.clone(),
                e.sink.to_string(),
                e.source_id.clone(),
            ])
        })
        .collect();
    let title = format!(
        " DLQ: newest {} of {} dead ",
        t.dlq.entries.len(),
        num(c.dead)
    );
    let table = Table::new(
        rows,
        [
            Constraint::Length(19),
            Constraint::Length(8),
            Constraint::Length(19),
            Constraint::Length(4),
            Constraint::Min(6),
        ],
    )
    .header(Row::new(vec!["dead at (UTC)", "age", "hook", "sink", "source"]).style(theme.title()))
    .block(block(title, theme));
    f.render_widget(table, dl);
}
