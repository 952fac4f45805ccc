//! The input line over the footer: a tenant name filter (`/`) or a `:`
//! command. Input is capped at 200 characters and control characters are
//! ignored; Enter hands the text to the app, Esc drops it, ↑ and ↓ ask the
//! app for the `:` prompt's history (`crate::history`).

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use crate::theme::Theme;

/// What the text is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputKind {
    Filter,
    Command,
}

/// What a key did to the input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Still editing (the text may have changed).
    Editing,
    Cancel,
    Submit,
    /// ↑: the command before (the `:` prompt's history).
    Older,
    /// ↓: the command after.
    Newer,
}

/// Longest input taken.
const MAX: usize = 200;

pub fn key(text: &mut String, k: &KeyEvent) -> Edit {
    match k.code {
        KeyCode::Esc => Edit::Cancel,
        KeyCode::Enter => Edit::Submit,
        KeyCode::Up => Edit::Older,
        KeyCode::Down => Edit::Newer,
        KeyCode::Backspace => {
            text.pop();
            Edit::Editing
        }
        KeyCode::Char(c) if !c.is_control() => {
            if text.len() < MAX {
                text.push(c);
            }
            Edit::Editing
        }
        _ => Edit::Editing,
    }
}

pub fn draw(f: &mut Frame, kind: &InputKind, text: &str, theme: &Theme, area: Rect) {
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
