//! The log pane: the console's own events (tui-logger), never the
//! process's stderr, which would scribble over the screen.

use ratatui::layout::Rect;
use ratatui::Frame;

use crate::theme::{block, Theme};

pub fn draw(f: &mut Frame, theme: &Theme, area: Rect) {
    let w = tui_logger::TuiLoggerWidget::default()
        .block(block(
            " Log (console events; ANKUSA_LOG sets the level) ".into(),
            theme,
        ))
        .output_separator(' ')
        .output_timestamp(Some("%H:%M:%S".into()))
        .output_target(false)
        .output_file(false)
        .output_line(false);
    f.render_widget(w, area);
}
