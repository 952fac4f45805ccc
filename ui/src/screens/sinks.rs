//! The sinks screen and one sink's detail.
//!
//! The list is every sink of the node's catalog with its pauses and, beside
//! a daemon, its health (the daemon's own figures: nothing of them is
//! stored, so on a stopped store the screen says "no daemon: no delivery
//! figures" rather than zeros). A failing sink (failures since its last
//! success) is marked FAILING in words and drawn in the error colour; a
//! paused one carries the PAUSED badge. The detail adds the last error, the
//! tenants whose deliveries failed last, the tenants it is paused for and
//! the newest of its DLQ rows (a bounded walk of the DLQ narrowed to the
//! sink by the operator core).
//!
//! Cost: one sinks request per refresh of the list (the catalog is bounded
//! by the configuration); the detail is that request and one bounded DLQ
//! page. The list pages in memory: the whole catalog is one answer.

use ankusa_ops::model::{BreakerState, SinkHealth, SinkView};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::{Next, Screen};
use crate::data::{PauseTarget, Request, SinkData, SinkRef, SinksData};
use crate::fmt::{age, cut, cut_mid, fit, num, utc};
use crate::theme::{block, loading, Theme, PAUSED};

/// The word beside a sink whose last attempts failed (its colour is the
/// error colour).
pub const FAILING: &str = "FAILING";
/// The state of a sink whose circuit breaker opened (its rows park).
pub const BREAKER_OPEN: &str = "BREAKER OPEN";
/// The state of a sink whose breaker lets one probe delivery through.
pub const BREAKER_PROBING: &str = "PROBING";

/// Columns that show latency and in-flight attempts from this width on.
const WIDE: u16 = 120;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SinksState {
    pub data: Option<SinksData>,
    /// The page of the list shown (pages of the rows that fit).
    pub page: usize,
    pub sel: usize,
    /// The detail of the sink opened last.
    pub detail: Option<SinkData>,
}

/// Whether a sink is failing now: attempts failed since its last success.
pub fn failing(v: &SinkView) -> bool {
    v.health
        .as_ref()
        .is_some_and(|h| h.consecutive_failures > 0)
}

/// The key of a sink's view.
pub fn key_of(v: &SinkView) -> SinkRef {
    SinkRef {
        source: v.source.clone(),
        sink: v.index,
    }
}

/// Rows of its DLQ the detail shows at a terminal `height`.
pub fn dlq_rows(height: u16) -> usize {
    usize::from(height.saturating_sub(16)).clamp(3, 40)
}

pub fn requests() -> Vec<Request> {
    vec![Request::Sinks]
}

pub fn detail_requests(sink: &SinkRef, height: u16) -> Vec<Request> {
    vec![Request::Sink {
        sink: sink.clone(),
        dlq_limit: dlq_rows(height),
    }]
}

impl SinksState {
    /// The rows on the page shown, `n` rows a page.
    pub fn rows(&self, n: usize) -> &[SinkView] {
        let Some(d) = &self.data else {
            return &[];
        };
        let n = n.max(1);
        let from = (self.page * n).min(d.sinks.len());
        let to = (from + n).min(d.sinks.len());
        &d.sinks[from..to]
    }

    pub fn selected(&self, n: usize) -> Option<&SinkView> {
        self.rows(n).get(self.sel)
    }

    /// A new reading of the sinks; the page stays where it can.
    pub fn on_sinks(&mut self, d: SinksData, n: usize) {
        let pages = d.sinks.len().div_ceil(n.max(1)).max(1);
        self.page = self.page.min(pages - 1);
        self.data = Some(d);
    }

    /// The detail's reading, kept when it is the sink shown.
    pub fn on_sink(&mut self, shown: &SinkRef, d: SinkData) {
        if d.key == *shown {
            self.detail = Some(d);
        }
    }

    /// Enter: the selected sink's detail.
    pub fn open(&self, n: usize) -> Next {
        match self.selected(n) {
            Some(v) => Next::Push(Screen::Sink { sink: key_of(v) }),
            None => Next::Stay,
        }
    }

    /// PgDn / PgUp; whether the page changed (no fetch: the whole list is
    /// one answer).
    pub fn page(&mut self, down: bool, n: usize, status: &mut String) -> bool {
        let len = self.data.as_ref().map_or(0, |d| d.sinks.len());
        if down {
            if (self.page + 1) * n.max(1) >= len {
                *status = "last page".into();
                return false;
            }
            self.page += 1;
        } else if self.page == 0 {
            return false;
        } else {
            self.page -= 1;
        }
        self.sel = 0;
        true
    }

    /// The sink selected on the list, or the one whose detail is open.
    pub fn shown(&self, screen: &Screen, n: usize) -> Option<&SinkView> {
        match screen {
            Screen::Sinks => self.selected(n),
            Screen::Sink { sink } => self
                .detail
                .as_ref()
                .filter(|d| d.key == *sink)?
                .view
                .as_ref(),
            _ => None,
        }
    }

    /// Whether the sink shown is paused for `tenant` alone.
    pub fn paused_for(&self, screen: &Screen, n: usize, tenant: &str) -> bool {
        self.shown(screen, n)
            .is_some_and(|v| v.paused_for.iter().any(|t| t == tenant))
    }

    /// What `H`/`U` names here: the sink selected on the list, or the sink
    /// whose detail is open (for every tenant), with whether it is paused.
    pub fn pause_target(&self, screen: &Screen, n: usize) -> Option<(PauseTarget, bool)> {
        let v = self.shown(screen, n)?;
        Some((
            PauseTarget {
                tenant: None,
                sink: Some((key_of(v), v.name.clone())),
            },
            v.paused,
        ))
    }
}

/// `scheme://host:port` → `host:port` (the scheme is the same for nearly
/// every sink and the column is narrow).
fn host(endpoint: &str) -> &str {
    endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest)
}

fn name(v: &SinkView) -> String {
    format!("{}/{}", v.source, v.name)
}

/// The state column: PAUSED, FAILING, "paused for N", ok, or blank with
/// no figures; in words, with its colour.
fn state(v: &SinkView, theme: &Theme) -> (String, Style) {
    // The breaker's own word first: its pause is also `paused`, and an
    // operator must tell it from a pause of their own.
    match v
        .health
        .as_ref()
        .and_then(|h| h.breaker.as_ref())
        .map(|b| b.state)
    {
        Some(BreakerState::Open) => return (BREAKER_OPEN.into(), theme.error()),
        Some(BreakerState::HalfOpen) => return (BREAKER_PROBING.into(), theme.warn()),
        _ => {}
    }
    if v.paused {
        return (PAUSED.into(), theme.paused());
    }
    if failing(v) {
        return (FAILING.into(), theme.error());
    }
    if !v.paused_for.is_empty() {
        return (format!("paused for {}", v.paused_for.len()), theme.paused());
    }
    match &v.health {
        Some(_) => ("ok".into(), theme.plain()),
        None => (String::new(), theme.plain()),
    }
}

fn count(n: u64) -> String {
    num(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Rows waiting for a sink: "–" where the store has no count (a store an
/// earlier release wrote, until a daemon boots on it, or a tenant's token).
fn waiting(v: &SinkView) -> String {
    v.waiting.map_or("–".into(), num)
}

fn ms(v: Option<u64>) -> String {
    v.map_or("–".into(), |m| format!("{m}ms"))
}

fn last_ok(h: &SinkHealth, now: u64) -> String {
    h.last_success_at
        .map_or("never".into(), |t| age(now.saturating_sub(t)))
}

fn last_status(h: &SinkHealth) -> String {
    match h.last_status {
        Some(0) => "none".into(),
        Some(s) => s.to_string(),
        None => "–".into(),
    }
}

pub fn draw(f: &mut Frame, s: &SinksState, n: usize, now: u64, theme: &Theme, area: Rect) {
    let Some(d) = &s.data else {
        return loading(f, " Sinks ".into(), theme, area);
    };
    let failing_n = d.sinks.iter().filter(|v| failing(v)).count();
    let paused_n = d.sinks.iter().filter(|v| v.paused).count();
    let pages = d.sinks.len().div_ceil(n.max(1)).max(1);
    let mut title = format!(" Sinks ({}", d.sinks.len());
    if d.live {
        title.push_str(&format!(", {failing_n} failing"));
    }
    if paused_n > 0 {
        title.push_str(&format!(", {paused_n} paused"));
    }
    if pages > 1 {
        title.push_str(&format!(", page {} of {pages}", s.page + 1));
    }
    title.push_str(if d.live {
        "; Enter: one sink) "
    } else {
        "; no daemon: no delivery figures) "
    });
    if d.sinks.is_empty() {
        f.render_widget(
            Paragraph::new(vec![Line::from(
                " No sinks in the catalog: the daemon records its sinks when it starts.",
            )])
            .block(block(title, theme)),
            area,
        );
        return;
    }
    let wide = area.width >= WIDE;
    let rows = s.rows(n);
    // The widths after the sink and endpoint columns (the last is a
    // minimum and takes what is left).
    let (head, rest): (Vec<&str>, Vec<u16>) = match (d.live, wide) {
        (true, false) => (
            vec![
                "sink", "endpoint", "state", "waiting", "ok/1m", "fail/1m", "row", "last",
                "last ok",
            ],
            // Failures in a row up to 99,999 fit (a count in the thousands
            // used to be cut to "1,2").
            vec![12, 7, 5, 7, 5, 4, 7],
        ),
        (true, true) => (
            vec![
                "sink", "endpoint", "state", "waiting", "ok/1m", "fail/1m", "in a row", "last",
                "last ok", "inflight", "p50", "p99",
            ],
            vec![14, 8, 7, 7, 8, 5, 8, 8, 7, 7],
        ),
        (false, _) => (
            vec!["sink", "endpoint", "state", "waiting", "paused for tenants"],
            vec![14, 8, 10],
        ),
    };
    // The sink and endpoint columns take the room the others leave, as
    // much as the page's longest entries need: nothing is cut while the
    // row has space, and a cut keeps both ends (`orders/heal…`
    // said nothing of which sink it was).
    let inner = usize::from(area.width).saturating_sub(2);
    let gaps = head.len() - 1;
    let fixed: usize = rest.iter().map(|&w| usize::from(w)).sum();
    let room = inner.saturating_sub(fixed + gaps);
    let need = |f: &dyn Fn(&SinkView) -> usize, title: &str| {
        rows.iter().map(f).max().unwrap_or(0).max(title.len())
    };
    let fitted = fit(
        &[
            (need(&|v| name(v).chars().count(), "sink"), 10),
            (need(&|v| host(&v.endpoint).chars().count(), "endpoint"), 10),
        ],
        room,
    );
    let (name_w, host_w) = (fitted[0], fitted[1]);
    let mut widths: Vec<Constraint> = vec![
        Constraint::Length(u16::try_from(name_w).unwrap_or(u16::MAX)),
        Constraint::Length(u16::try_from(host_w).unwrap_or(u16::MAX)),
    ];
    let last = rest.len() - 1;
    widths.extend(rest.iter().enumerate().map(|(i, &w)| {
        if i == last {
            Constraint::Min(w)
        } else {
            Constraint::Length(w)
        }
    }));
    let body: Vec<Row> = rows
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let (st, st_style) = state(v, theme);
            let mut cells = vec![
                Cell::from(cut_mid(&name(v), name_w)),
                Cell::from(cut_mid(host(&v.endpoint), host_w)),
                Cell::from(st).style(st_style),
                Cell::from(waiting(v)),
            ];
            match &v.health {
                Some(h) if d.live => {
                    let bad = if h.failed_1m > 0 || h.consecutive_failures > 0 {
                        theme.error()
                    } else {
                        theme.plain()
                    };
                    cells.push(Cell::from(count(h.delivered_1m)));
                    cells.push(Cell::from(count(h.failed_1m)).style(bad));
                    cells.push(Cell::from(count(h.consecutive_failures)).style(bad));
                    cells.push(Cell::from(last_status(h)));
                    cells.push(Cell::from(last_ok(h, now)));
                    if wide {
                        cells.push(Cell::from(count(h.inflight)));
                        cells.push(Cell::from(ms(h.latency_p50_ms)));
                        cells.push(Cell::from(ms(h.latency_p99_ms)));
                    }
                }
                _ if d.live => cells.push(Cell::from("–")),
                _ => cells.push(Cell::from(v.paused_for.join(", "))),
            }
            let r = Row::new(cells);
            if i == s.sel {
                r.style(theme.selected())
            } else {
                r
            }
        })
        .collect();
    let table = Table::new(body, widths)
        .header(Row::new(head).style(theme.title()))
        .block(block(title, theme));
    f.render_widget(table, area);
}

pub fn draw_detail(
    f: &mut Frame,
    d: Option<&SinkData>,
    key: &SinkRef,
    now: u64,
    theme: &Theme,
    area: Rect,
) {
    let Some(d) = d.filter(|d| d.key == *key) else {
        return loading(f, format!(" Sink {key} "), theme, area);
    };
    let Some(v) = &d.view else {
        f.render_widget(
            Paragraph::new(format!(
                " No sink {} in the catalog (the daemon records its sinks when it starts).",
                key
            ))
            .block(block(format!(" Sink {key} "), theme)),
            area,
        );
        return;
    };
    let kv = |k: &str| Span::styled(format!(" {k:<18}"), theme.label());
    let (st, st_style) = state(v, theme);
    let mut lines = vec![Line::from(vec![
        kv("endpoint"),
        Span::raw(format!("{}   ", v.endpoint)),
        Span::styled(st, st_style),
    ])];
    if let Some(l) = &v.limits {
        lines.push(Line::from(vec![
            kv("limits"),
            Span::raw(format!("{l} (set at run time; :limit changes them)")),
        ]));
    }
    lines.push(Line::from(vec![
        kv("rows waiting"),
        Span::raw(match v.waiting {
            Some(n) => format!("{} (due, retrying or parked; every tenant's)", num(n)),
            None => "not counted (a store an earlier release wrote: the daemon counts it when it starts)".into(),
        }),
    ]));
    match v.health.as_ref().filter(|_| d.live) {
        Some(h) => {
            let bad = if h.consecutive_failures > 0 {
                theme.error()
            } else {
                theme.plain()
            };
            lines.push(Line::from(vec![
                kv("last minute"),
                Span::raw(format!("{} delivered, ", count(h.delivered_1m))),
                Span::styled(format!("{} failed", count(h.failed_1m)), bad),
                Span::raw(format!(", {} in flight", count(h.inflight))),
            ]));
            lines.push(Line::from(vec![
                kv("failures in a row"),
                Span::styled(count(h.consecutive_failures), bad),
                Span::raw(format!(
                    "   last status {}   last success {}",
                    last_status(h),
                    match h.last_success_at {
                        Some(t) => format!("{} ago", age(now.saturating_sub(t))),
                        None => "never".into(),
                    }
                )),
            ]));
            lines.push(Line::from(vec![
                kv("latency"),
                Span::raw(format!(
                    "p50 {}   p99 {} (last 512 attempts)",
                    ms(h.latency_p50_ms),
                    ms(h.latency_p99_ms)
                )),
            ]));
            lines.push(Line::from(vec![
                kv("last error"),
                match &h.last_error {
                    Some(e) => Span::styled(e.clone(), bad),
                    None => Span::raw("none"),
                },
            ]));
            lines.push(Line::from(vec![
                kv("failing tenants"),
                if h.failing_tenants.is_empty() {
                    Span::raw("none")
                } else {
                    Span::styled(h.failing_tenants.join(", "), bad)
                },
            ]));
        }
        None => lines.push(Line::from(vec![
            kv("deliveries"),
            Span::raw("no daemon: no delivery figures"),
        ])),
    }
    if let Some(b) = v.health.as_ref().and_then(|h| h.breaker.as_ref()) {
        let line = match b.state {
            BreakerState::Closed => Span::raw(format!("closed ({} trips)", b.trips)),
            BreakerState::Open => Span::styled(
                format!(
                    "{BREAKER_OPEN}{}{}; backoff {}",
                    b.opened_at
                        .map(|t| format!(" for {}", age(now.saturating_sub(t))))
                        .unwrap_or_default(),
                    b.next_probe_at
                        .map(|t| format!(", probe in {}", age(t.saturating_sub(now))))
                        .unwrap_or_default(),
                    age(b.backoff_ms)
                ),
                theme.error(),
            ),
            BreakerState::HalfOpen => Span::styled(
                format!("{BREAKER_PROBING}: one delivery decides"),
                theme.warn(),
            ),
        };
        let mut spans = vec![kv("breaker"), line];
        if let (Some(r), false) = (&b.reason, b.state == BreakerState::Closed) {
            spans.push(Span::raw(format!(" ({r})")));
        }
        lines.push(Line::from(spans));
    }
    let paused = match (v.paused, v.paused_for.is_empty()) {
        (true, _) => Span::styled(
            format!("{PAUSED} for every tenant: its rows stay queued (U resumes)"),
            theme.paused(),
        ),
        (false, false) => Span::styled(
            format!("{PAUSED} for tenants {}", v.paused_for.join(", ")),
            theme.paused(),
        ),
        (false, true) => Span::raw("no (H pauses it for every tenant)"),
    };
    lines.push(Line::from(vec![kv("paused"), paused]));
    let top_h = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let [top, dl] = Layout::vertical([Constraint::Length(top_h), Constraint::Min(4)]).areas(area);
    let title = format!(
        " Sink {} ({}) ",
        name(v),
        if v.index.to_string() == v.name {
            v.source.clone()
        } else {
            key.to_string()
        }
    );
    f.render_widget(Paragraph::new(lines).block(block(title, theme)), top);
    let rows: Vec<Row> = d
        .dlq
        .iter()
        .map(|(tenant, row)| {
            Row::new(vec![
                utc(row.at),
                age(now.saturating_sub(row.at)),
                cut(tenant, 18),
                row.hook_id.clone(),
            ])
        })
        .collect();
    let title = if d.dlq.is_empty() && d.more {
        format!(
            " DLQ of this sink: none among the newest {} dead rows ",
            num(ankusa_ops::reads::SINK_WALK as i64)
        )
    } else if d.dlq.is_empty() {
        " DLQ of this sink: no dead rows ".to_owned()
    } else {
        format!(
            " DLQ of this sink: newest {}{} ",
            d.dlq.len(),
            if d.more { " (more are older)" } else { "" }
        )
    };
    let table = Table::new(
        rows,
        [
            Constraint::Length(19),
            Constraint::Length(8),
            Constraint::Length(18),
            Constraint::Min(19),
        ],
    )
    .header(Row::new(vec!["dead at (UTC)", "age", "tenant", "hook"]).style(theme.title()))
    .block(block(title, theme));
    f.render_widget(table, dl);
}
