//! A tenant across the fleet: its counters, oldest due row, pauses and
//! newest dead rows from every node that holds rows of it (its owner, and
//! after a move the node it left), each node in its own section; a node
//! that does not answer says so. `A` replays its dead rows and `H`/`U`
//! pause and resume it on the node it was opened from.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use super::FleetApp;
use crate::fmt::{age, bytes, cut, num};
use crate::theme::{block, loading, Theme};

pub fn draw(f: &mut Frame, app: &FleetApp, name: &str, node: &str, theme: &Theme, area: Rect) {
    let title = format!(" Tenant {name} (actions on {node}) ");
    let Some(t) = app.tenant.as_ref().filter(|t| t.name == name) else {
        loading(f, title, theme, area);
        return;
    };
    let width = usize::from(area.width.saturating_sub(4));
    let mut lines = Vec::new();
    for a in &t.answers {
        let mark = if a.node == node { " ◆" } else { "" };
        lines.push(Line::from(Span::styled(
            format!(" ── {}{mark} ({})", a.node, a.endpoint),
            theme.title(),
        )));
        let on = match &a.result {
            Ok(on) => on,
            Err(e) => {
                lines.push(Line::from(Span::styled(
                    cut(&format!("   unreachable: {e}"), width),
                    theme.error(),
                )));
                continue;
            }
        };
        let d = &on.detail;
        let c = &d.counters;
        lines.push(Line::from(format!(
            "   pending {}  scheduled {}  inflight {}  dead {}  bytes {}",
            num(c.pending),
            num(c.scheduled),
            num(c.inflight),
            num(c.dead),
            bytes(c.bytes)
        )));
        let due = match (d.first_due_at, d.oldest_due_age_ms) {
            (Some(_), Some(a)) if a > 0 => format!("oldest due {} ago", age(a)),
            (Some(at), _) => format!("next due in {}", age(at.saturating_sub(t.at))),
            (None, _) => "nothing due".to_owned(),
        };
        let mut spans = vec![Span::raw(format!("   {due}"))];
        if !d.paused.is_empty() {
            spans.push(Span::raw("  "));
            spans.push(theme.paused_badge());
            let labels: Vec<&str> = d.paused.iter().map(|p| p.label.as_str()).collect();
            spans.push(Span::raw(format!(" {}", labels.join(", "))));
        }
        lines.push(Line::from(spans));
        if on.dlq.is_empty() {
            lines.push(Line::from("   no dead rows"));
        }
        for e in &on.dlq {
            lines.push(Line::from(Span::styled(
                cut(
                    &format!(
                        "   {}  sink {}  dead {} ago",
                        e.row.hook_id,
                        if e.sink_name.is_empty() {
                            format!("{}/{}", e.row.source_id, e.row.sink)
                        } else {
                            e.sink_name.clone()
                        },
                        age(t.at.saturating_sub(e.row.at)),
                    ),
                    width,
                ),
                theme.dead(),
            )));
        }
        if on.more {
            lines.push(Line::from(
                "   … more dead rows on this node (ankusa dlq list)",
            ));
        }
    }
    f.render_widget(
        Paragraph::new(lines)
            .block(block(title, theme))
            .wrap(Wrap { trim: false }),
        area,
    );
}
