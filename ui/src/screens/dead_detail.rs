//! One dead delivery row: who and when, its delivery history, and a
//! bounded, redacted preview of its hook (the admin API's rule,
//! [`ankusa_ops::preview`]).

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use ankusa_ops::preview::Body;

use crate::data::DeadDetail;
use crate::fmt::{age, cut, utc};
use crate::theme::{block, loading, Theme, DEAD};

pub fn draw(f: &mut Frame, detail: Option<&DeadDetail>, now: u64, theme: &Theme, area: Rect) {
    let Some(d) = detail else {
        return loading(f, " Dead delivery ".into(), theme, area);
    };
    let r = &d.row;
    let mut lines = vec![
        Line::from(format!(
            " hook {}  sink {}  tenant {}",
            r.hook_id, d.sink, d.tenant
        )),
        Line::from(Span::styled(
            format!(
                " {DEAD} since {} ({} ago){}",
                utc(r.at),
                age(now.saturating_sub(r.at)),
                if d.still_dead {
                    ""
                } else {
                    "  — no longer dead (replayed or purged)"
                }
            ),
            if d.still_dead {
                theme.dead()
            } else {
                Style::default()
            },
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
                    " Hook (source {}{}{})",
                    p.source,
                    p.event_type
                        .as_ref()
                        .map_or(String::new(), |t| format!(", type {t}")),
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
