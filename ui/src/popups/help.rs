//! The help overlay, generated from the keymap ([`crate::keymap`]), so
//! the keys it lists are the keys that work. The guarded actions' keys are
//! listed only when the console may act.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use crate::keymap::{self, KeyAction};
use crate::theme::{block, centered, Theme};

/// The overlay's lines: the keys by scope ([`keymap::help_lines`]), then
/// the `:` commands ([`crate::commands`]).
pub fn lines(can_act: bool) -> Vec<(Option<&'static str>, String)> {
    let mut out = keymap::help_lines(can_act);
    out.push((Some("Commands (after :)"), String::new()));
    out.extend(crate::commands::help_lines().into_iter().map(|l| (None, l)));
    out
}

/// A key on the help overlay scrolled to `scroll`: the new scroll, or None
/// when the key closes it.
pub fn key(scroll: u16, k: &KeyEvent, can_act: bool) -> Option<u16> {
    let max = lines(can_act).len() as u16;
    if matches!(
        k.code,
        KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('?') | KeyCode::Enter
    ) {
        return None;
    }
    Some(match keymap::lookup(k) {
        Some(KeyAction::Down) => (scroll + 1).min(max),
        Some(KeyAction::Up) => scroll.saturating_sub(1),
        Some(KeyAction::PageDown) => (scroll + 10).min(max),
        Some(KeyAction::PageUp) => scroll.saturating_sub(10),
        Some(KeyAction::Top) => 0,
        _ => scroll,
    })
}

pub fn draw(f: &mut Frame, can_act: bool, scroll: u16, theme: &Theme, area: Rect) {
    let lines: Vec<Line> = lines(can_act)
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
