//! Styles and the frame pieces every screen and popup draws with. Every
//! colour is chosen here, by meaning ([`Theme::dead`], [`Theme::paused`],
//! [`Theme::error`], ...): a screen asks for a meaning, never for a colour
//! ([`Theme::fg`] is private), so `NO_COLOR` turns all colour off in one place
//! while bold and reverse video keep the selection visible.
//!
//! Colour is never the only signal: a state a colour marks is also written
//! ([`DEAD`], [`PAUSED`] and the words of the screens), so the screen reads
//! the same under `NO_COLOR` and to a colour-blind operator.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use crate::data::OpenMode;

/// The word beside a paused tenant or sink (its colour is
/// [`Theme::paused`]).
pub const PAUSED: &str = "PAUSED";
/// The word beside a dead-lettered row or a count of them (its colour is
/// [`Theme::dead`]).
pub const DEAD: &str = "dead";

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
    pub(crate) fn title(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    pub(crate) fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    /// The name of a value in a key/value list.
    pub(crate) fn label(&self) -> Style {
        self.fg(Color::Cyan)
    }
    /// Something failed or is refused (an error line, a store fault).
    pub(crate) fn error(&self) -> Style {
        self.fg(Color::Red)
    }
    /// Something to look at (a notice, quarantined rows, loading).
    pub(crate) fn warn(&self) -> Style {
        self.fg(Color::Yellow)
    }
    /// A figure moving the right way (a rate arrow, a sparkline of work
    /// done); always beside its number and arrow.
    pub(crate) fn better(&self) -> Style {
        self.fg(Color::Green)
    }
    /// A figure that says nothing good or bad (a flat trend).
    pub(crate) fn plain(&self) -> Style {
        Style::default()
    }
    /// Something finished well.
    pub(crate) fn ok(&self) -> Style {
        self.fg(Color::Green).add_modifier(Modifier::BOLD)
    }
    /// Dead-lettered rows; written with [`DEAD`] or under a "dead" heading.
    pub fn dead(&self) -> Style {
        self.fg(Color::LightRed)
    }
    /// A paused tenant or sink; written with [`PAUSED`]. Apart from
    /// [`Theme::dead`] and [`Theme::error`]: paused is the operator's
    /// choice, not a failure.
    pub fn paused(&self) -> Style {
        self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
    }
    /// The [`PAUSED`] badge, word and colour together.
    pub fn paused_badge(&self) -> Span<'static> {
        Span::styled(PAUSED, self.paused())
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

/// A block whose title carries more than its words (a badge beside them).
pub(crate) fn block_with(title: Vec<Span<'static>>) -> Block<'static> {
    Block::default()
        .borders(Borders::ALL)
        .title(ratatui::text::Line::from(title))
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
