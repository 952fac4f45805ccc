//! The nodes screen: one row per node of the fleet file, in its order:
//! whether it answers (unreachable: its last-known figures stay on the row,
//! and the line under the table says how old they are and why),
//! whether it drains, its backlog, oldest due, rates, dead rows, tenants,
//! store format and version; under them why each unreachable node is, and
//! the fleet's totals. `D` drains the selected node, `U` undrains it.

use ankusa_ops::fleet::{FleetView, NodeStatus};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::FleetApp;
use crate::fmt::{age, cut, num, per_s};
use crate::theme::{block, Theme};

/// `name state drain backlog oldest acc/s dlv/s dead tenants fmt version`.
fn row(cells: [&str; 11]) -> String {
    let [name, state, drain, backlog, oldest, acc, dlv, dead, tenants, fmt, version] = cells;
    format!(
        " {:<8} {:<11} {:<5} {:>7} {:>6} {:>6} {:>6} {:>5} {:>5} {:>1} {}",
        cut(name, 8),
        cut(state, 11),
        drain,
        backlog,
        oldest,
        acc,
        dlv,
        dead,
        tenants,
        fmt,
        version
    )
}

pub fn draw(f: &mut Frame, app: &FleetApp, theme: &Theme, area: Rect) {
    let mut lines = vec![Line::from(Span::styled(
        row([
            "node", "state", "drain", "backlog", "oldest", "acc/s", "dlv/s", "dead", "tnts", "f",
            "version",
        ]),
        theme.title(),
    ))];
    for (i, (name, _, st)) in app.view.nodes.iter().enumerate() {
        let state = match st {
            NodeStatus::Unknown => "asking…".to_owned(),
            NodeStatus::Up { .. } => "up".to_owned(),
            // Its last answer's age is on the line under the table.
            NodeStatus::Unreachable { .. } => "UNREACHABLE".to_owned(),
        };
        let figures = FleetView::figures(st).map(|(f, _)| f);
        let rates = FleetView::rates(st);
        let dash = || "-".to_owned();
        let text = row([
            name,
            &state,
            figures.map_or("-", |f| {
                if f.state.draining.is_some() {
                    "yes"
                } else {
                    "no"
                }
            }),
            &figures.map_or_else(dash, |f| num(f.stats.node.queued())),
            &figures
                .and_then(|f| f.stats.oldest_due_age_ms)
                .map_or_else(dash, age),
            &rates.map_or_else(dash, |r| per_s(r.accepted)),
            &rates.map_or_else(dash, |r| per_s(r.delivered)),
            &figures.map_or_else(dash, |f| num(f.stats.node.dead)),
            &figures.map_or_else(dash, |f| num(i64::from(f.stats.tenants))),
            &figures.map_or_else(dash, |f| f.stats.format.to_string()),
            &figures
                .and_then(|f| f.stats.daemon.as_ref())
                .map_or_else(dash, |d| d.version.clone()),
        ]);
        let mut style = match st {
            NodeStatus::Unreachable { .. } => theme.error(),
            _ => theme.plain(),
        };
        if i == app.node_sel {
            style = style.patch(theme.selected());
        }
        lines.push(Line::from(Span::styled(text, style)));
    }
    lines.push(Line::from(""));
    let width = usize::from(area.width.saturating_sub(4));
    for (name, endpoint, st) in &app.view.nodes {
        if let NodeStatus::Unreachable { error, last_known } = st {
            let since = match last_known {
                Some((_, at)) => format!(
                    "figures {} old (its last answer)",
                    age(app.now.saturating_sub(*at))
                ),
                None => "no answer since the console opened".to_owned(),
            };
            lines.push(Line::from(Span::styled(
                cut(&format!(" {name}: {since}; {error} ({endpoint})"), width),
                theme.error(),
            )));
        }
    }
    let (t, up) = app.view.totals();
    lines.push(Line::from(vec![
        Span::styled(
            format!(" fleet ({up} of {} answering):", app.view.nodes.len()),
            theme.label(),
        ),
        Span::raw(format!(
            " backlog {}  inflight {}  dead {}",
            num(t.queued()),
            num(t.inflight),
            num(t.dead)
        )),
    ]));
    f.render_widget(
        Paragraph::new(lines).block(block(" Nodes ".into(), theme)),
        area,
    );
}
