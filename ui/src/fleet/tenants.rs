//! The fleet's tenants: every node's top tenants by pending rows, merged
//! (so the list's top is the fleet's top), with
//! a node column; a node that does not answer keeps its last-known rows,
//! marked `?`. The last line is the fleet's totals: the sum of the
//! answering nodes' own node counters (not of the rows listed). Enter opens
//! a tenant from its node; `H`/`U` pause and resume it there.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{FleetApp, TENANTS_PER_NODE};
use crate::fmt::{bytes, cut, num};
use crate::theme::{block, Theme};

fn row(node: &str, tenant: &str, c: [String; 5]) -> String {
    let [pending, scheduled, inflight, dead, size] = c;
    format!(
        " {:<8} {:<16} {:>8} {:>7} {:>8} {:>6} {:>7}",
        cut(node, 8),
        cut(tenant, 16),
        pending,
        scheduled,
        inflight,
        dead,
        size
    )
}

pub fn draw(f: &mut Frame, app: &FleetApp, theme: &Theme, area: Rect) {
    let header = row(
        "node",
        "tenant",
        ["pending", "sched", "inflight", "dead", "bytes"].map(String::from),
    );
    let mut lines = vec![Line::from(Span::styled(header, theme.title()))];
    let rows = app.view.tenant_rows();
    let shown = app.list_rows();
    for (i, (node, current, t, paused)) in rows.iter().enumerate().skip(app.tenant_top).take(shown)
    {
        let c = &t.counters;
        let node = if *current {
            (*node).to_owned()
        } else {
            format!("{node}?")
        };
        let text = row(
            &node,
            &t.id,
            [
                num(c.pending),
                num(c.scheduled),
                num(c.inflight),
                num(c.dead),
                bytes(c.bytes),
            ],
        );
        let mut style = if *current {
            theme.plain()
        } else {
            theme.warn()
        };
        if i == app.tenant_sel {
            style = style.patch(theme.selected());
        }
        let mut spans = vec![Span::styled(text, style)];
        if *paused {
            spans.push(Span::raw(" "));
            spans.push(theme.paused_badge());
        }
        lines.push(Line::from(spans));
    }
    if rows.is_empty() {
        lines.push(Line::from(" no tenants yet (or no node answered)"));
    }
    while lines.len() < shown + 1 {
        lines.push(Line::from(""));
    }
    let (t, up) = app.view.totals();
    lines.push(Line::from(vec![
        Span::styled(
            format!(
                "{:<26}",
                cut(
                    &format!(" totals, {up} of {} nodes", app.view.nodes.len()),
                    26
                )
            ),
            theme.label(),
        ),
        Span::raw(format!(
            " {:>8} {:>7} {:>8} {:>6} {:>7}",
            num(t.pending),
            num(t.scheduled),
            num(t.inflight),
            num(t.dead),
            bytes(t.bytes)
        )),
    ]));
    let stale = rows.iter().any(|(_, current, ..)| !current);
    let title = format!(
        " Tenants, all nodes (most pending first, top {TENANTS_PER_NODE} per node{}) ",
        if stale { "; ? last known" } else { "" }
    );
    f.render_widget(Paragraph::new(lines).block(block(title, theme)), area);
}
