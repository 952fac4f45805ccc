//! Views: pure functions of [`App`] drawing into a ratatui frame.

use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use ankusa_store::counters::Field;
use ankusa_store::values::Kind;

use crate::app::{App, Guide, InputKind, Overlay, Screen, Stage, NAME_COL};
use crate::data::{ActionScope, DaemonStatus, OpenMode};
use crate::fmt::{age, bytes, cut, num, utc};
use crate::heatmap::{glyph, legend, zoom_label};
use crate::keymap::{self, Tab};
use ankusa_ops::preview::Body;
use ankusa_store::migrate::{Phase, Status};

/// Styles; all plain under `NO_COLOR`.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to anything non-empty.
    pub fn from_env() -> Self {
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
    fn title(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    fn mode(&self, m: &OpenMode) -> Style {
        let c = match m {
            OpenMode::Follow { .. } => Color::Green,
            OpenMode::ReadOnly => Color::Cyan,
            OpenMode::Write => Color::Red,
            OpenMode::NeedsMigration => Color::Yellow,
        };
        self.fg(c).add_modifier(Modifier::BOLD)
    }
    fn heat(&self, n: u32, cap: u32) -> Style {
        let c = match n {
            0 => Color::DarkGray,
            1 => Color::Green,
            2..=3 => Color::Yellow,
            n if n <= cap => Color::LightRed,
            _ => Color::Red,
        };
        self.fg(c)
    }
}

pub fn draw(f: &mut Frame, app: &App, theme: &Theme) {
    let area = f.area();
    let [head, tabs, body, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header_line(app, theme)), head);
    f.render_widget(Paragraph::new(tabs_line(app, theme)), tabs);
    match app.screen() {
        Screen::Overview => overview(f, app, theme, body),
        Screen::Tenants => tenants(f, app, theme, body),
        Screen::Tenant { .. } => tenant(f, app, theme, body),
        Screen::Heatmap => heatmap(f, app, theme, body),
        Screen::Dlq { .. } => dlq(f, app, theme, body),
        Screen::DeadDetail { .. } => dead_detail(f, app, theme, body),
        Screen::Migration => migration(f, app, theme, body),
        Screen::Log => log(f, theme, body),
    }
    f.render_widget(Paragraph::new(footer_line(app, theme)), foot);
    for o in &app.overlays {
        match o {
            Overlay::Help(scroll) => help(f, app, *scroll, theme, area),
            Overlay::Input { kind, text } => input(f, kind, text, theme, foot),
            Overlay::Guard(g) => guard(f, app, &g.scope, &g.stage, theme, area),
        }
    }
}

fn header_line(app: &App, theme: &Theme) -> Line<'static> {
    let h = &app.header;
    let fresh = match h.mode {
        OpenMode::Follow { .. } => format!("data {} old", age(app.now.saturating_sub(h.fresh_at))),
        OpenMode::ReadOnly => format!("snapshot {} old", age(app.now.saturating_sub(h.opened_at))),
        OpenMode::Write => "live (this console writes)".into(),
        OpenMode::NeedsMigration => "not opened".into(),
    };
    let daemon = match (h.daemon, &h.mode) {
        (Some(DaemonStatus::Running(pid)), _) | (None, &OpenMode::Follow { pid }) => {
            format!("daemon pid {pid}")
        }
        (Some(DaemonStatus::NotRunning), OpenMode::Follow { .. }) => "daemon stopped".into(),
        (Some(DaemonStatus::NotRunning), _) => "no daemon".into(),
        (Some(DaemonStatus::NoneWeWrite), _) => "no daemon".into(),
        (None, _) => "daemon ?".into(),
    };
    let format = h
        .format
        .map_or("format ?".into(), |f| format!("format {f}"));
    let path = h.path.display().to_string();
    let fixed = 20 + h.mode.label().len() + format.len() + fresh.len() + daemon.len();
    let room = usize::from(app.width).saturating_sub(fixed).max(8);
    let sep = || Span::raw(" │ ");
    Line::from(vec![
        Span::styled(" ankusa ", theme.title()),
        Span::styled(h.mode.label(), theme.mode(&h.mode)),
        sep(),
        Span::raw(cut_left(&path, room)),
        sep(),
        Span::raw(format),
        sep(),
        Span::raw(fresh),
        sep(),
        Span::raw(daemon),
    ])
}

fn cut_left(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_owned()
    } else {
        format!("…{}", s.chars().skip(n + 1 - max).collect::<String>())
    }
}

fn tabs_line(app: &App, theme: &Theme) -> Line<'static> {
    let cur = app.screen().tab();
    let mut spans = vec![Span::raw(" ")];
    for (i, t) in Tab::ALL.iter().enumerate() {
        let label = format!("{} {}", i + 1, t.title());
        if *t == cur {
            spans.push(Span::styled(format!("[{label}]"), theme.selected()));
        } else {
            spans.push(Span::raw(format!(" {label} ")));
        }
        spans.push(Span::raw(" "));
    }
    if app.busy > 0 {
        spans.push(Span::styled(" loading…", theme.fg(Color::Yellow)));
    }
    Line::from(spans)
}

fn footer_line(app: &App, theme: &Theme) -> Line<'static> {
    if let Some(e) = &app.error {
        return Line::from(Span::styled(
            format!(" error: {e}"),
            theme.fg(Color::Red).add_modifier(Modifier::BOLD),
        ));
    }
    if !app.status.is_empty() {
        return Line::from(format!(" {}", app.status));
    }
    if let Some(n) = app.notices.last() {
        return Line::from(Span::styled(format!(" {n}"), theme.fg(Color::Yellow)));
    }
    let mut hint = String::from(" ? help  q back  / filter  : cmd  Enter open");
    match app.screen() {
        Screen::Tenants => hint.push_str("  s sort"),
        Screen::Tenant { .. } => hint.push_str("  d DLQ"),
        Screen::Heatmap => hint.push_str("  +/- zoom"),
        Screen::Dlq { .. } => hint.push_str("  x mark"),
        Screen::Migration if app.migration.running() => hint.push_str("  p pause"),
        Screen::Migration if app.migration.can_guide() => {
            hint.push_str("  b backup  n dry run  M migrate")
        }
        _ => {}
    }
    if app.can_act() {
        match app.screen() {
            Screen::Tenant { .. } => hint.push_str("  P purge  A replay all"),
            Screen::Dlq { ord, .. } => {
                hint.push_str("  R replay");
                if ord.is_some() {
                    hint.push_str("  A replay all");
                }
            }
            Screen::DeadDetail { .. } => hint.push_str("  R replay"),
            _ => {}
        }
    }
    Line::from(hint)
}

fn block(title: String, theme: &Theme) -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(title, theme.title()))
}

fn loading(f: &mut Frame, title: String, theme: &Theme, area: Rect) {
    f.render_widget(Paragraph::new(" loading…").block(block(title, theme)), area);
}

fn overview(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Some(o) = &app.overview else {
        return loading(f, " Overview ".into(), theme, area);
    };
    let n = &o.node;
    let oldest = match (&o.oldest, &o.oldest_name) {
        (Some(d), name) => {
            let a = d.age_ms(app.now);
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
    let daemon = match app.header.daemon {
        Some(DaemonStatus::Running(pid)) => format!("running, pid {pid}"),
        Some(DaemonStatus::NotRunning) => "not running".into(),
        Some(DaemonStatus::NoneWeWrite) => {
            "not running (this console holds the store for writing)".into()
        }
        None => "checking…".into(),
    };
    let kv = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("  {k:<18}"), theme.fg(Color::Cyan)),
            Span::raw(v),
        ])
    };
    let mut lines = vec![
        Line::from(""),
        kv("pending", num(n.pending)),
        kv("scheduled (retry)", num(n.scheduled)),
        kv("inflight", num(n.inflight)),
        kv("dead (DLQ)", num(n.dead)),
        kv("bytes queued", bytes(n.bytes)),
        kv("archive pending", num(n.archive_pending)),
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
    ];
    if o.quarantined != 0 {
        // Shown only when there is something to act on, and in the warning
        // colour: each is an acknowledged hook the node cannot deliver.
        lines.push(Line::from(vec![
            Span::styled(format!("  {:<18}", "quarantined"), theme.fg(Color::Cyan)),
            Span::styled(
                format!(
                    "{} rows that do not decode: ankusa store quarantine list; ankusa store repair",
                    num(o.quarantined)
                ),
                theme.fg(Color::Yellow),
            ),
        ]));
    }
    for n in &app.notices {
        lines.push(Line::from(Span::styled(
            format!("  {n}"),
            theme.fg(Color::Yellow),
        )));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(
        "  Enter: the oldest-due tenant   2: tenants   3: heatmap   4: DLQ",
    ));
    f.render_widget(
        Paragraph::new(lines).block(block(" Overview (node counters) ".into(), theme)),
        area,
    );
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

const COUNTER_TITLES: [&str; 6] = ["pending", "sched", "inflight", "dead", "bytes", "archive"];

fn tenants(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let t = &app.tenants;
    let order = match t.sort {
        // A prefix filter is a range scan of the names: name order.
        None if !t.filter.is_empty() => "name order".to_owned(),
        None => "ordinal order".to_owned(),
        Some(fl) => format!("by {} ↓", fl.name()),
    };
    let mut title = format!(" Tenants ({order}");
    if !t.filter.is_empty() {
        title.push_str(&format!(", name starts with {:?}", t.filter));
    }
    match (&t.sort, &t.page, &t.ranked) {
        (None, Some(p), _) => {
            title.push_str(&format!(", page {}", t.back.len() + 1));
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
                age(app.now.saturating_sub(*at))
            ));
        }
        _ => title.push(')'),
    }
    let rows = app.tenant_rows();
    if rows.is_empty() && t.page.is_none() && t.ranked.is_none() {
        return loading(f, title, theme, area);
    }
    let sort_col = t
        .sort
        .map(|f| Field::ALL.iter().position(|x| *x == f).unwrap_or(0));
    let mut head = vec!["ord".to_owned(), "tenant".to_owned()];
    for (i, h) in COUNTER_TITLES.iter().enumerate() {
        head.push(if Some(i) == sort_col {
            format!("{h}↓")
        } else {
            (*h).to_owned()
        });
    }
    let body: Vec<Row> = rows
        .iter()
        .enumerate()
        .map(|(i, ti)| {
            let mut cells = vec![ti.ord.to_string(), cut(&ti.id, NAME_COL)];
            cells.extend(counter_cells(&ti.counters));
            let r = Row::new(cells);
            if i == t.sel {
                r.style(theme.selected())
            } else {
                r
            }
        })
        .collect();
    let widths = [
        Constraint::Length(6),
        Constraint::Length(NAME_COL as u16),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(7),
    ];
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

fn heat_axis(app: &App, spec: &crate::heatmap::HeatSpec, indent: usize) -> Line<'static> {
    let mut s = " ".repeat(indent);
    let left = format!("← overdue ({} buckets)", zoom_label(spec.bucket_ms));
    let mut axis: Vec<char> = vec![' '; spec.cols];
    for (i, c) in left
        .chars()
        .enumerate()
        .take(spec.now_col.saturating_sub(1))
    {
        axis[i] = c;
    }
    axis[spec.now_col] = '▼';
    for (i, c) in "now  retries →".chars().enumerate() {
        if spec.now_col + 1 + i < spec.cols {
            axis[spec.now_col + 1 + i] = c;
        }
    }
    let _ = app;
    s.extend(axis);
    Line::from(s)
}

fn heat_cells(cells: &[u32], cap: u32, now_col: usize, theme: &Theme) -> Vec<Span<'static>> {
    cells
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let g = if i == now_col && n == 0 {
                '│'
            } else {
                glyph(n, cap)
            };
            Span::styled(g.to_string(), theme.heat(n, cap))
        })
        .collect()
}

fn tenant(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Some(t) = &app.tenant else {
        return loading(f, " Tenant ".into(), theme, area);
    };
    let c = &t.counters;
    let spec = app.heat_spec();
    let dlq_rows = t.dlq.entries.len().max(1) as u16;
    let [top, heat, dl] = Layout::vertical([
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Min(dlq_rows.min(3) + 3),
    ])
    .areas(area);
    let first = match &t.first_due {
        Some(r) if r.at <= app.now => {
            format!("{} overdue (since {})", age(app.now - r.at), utc(r.at))
        }
        Some(r) => format!(
            "in {} ({}, {})",
            age(r.at - app.now),
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
        heat_axis(app, &spec, NAME_COL + 1),
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
                age(app.now.saturating_sub(e.at)),
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

fn heatmap(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let spec = app.heat_spec();
    let Some(h) = &app.heat.data else {
        return loading(f, " Heatmap ".into(), theme, area);
    };
    let title = format!(
        " Active tenants × due time ({} buckets, oldest first, rows {}-{}{}) ",
        zoom_label(h.spec.bucket_ms),
        h.offset + 1,
        h.offset + h.rows.len(),
        if h.more { ", more: PgDn" } else { "" }
    );
    let mut lines = vec![heat_axis(app, &h.spec, NAME_COL + 1)];
    if h.rows.is_empty() {
        lines.push(Line::from("  no tenant has work due"));
    }
    for (i, r) in h.rows.iter().enumerate() {
        let name = Span::styled(
            format!("{:<w$} ", cut(&r.name, NAME_COL), w = NAME_COL),
            if i == app.heat.sel {
                theme.selected()
            } else {
                Style::default()
            },
        );
        let mut v = vec![name];
        v.extend(heat_cells(&r.cells, h.spec.cap, h.spec.now_col, theme));
        lines.push(Line::from(v));
    }
    let _ = spec;
    let inner_h = area.height.saturating_sub(2) as usize;
    while lines.len() + 1 < inner_h {
        lines.push(Line::from(""));
    }
    lines.push(Line::from(format!(
        "{}{}   +/- zoom",
        " ".repeat(NAME_COL + 1),
        legend(h.spec.cap)
    )));
    f.render_widget(Paragraph::new(lines).block(block(title, theme)), area);
}

fn dlq(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let (ord, name) = match app.screen() {
        Screen::Dlq { ord, name } => (*ord, name.clone()),
        _ => (None, None),
    };
    let who = match (ord, &name) {
        (Some(_), Some(n)) => format!("tenant {n}"),
        (Some(o), None) => format!("ord {o}"),
        (None, _) => "all tenants".into(),
    };
    let Some(d) = &app.dlq.data else {
        return loading(f, format!(" DLQ: {who} "), theme, area);
    };
    let title = format!(
        " DLQ: {who}, {}, page {}, {} dead{}{} ",
        match app.dlq.order {
            ankusa_store::queries::DlqOrder::NewestFirst => "newest first",
            ankusa_store::queries::DlqOrder::OldestFirst => "oldest first",
        },
        app.dlq.back.len() + 1,
        num(d.total),
        if app.dlq.marked.is_empty() {
            String::new()
        } else {
            format!(", {} marked", app.dlq.marked.len())
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
            let mark = if app.dlq.marked.contains(&(e.at, e.seq, e.sink)) {
                "*"
            } else {
                " "
            };
            let r = Row::new(vec![
                format!("{mark}{}", utc(e.at)),
                age(app.now.saturating_sub(e.at)),
                cut(d.name(e.ord), 16),
                e.hook_id.clone(),
                e.sink.to_string(),
                e.source_id.clone(),
            ]);
            if i == app.dlq.sel {
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

fn dead_detail(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Some(d) = &app.detail else {
        return loading(f, " Dead delivery ".into(), theme, area);
    };
    let r = &d.row;
    let mut lines = vec![
        Line::from(format!(
            " hook {}  sink {}  tenant {}  source {}",
            r.hook_id, r.sink, d.tenant, r.source_id
        )),
        Line::from(format!(
            " dead since {} ({} ago){}",
            utc(r.at),
            age(app.now.saturating_sub(r.at)),
            if d.still_dead {
                ""
            } else {
                "  — no longer dead (replayed or purged)"
            }
        )),
        Line::from(Span::styled(" Delivery history", theme.title())),
    ];
    match &d.delivery {
        Some(del) => {
            lines.push(Line::from(format!(
                "  {} attempt(s), {} bytes",
                del.attempts, del.size
            )));
            for a in del.history.iter().rev() {
                let status = if a.status == 0 {
                    "no response".to_owned()
                } else {
                    format!("HTTP {}", a.status)
                };
                lines.push(Line::from(format!(
                    "  {}  {:<11} {}",
                    utc(a.at),
                    status,
                    cut(&a.error, 80)
                )));
            }
        }
        None => lines.push(Line::from("  (no delivery row)")),
    }
    match &d.preview {
        Some(p) => {
            lines.push(Line::from(Span::styled(
                format!(
                    " Hook (source {}{})",
                    p.source,
                    p.idempotency_key
                        .as_ref()
                        .map_or(String::new(), |k| format!(", idempotency key {k}"))
                ),
                theme.title(),
            )));
            for (k, v) in &p.headers {
                lines.push(Line::from(format!("  {k}: {v}")));
            }
            lines.push(Line::from(Span::styled(
                format!(" Body ({} bytes)", p.body_len),
                theme.title(),
            )));
            match &p.body {
                Body::Empty => lines.push(Line::from("  (empty)")),
                Body::Text { text, truncated } => {
                    for l in text.lines() {
                        lines.push(Line::from(format!("  {l}")));
                    }
                    if *truncated {
                        lines.push(Line::from(format!(
                            "  … cut at {} bytes",
                            ankusa_ops::preview::BODY_MAX
                        )));
                    }
                }
                Body::Binary { hex, truncated } => {
                    lines.push(Line::from("  binary body:"));
                    for l in hex {
                        lines.push(Line::from(format!("  {l}")));
                    }
                    if *truncated {
                        lines.push(Line::from(format!(
                            "  … first {} bytes shown",
                            ankusa_ops::preview::HEX_MAX
                        )));
                    }
                }
            }
        }
        None => lines.push(Line::from(" (hook not found)")),
    }
    f.render_widget(
        Paragraph::new(lines)
            .block(block(" Dead delivery ".into(), theme))
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn migration(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let m = &app.migration;
    let fmt = m.format.map_or("unstamped".into(), |f| f.to_string());
    let path = app.header.path.display().to_string();
    let warn = |s: String| Line::from(Span::styled(s, theme.fg(Color::Yellow)));
    let mut lines = vec![
        Line::from(""),
        Line::from(format!(
            "  store format: {fmt} (this release reads format {})",
            ankusa_store::FORMAT
        )),
    ];
    match (&m.status, m.holder) {
        (None, _) => lines.push(Line::from("  checking the migration status…")),
        (Some(Status::Done), _) => lines.push(Line::from("  No migration needed: format 3.")),
        (Some(Status::Needed), _) => lines.push(warn(
            "  This store needs migrating before the console can show its queue.".into(),
        )),
        (Some(Status::InProgress { .. }), Some(pid)) => lines.push(warn(format!(
            "  Migrating in pid {pid} (`ankusa store migrate`): following its cursor."
        ))),
        (Some(Status::InProgress { .. }), None) if m.running() => {
            lines.push(warn("  Migrating in this console.".into()))
        }
        (Some(Status::InProgress { .. }), None) => lines.push(warn(
            "  A migration was interrupted: it resumes where it stopped (M).".into(),
        )),
    }
    if let (Some(pid), Some(Status::Needed)) = (m.holder, &m.status) {
        lines.push(Line::from(format!(
            "  pid {pid} holds the store; stop it to migrate."
        )));
    }
    if let Some(c) = &m.cursor {
        lines.push(Line::from(""));
        let phase = if m.status == Some(Status::Done) {
            "done".to_owned()
        } else {
            format!("{} ({} of 5)", c.phase.name(), c.phase as u8)
        };
        lines.push(Line::from(Span::styled(
            format!("  Progress: phase {phase}"),
            theme.title(),
        )));
        for (i, p) in Phase::ROWS.iter().enumerate() {
            let (d, t) = (c.done[i], c.total[i]);
            lines.push(Line::from(format!(
                "    {:<9} {:>12} / {:<12} {:>4}",
                p.name(),
                num(d as i64),
                num(t as i64),
                pct(d, t)
            )));
        }
        let (d, t) = (c.rows_done(), c.rows_total());
        let w = 24usize;
        let filled = if t == 0 {
            w
        } else {
            (d.min(t) as usize * w) / t as usize
        };
        lines.push(Line::from(format!(
            "    {:<9} {:>12} / {:<12} {:>4}  [{}{}]",
            "total",
            num(d as i64),
            num(t as i64),
            pct(d, t),
            "#".repeat(filled),
            ".".repeat(w - filled)
        )));
        lines.push(Line::from(format!(
            "    rate {}   ETA {}   started {} UTC",
            m.rate_per_s()
                .map_or("? rows/s".into(), |r| format!("{} rows/s", num(r as i64))),
            m.eta_ms().map_or("?".into(), age),
            utc(c.started_at)
        )));
    }
    lines.push(Line::from(""));
    if m.can_guide() || m.running() || !matches!(m.guide, Guide::Idle) {
        lines.push(Line::from(Span::styled(
            "  Guided upgrade (no other process holds this store)",
            theme.title(),
        )));
        lines.push(Line::from(format!(
            "  {}",
            ankusa_store::migrate::DESCRIPTION
        )));
        let backup = match (&m.guide, &m.backup) {
            (Guide::BackingUp(p), _) => format!("writing {}…", p.display()),
            (_, Some(p)) => format!("written to {}", p.display()),
            _ => "not taken in this console (recommended first)".into(),
        };
        lines.push(Line::from(format!("   b  1 backup     {backup}")));
        let plan = match (&m.guide, &m.plan) {
            (Guide::Planning, _) => "counting…".into(),
            (_, Some(p)) => format!(
                "{} rows to move (due {}, inflight {},",
                num(p.rows.iter().sum::<u64>() as i64),
                num(p.rows[0] as i64),
                num(p.rows[1] as i64),
            ),
            _ => "not run: counts the rows per phase".into(),
        };
        lines.push(Line::from(format!("   n  2 dry run    {plan}")));
        if let (Some(p), false) = (&m.plan, m.guide == Guide::Planning) {
            lines.push(Line::from(format!(
                "                   dead {}, archive {})",
                num(p.rows[2] as i64),
                num(p.rows[3] as i64)
            )));
        }
        let run: String = match &m.guide {
            Guide::Running => "running… (p or Esc pauses between steps)".into(),
            Guide::Pausing => "pausing after this step…".into(),
            Guide::Paused => "paused (M resumes)".into(),
            _ if m.status == Some(Status::Done) => "done".into(),
            _ if m.migrating => "interrupted (M resumes; type \"migrate\")".into(),
            _ => "type \"migrate\" to confirm; one-way: take the backup first".into(),
        };
        lines.push(Line::from(format!("   M  3 migrate    {run}")));
        let check = match &m.guide {
            Guide::Checking => Line::from("   c  4 check      folding every family…"),
            Guide::Checked(r) if r.ok() => Line::from(Span::styled(
                format!(
                    "   c  4 check      OK: {} tenants, {} due, {} inflight, {} dead rows",
                    num(r.tenants as i64),
                    num(r.due_rows as i64),
                    num(r.inflight_rows as i64),
                    num(r.dead_rows as i64)
                ),
                theme.fg(Color::Green).add_modifier(Modifier::BOLD),
            )),
            Guide::Checked(r) => Line::from(Span::styled(
                format!(
                    "   c  4 check      {} mismatches: run ankusa store check --store {path}",
                    r.mismatches.len() as u64 + r.more_mismatches
                ),
                theme.fg(Color::Red).add_modifier(Modifier::BOLD),
            )),
            Guide::Reopening => Line::from("   c  4 check      OK; opening the store…"),
            _ => Line::from("   c  4 check      runs after the migration"),
        };
        lines.push(check);
        if matches!(&m.guide, Guide::Checked(r) if r.ok()) {
            lines.push(Line::from(Span::styled(
                "  Enter opens the migrated store.",
                theme.title(),
            )));
        }
        if let Guide::Failed(e) = &m.guide {
            lines.push(Line::from(Span::styled(
                format!("  Failed: {e}"),
                theme.fg(Color::Red),
            )));
            lines.push(Line::from(
                "  Nothing is half done (one synced write per step): M resumes.",
            ));
        }
    } else if m.status != Some(Status::Done) && m.holder.is_none() && m.read_only {
        lines.push(Line::from(
            "  Opened with --read-only: the guided upgrade is not offered.",
        ));
    }
    if m.status != Some(Status::Done) {
        lines.push(Line::from("  From a shell:"));
        lines.push(Line::from(format!(
            "    ankusa store backup --store {path} --out DIR"
        )));
        lines.push(Line::from(format!(
            "    ankusa store migrate --store {path}"
        )));
    }
    f.render_widget(
        Paragraph::new(lines)
            .block(block(" Migration ".into(), theme))
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn pct(done: u64, total: u64) -> String {
    (done.min(total) * 100)
        .checked_div(total)
        .map_or_else(|| "-".into(), |p| format!("{p}%"))
}

fn log(f: &mut Frame, theme: &Theme, area: Rect) {
    let w = tui_logger::TuiLoggerWidget::default()
        .block(block(
            " Log (console events; ANKUSA_LOG sets the level) ".into(),
            theme,
        ))
        .output_separator(' ')
        .output_timestamp(Some("%H:%M:%S".into()))
        .output_target(false)
        .output_file(false)
        .output_line(false);
    f.render_widget(w, area);
}

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

fn help(f: &mut Frame, app: &App, scroll: u16, theme: &Theme, area: Rect) {
    let lines: Vec<Line> = keymap::help_lines(app.can_act())
        .into_iter()
        .map(|(title, text)| match title {
            Some(t) => Line::from(Span::styled(t, theme.title())),
            None => Line::from(text),
        })
        .collect();
    let r = centered(area, 78, area.height);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .block(block(" Keys (j/k scroll; ? or Esc closes) ".into(), theme))
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0)),
        r,
    );
}

fn input(f: &mut Frame, kind: &InputKind, text: &str, theme: &Theme, area: Rect) {
    let prompt = match kind {
        InputKind::Filter => "filter tenants: ",
        InputKind::Command => ":",
    };
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(prompt, theme.title()),
            Span::raw(format!("{text}▏")),
        ])),
        area,
    );
}

fn guard(f: &mut Frame, app: &App, scope: &ActionScope, stage: &Stage, theme: &Theme, area: Rect) {
    let mut lines = vec![Line::from(format!(" Scope: {}", scope.describe()))];
    if let ActionScope::ReplayRows { rows } = scope {
        for r in rows.iter().take(3) {
            lines.push(Line::from(format!(
                "   {} sink {} dead at {}",
                r.hook_id,
                r.sink,
                utc(r.at)
            )));
        }
        if rows.len() > 3 {
            lines.push(Line::from(format!("   … and {} more", rows.len() - 3)));
        }
    }
    lines.push(Line::from(""));
    match stage {
        Stage::Counting => lines.push(Line::from(" Dry run: counting the rows this would touch…")),
        Stage::Confirm { count, typed } => {
            lines.push(Line::from(Span::styled(
                format!(" Dry run: {} row(s) would change.", num(*count as i64)),
                theme.title(),
            )));
            lines.push(Line::from(match scope {
                ActionScope::Purge { .. } => {
                    " Tab: pending+dead / pending only / dead only. Purged rows are gone."
                }
                ActionScope::Migrate => {
                    " Rows move in synced steps; an interrupted run resumes where it stopped."
                }
                ActionScope::Repair => {
                    " Counted: rows to quarantine, markers to put back, counters to set, hooks to reclaim."
                }
                _ => " Replayed rows become due now and leave the DLQ.",
            }));
            lines.push(Line::from(format!(
                " Type {:?} and press Enter to confirm; Esc cancels.",
                scope.confirm_word()
            )));
            lines.push(Line::from(vec![
                Span::raw(" > "),
                Span::styled(format!("{typed}▏"), theme.title()),
            ]));
        }
        Stage::Running(p) => {
            lines.push(Line::from(format!(
                " Running: {} of {} row(s)…",
                num(p.done as i64),
                num(p.total as i64)
            )));
            let w = 40usize;
            let filled = if p.total == 0 {
                w
            } else {
                (p.done.min(p.total) as usize * w) / p.total as usize
            };
            lines.push(Line::from(format!(
                " [{}{}]",
                "#".repeat(filled),
                ".".repeat(w - filled)
            )));
        }
        Stage::Done(Ok(r)) => {
            lines.push(Line::from(Span::styled(
                format!(
                    " Done: {} row(s) changed (dry run said {}).",
                    num(r.touched as i64),
                    num(r.expected as i64)
                ),
                theme.fg(Color::Green).add_modifier(Modifier::BOLD),
            )));
            lines.push(Line::from(" Enter or Esc closes and refreshes."));
        }
        Stage::Done(Err(e)) => {
            lines.push(Line::from(Span::styled(
                format!(" Failed: {e}"),
                theme.fg(Color::Red),
            )));
            lines.push(Line::from(" Enter or Esc closes."));
        }
    }
    let _ = app;
    let w = 76u16.min(area.width);
    let inner = usize::from(w.saturating_sub(2)).max(1);
    let rows: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner)).sum();
    let r = centered(area, w, rows as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .alignment(Alignment::Left)
            .block(block(" Guarded action ".into(), theme))
            .wrap(Wrap { trim: false }),
        r,
    );
}
