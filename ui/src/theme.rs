//! Styles and the frame pieces every screen and popup draws with. Every
//! style goes through [`Theme`], so `NO_COLOR` turns all colour off in one
//! place while bold and reverse video keep the selection visible.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::data::OpenMode;

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

    pub(crate) fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
    pub(crate) fn title(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    pub(crate) fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    pub(crate) fn mode(&self, m: &OpenMode) -> Style {
        let c = match m {
            OpenMode::Follow { .. } => Color::Green,
            OpenMode::ReadOnly => Color::Cyan,
            OpenMode::Write => Color::Red,
            OpenMode::NeedsMigration => Color::Yellow,
        };
        self.fg(c).add_modifier(Modifier::BOLD)
    }
    pub(crate) fn heat(&self, n: u32, cap: u32) -> Style {
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

pub(crate) fn block(title: String, theme: &Theme) -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(title, theme.title()))
}

/// A screen whose first reply has not come yet.
pub(crate) fn loading(f: &mut Frame, title: String, theme: &Theme, area: Rect) {
    f.render_widget(Paragraph::new(" loading…").block(block(title, theme)), area);
}

/// A `w`×`h` rectangle in the middle of `area` (clipped to it).
pub(crate) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}
