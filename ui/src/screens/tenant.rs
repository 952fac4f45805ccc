//! One tenant's detail: its counters, its first due row, its rates over
//! the last minute and its backlog and oldest-due trends (from the app's
//! samples of the same reading), its heatmap row, a chart of its rates and
//! backlog where there is room, and the newest rows of its DLQ, read for
//! one ordinal (point reads and bounded pages).

use ankusa_store::values::Kind;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

use super::heatmap::{heat_axis, heat_cells};
use super::trends::{self, Rates};
use super::{Next, Screen, NAME_COL};
use crate::data::{Request, TenantData};
use crate::fmt::{age, bytes, cut, num, utc};
use crate::heatmap::{legend, zoom_label, HeatSpec};
use crate::theme::{block, block_with, loading, Theme};

/// Rows of the tenant's DLQ shown when the terminal is `height` high.
pub fn dlq_rows(height: u16) -> usize {
    usize::from(height.saturating_sub(18 + chart_rows(height))).clamp(3, 20)
}

/// Rows of the chart block at a terminal `height` (none when the DLQ would
/// be squeezed under its three rows).
fn chart_rows(height: u16) -> u16 {
    if height >= 34 {
        7
    } else {
        0
    }
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
    rates: Rates<'_>,
    theme: &Theme,
    area: Rect,
) {
    let Some(t) = t else {
        return loading(f, " Tenant ".into(), theme, area);
    };
    let c = &t.counters;
    let dlq_rows = t.dlq.entries.len().max(1) as u16;
    let [top, rate, heat, chart, dl] = Layout::vertical([
        // One line more for a policy of its own.
        Constraint::Length(if t.policy.is_some() { 6 } else { 5 }),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Length(if rates.live {
            chart_rows(area.height + 3)
        } else {
            0
        }),
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
    ];
    let mut lines = lines;
    if let Some(p) = &t.policy {
        lines.push(Line::from(vec![
            Span::styled(" policy: ", theme.title()),
            Span::raw(format!(
                "{} (set by {}, {} ago; :policy changes it)",
                p.policy,
                p.by,
                age(now.saturating_sub(p.at))
            )),
        ]));
    }
    // The header names each pause that holds its rows: its own, a sink's
    // for it, a sink's for every tenant (the border cuts a long list;
    // `7` lists the sinks).
    let mut title = vec![Span::styled(
        format!(" Tenant {} (ord {}) ", t.name, t.ord),
        theme.title(),
    )];
    if !t.paused.is_empty() {
        let names: Vec<&str> = t.paused.iter().map(|p| p.label.as_str()).collect();
        title.push(theme.paused_badge());
        title.push(Span::styled(
            format!(": {} ", names.join("; ")),
            theme.paused(),
        ));
    }
    f.render_widget(Paragraph::new(lines).block(block_with(title)), top);
    let rate_lines = trends::block_lines(
        rates.series,
        &t.totals,
        rates.live,
        usize::from(rate.width.saturating_sub(2)),
        theme,
    );
    f.render_widget(
        Paragraph::new(rate_lines).block(block(" Rates, last minute; trends ".into(), theme)),
        rate,
    );
    if rates.live {
        trends::charts(f, rates.series, theme, chart);
    }
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
            format!(
                " Due rows by {} bucket (+/-: zoom) ",
                zoom_label(spec.bucket_ms)
            ),
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
        " DLQ: newest {} of {} dead (Enter/d: all of it) ",
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
