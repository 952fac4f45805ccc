//! The fleet console's frame: the header (the fleet file, how many nodes
//! answer, how old the survey is), the tab bar, the screen, the footer
//! (status or key hints) and the guard over them. A pure function of
//! [`FleetApp`].

use ankusa_ops::fleet::NodeStatus;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{nodes, tenant, tenants, FleetApp, FleetScreen};
use crate::fmt::{age, cut_left};
use crate::popups::{guard, Overlay};
use crate::theme::Theme;

pub fn draw(f: &mut Frame, app: &FleetApp, theme: &Theme) {
    let area = f.area();
    let [head, tabs, body, foot] = crate::view::chrome(area);
    f.render_widget(Paragraph::new(header_line(app, theme)), head);
    f.render_widget(Paragraph::new(tabs_line(app, theme)), tabs);
    match app.screen() {
        FleetScreen::Nodes => nodes::draw(f, app, theme, body),
        FleetScreen::Tenants => tenants::draw(f, app, theme, body),
        FleetScreen::Tenant { name, node } => tenant::draw(f, app, name, node, theme, body),
    }
    f.render_widget(Paragraph::new(footer_line(app)), foot);
    for o in &app.overlays {
        if let Overlay::Guard(g) = o {
            guard::draw_on(f, g, app.guard_node.as_deref(), theme, area);
        }
    }
}

fn header_line(app: &FleetApp, theme: &Theme) -> Line<'static> {
    let n = app.view.nodes.len();
    let down = app
        .view
        .nodes
        .iter()
        .filter(|(.., s)| matches!(s, NodeStatus::Unreachable { .. }))
        .count();
    let up = app
        .view
        .nodes
        .iter()
        .filter(|(.., s)| matches!(s, NodeStatus::Up { .. }))
        .count();
    let fresh = app
        .surveyed_at
        .map_or("asking every node…".to_owned(), |at| {
            format!("data {} old", age(app.now.saturating_sub(at)))
        });
    let path = app.path.display().to_string();
    let sep = || Span::raw(" │ ");
    let mut spans = vec![
        Span::styled(" ankusa ", theme.title()),
        Span::styled("FLEET", theme.ok()),
        sep(),
        Span::raw(cut_left(&path, 20)),
        sep(),
        Span::raw(format!("{up}/{n} up")),
    ];
    if down > 0 {
        spans.push(Span::styled(format!(", {down} unreachable"), theme.error()));
    }
    spans.push(sep());
    spans.push(Span::raw(fresh));
    Line::from(spans)
}

fn tabs_line(app: &FleetApp, theme: &Theme) -> Line<'static> {
    let cur = match app.screen() {
        FleetScreen::Nodes => 0,
        _ => 1,
    };
    let mut spans = vec![Span::raw(" ")];
    for (i, label) in ["1 Nodes", "2 Tenants"].into_iter().enumerate() {
        if i == cur {
            spans.push(Span::styled(format!("[{label}]"), theme.selected()));
        } else {
            spans.push(Span::raw(format!(" {label} ")));
        }
        spans.push(Span::raw(" "));
    }
    if app.surveying {
        spans.push(Span::styled(" asking the nodes…", theme.warn()));
    }
    Line::from(spans)
}

fn footer_line(app: &FleetApp) -> Line<'static> {
    if !app.status.is_empty() {
        return Line::from(format!(" {}", app.status));
    }
    Line::from(match app.screen() {
        FleetScreen::Nodes => " q quit  j/k move  Enter tenants  r refresh  D drain  U undrain",
        FleetScreen::Tenants => " q quit  j/k move  Enter open  r refresh  H pause  U resume",
        FleetScreen::Tenant { .. } => {
            " q back  r refresh  A replay its dead rows  H pause  U resume"
        }
    })
}
