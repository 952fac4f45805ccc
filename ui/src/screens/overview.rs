//! The overview: the node's counters and, beside them, its rates over the
//! last minute and its backlog and oldest-due trends (from the app's
//! samples of the same reading), the oldest due row, tenants and active
//! tenants, the daemon's status, and a chart of the rates and the backlog
//! where there is room. One request per refresh, each of its numbers a
//! point read or a bounded walk (never a fold).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::trends::{self, Rates};
use super::{Next, Screen};
use crate::data::{DaemonStatus, Overview, Request};
use crate::fmt::{age, bytes, num};
use crate::theme::{block, loading, Theme};

pub fn requests() -> Vec<Request> {
    vec![Request::Overview]
}

/// Enter: the oldest-due tenant, the one an operator looks at first.
pub fn open(o: Option<&Overview>) -> Next {
    match o.and_then(|o| o.oldest) {
        Some(o) => Next::Push(Screen::Tenant { ord: o.ord }),
        None => Next::Stay,
    }
}

/// What the overview draws besides its reading: the clock, the daemon's
/// status, the app's notices and the node's rates.
pub struct Facts<'a> {
    pub now: u64,
    pub daemon: Option<DaemonStatus>,
    pub notices: &'a [String],
    pub rates: Rates<'a>,
}

pub fn draw(f: &mut Frame, o: Option<&Overview>, facts: Facts<'_>, theme: &Theme, area: Rect) {
    let Facts {
        now,
        daemon,
        notices,
        rates,
    } = facts;
    let Some(o) = o else {
        return loading(f, " Overview ".into(), theme, area);
    };
    let n = &o.node;
    let oldest = match (&o.oldest, &o.oldest_name) {
        (Some(d), name) => {
            let a = d.age_ms(now);
            format!(
                "{}{} (tenant {}{})",
                age(a),
                if d.exact { "" } else { " (to the second)" },
                name.as_deref().unwrap_or("?"),
                if a == 0 { ", not yet due" } else { "" }
            )
        }
        (None, _) => "nothing due".into(),
    };
    let daemon = match daemon {
        Some(DaemonStatus::Running(pid)) => format!("running, pid {pid}"),
        Some(DaemonStatus::NotRunning) => "not running".into(),
        Some(DaemonStatus::NoneWeWrite) => {
            "not running (this console holds the store for writing)".into()
        }
        None => "checking…".into(),
    };
    let kv = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("  {k:<18}"), theme.label()),
            Span::raw(v),
        ])
    };
    // The counters on the left, the rates and trends beside them.
    let left = [
        Line::from(""),
        kv("pending", num(n.pending)),
        kv("scheduled (retry)", num(n.scheduled)),
        kv("inflight", num(n.inflight)),
        {
            let mut l = kv("dead (DLQ)", num(n.dead));
            if n.dead > 0 {
                l.spans[1].style = theme.dead();
            }
            l
        },
        kv("bytes queued", bytes(n.bytes)),
        kv("archive pending", num(n.archive_pending)),
    ];
    let right_w = usize::from(area.width.saturating_sub(2)).saturating_sub(LEFT_W);
    let right: Vec<Line> = if rates.live {
        let mut v = vec![Line::from(Span::styled(
            "rates, last minute",
            theme.title(),
        ))];
        for t in trends::shown(&o.totals) {
            v.push(trends::rate_line(rates.series, t, right_w, theme));
        }
        v.push(trends::backlog_line(rates.series, theme));
        v.push(trends::oldest_line(rates.series, theme));
        v
    } else {
        trends::no_daemon_lines(&o.totals, theme)
    };
    let rows = left.len().max(right.len());
    let mut lines: Vec<Line> = (0..rows)
        .map(|i| {
            let l = left.get(i).cloned().unwrap_or_default();
            let used: usize = l.spans.iter().map(|s| s.content.chars().count()).sum();
            let mut spans = l.spans;
            if let Some(r) = right.get(i) {
                spans.push(Span::raw(" ".repeat(LEFT_W.saturating_sub(used))));
                spans.extend(r.spans.iter().cloned());
            }
            Line::from(spans)
        })
        .collect();
    lines.extend([
        Line::from(""),
        kv("oldest due", oldest),
        kv("tenants", num(i64::from(o.tenants))),
        kv(
            "active tenants",
            if o.active_capped {
                format!(
                    "≥ {} (bounded count: the oldest {} due markers)",
                    num(o.active as i64),
                    num(crate::data::ACTIVE_BUDGET as i64)
                )
            } else {
                num(o.active as i64)
            },
        ),
        kv("daemon", daemon),
    ]);
    if o.pauses > 0 {
        lines.push(Line::from(vec![
            Span::styled(format!("  {:<18}", "pauses"), theme.label()),
            theme.paused_badge(),
            Span::styled(
                format!(" {} in force (2: tenants, 7: sinks)", num(o.pauses as i64)),
                theme.paused(),
            ),
        ]));
    }
    if let Some(fault) = &o.store_fault {
        // First among the warnings: while it lasts the node refuses every
        // hook, and a load balancer has taken it out.
        lines.insert(
            1,
            Line::from(vec![
                Span::styled(format!("  {:<18}", "STORE FAULT"), theme.error()),
                Span::styled(
                    format!(
                        "writes refused for {} ({} failed; ingest answers 503 until the daemon recovers it): {}",
                        age(now.saturating_sub(fault.since_ms)),
                        num(i64::try_from(fault.failed_writes).unwrap_or(i64::MAX)),
                        fault.error
                    ),
                    theme.error(),
                ),
            ]),
        );
    }
    if o.quarantined != 0 {
        // Shown only when there is something to act on, and in the warning
        // colour: each is an acknowledged hook the node cannot deliver.
        lines.push(Line::from(vec![
            Span::styled(format!("  {:<18}", "quarantined"), theme.label()),
            Span::styled(
                format!(
                    "{} rows that do not decode: ankusa store quarantine list; ankusa store repair",
                    num(o.quarantined)
                ),
                theme.warn(),
            ),
        ]));
    }
    for n in notices {
        lines.push(Line::from(Span::styled(format!("  {n}"), theme.warn())));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(
        "  Enter: the oldest-due tenant   2: tenants   3: heatmap   4: DLQ   7: sinks",
    ));
    let text_h = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let [text, chart] =
        Layout::vertical([Constraint::Length(text_h), Constraint::Min(0)]).areas(area);
    f.render_widget(
        Paragraph::new(lines).block(block(" Overview (node counters) ".into(), theme)),
        text,
    );
    if rates.live {
        trends::charts(f, rates.series, theme, chart);
    }
}

/// Columns of the counters beside the rates: the label (20) and a value.
const LEFT_W: usize = 34;
