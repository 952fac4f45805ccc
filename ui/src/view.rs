//! The frame: the header (store, mode, freshness, daemon), the tab bar,
//! the current screen, the footer (error, status or key hints) and the
//! popups over them. A pure function of [`App`]; each screen and popup
//! draws itself (see [`crate::screens`], [`crate::popups`]).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::app::App;
use crate::data::{DaemonStatus, OpenMode};
use crate::fmt::{age, cut_left};
use crate::keymap::Tab;
use crate::popups::{guard, help, input, Overlay};
use crate::screens::{
    dead_detail, dlq, heatmap, log, migration, overview, sinks, tenant, tenants, Screen,
};
use crate::theme::Theme;

/// The rows every console screen is drawn in, single-node and fleet alike:
/// header, tabs, body, footer.
pub fn chrome(area: Rect) -> [Rect; 4] {
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area)
}

pub fn draw(f: &mut Frame, app: &App, theme: &Theme) {
    let area = f.area();
    let [head, tabs, body, foot] = chrome(area);
    f.render_widget(Paragraph::new(header_line(app, theme)), head);
    f.render_widget(Paragraph::new(tabs_line(app, theme)), tabs);
    match app.screen() {
        Screen::Overview => overview::draw(
            f,
            app.overview.as_ref(),
            overview::Facts {
                now: app.now,
                daemon: app.header.daemon,
                notices: &app.notices,
                rates: crate::screens::trends::Rates {
                    series: Some(app.rates.node()),
                    live: app.rates_live(),
                },
            },
            theme,
            body,
        ),
        Screen::Tenants => tenants::draw(
            f,
            &app.tenants,
            app.tenant_rows(),
            app.now,
            (&app.rates, app.rates_live()),
            theme,
            body,
        ),
        Screen::Tenant { .. } => tenant::draw(
            f,
            app.tenant.as_ref(),
            app.heat_spec(),
            app.now,
            crate::screens::trends::Rates {
                series: app.screen_tenant_series(),
                live: app.rates_live(),
            },
            theme,
            body,
        ),
        Screen::Heatmap => heatmap::draw(f, &app.heat, theme, body),
        Screen::Dlq { ord, name } => {
            dlq::draw(f, *ord, name.as_deref(), &app.dlq, app.now, theme, body)
        }
        Screen::DeadDetail { .. } => {
            dead_detail::draw(f, app.detail.as_ref(), app.now, theme, body)
        }
        Screen::Migration => migration::draw(f, &app.migration, &app.header.path, theme, body),
        Screen::Log => log::draw(f, theme, body),
        Screen::Actions => crate::screens::actions::draw(f, &app.actions, theme, body),
        Screen::Sinks => sinks::draw(f, &app.sinks, app.list_rows(), app.now, theme, body),
        Screen::Sink { sink } => {
            sinks::draw_detail(f, app.sinks.detail.as_ref(), sink, app.now, theme, body)
        }
    }
    f.render_widget(Paragraph::new(footer_line(app, theme)), foot);
    for o in &app.overlays {
        match o {
            Overlay::Help(scroll) => help::draw(f, app.can_act(), *scroll, theme, area),
            Overlay::Input { kind, text } => input::draw(f, kind, text, theme, foot),
            Overlay::Guard(g) => guard::draw(f, g, theme, area),
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

fn tabs_line(app: &App, theme: &Theme) -> Line<'static> {
    let cur = app.screen().tab();
    let mut spans = vec![Span::raw(" ")];
    for (t, label, _) in Tab::bar() {
        if t == cur {
            spans.push(Span::styled(format!("[{label}]"), theme.selected()));
        } else {
            spans.push(Span::raw(format!(" {label} ")));
        }
        spans.push(Span::raw(" "));
    }
    if app.busy > 0 {
        spans.push(Span::styled(" loading…", theme.warn()));
    }
    Line::from(spans)
}

fn footer_line(app: &App, theme: &Theme) -> Line<'static> {
    if let Some(e) = &app.error {
        return Line::from(Span::styled(
            format!(" error: {e}"),
            theme.error().add_modifier(Modifier::BOLD),
        ));
    }
    if !app.status.is_empty() {
        return Line::from(format!(" {}", app.status));
    }
    if let Some(n) = app.notices.last() {
        return Line::from(Span::styled(format!(" {n}"), theme.warn()));
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
            Screen::Tenants | Screen::Sinks | Screen::Sink { .. } => {
                hint.push_str("  H pause  U resume")
            }
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
