//! The active-tenant heatmap: tenants with work due (oldest marker first)
//! by due-time buckets, overdue left of "now" and retries right, zoomable.
//! A page walks a bounded number of active-index markers and counts each
//! cell with a cap, so its cost follows the rows shown.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{Next, Screen, NAME_COL};
use crate::data::{HeatmapData, Request};
use crate::fmt::cut;
use crate::heatmap::{glyph, legend, zoom_label, HeatSpec, ZOOMS};
use crate::theme::{block, loading, Theme};

#[derive(Debug, Clone, PartialEq)]
pub struct HeatState {
    pub zoom: usize,
    pub offset: usize,
    pub sel: usize,
    pub data: Option<HeatmapData>,
}

impl HeatState {
    pub fn new() -> Self {
        HeatState {
            zoom: 0,
            offset: 0,
            sel: 0,
            data: None,
        }
    }

    /// The geometry at a terminal `width` wide.
    pub fn spec(&self, width: u16) -> HeatSpec {
        let cols = usize::from(width.saturating_sub(2 + NAME_COL as u16 + 1)).max(8);
        HeatSpec::new(ZOOMS[self.zoom.min(ZOOMS.len() - 1)], cols)
    }

    /// Tenant rows a page holds when `list_rows` rows fit (the axis and the
    /// legend take two).
    fn page_rows(list_rows: usize) -> usize {
        list_rows.saturating_sub(2).max(1)
    }

    pub fn requests(&self, list_rows: usize, width: u16) -> Vec<Request> {
        vec![Request::Heatmap {
            offset: self.offset,
            rows: Self::page_rows(list_rows),
            heat: self.spec(width),
        }]
    }

    pub fn rows_shown(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.rows.len())
    }

    /// `+` / `-`: narrower or wider buckets.
    pub fn zoom(&mut self, zoom_in: bool) {
        let z = self.zoom;
        self.zoom = if zoom_in {
            z.saturating_sub(1)
        } else {
            (z + 1).min(ZOOMS.len() - 1)
        };
    }

    /// `g`: back to the first page; whether it moved.
    pub fn first_page(&mut self) -> bool {
        if self.offset > 0 {
            self.offset = 0;
            return true;
        }
        false
    }

    /// PgDn / PgUp; whether the page changed.
    pub fn page(&mut self, down: bool, list_rows: usize) -> bool {
        let rows = Self::page_rows(list_rows);
        if down {
            if !self.data.as_ref().is_some_and(|d| d.more) {
                return false;
            }
            self.offset += rows;
        } else if self.offset > 0 {
            self.offset = self.offset.saturating_sub(rows);
        } else {
            return false;
        }
        self.sel = 0;
        true
    }

    /// Enter: the selected tenant's detail.
    pub fn open(&self) -> Next {
        match self.data.as_ref().and_then(|d| d.rows.get(self.sel)) {
            Some(r) => Next::Push(Screen::Tenant { ord: r.ord }),
            None => Next::Stay,
        }
    }
}

impl Default for HeatState {
    fn default() -> Self {
        Self::new()
    }
}

/// The time axis above a heatmap: overdue to the left of "now".
pub(crate) fn heat_axis(spec: &HeatSpec, indent: usize) -> Line<'static> {
    let mut s = " ".repeat(indent);
    let left = format!("← overdue ({} buckets)", zoom_label(spec.bucket_ms));
    let mut axis: Vec<char> = vec![' '; spec.cols];
    for (i, c) in left
        .chars()
        .enumerate()
        .take(spec.now_col.saturating_sub(1))
    {
        axis[i] = c;
    }
    axis[spec.now_col] = '▼';
    for (i, c) in "now  retries →".chars().enumerate() {
        if spec.now_col + 1 + i < spec.cols {
            axis[spec.now_col + 1 + i] = c;
        }
    }
    s.extend(axis);
    Line::from(s)
}

/// One row of cells; an empty "now" column is drawn as the axis line.
pub(crate) fn heat_cells(
    cells: &[u32],
    cap: u32,
    now_col: usize,
    theme: &Theme,
) -> Vec<Span<'static>> {
    cells
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let g = if i == now_col && n == 0 {
                '│'
            } else {
                glyph(n, cap)
            };
            Span::styled(g.to_string(), theme.heat(n, cap))
        })
        .collect()
}

pub fn draw(f: &mut Frame, heat: &HeatState, theme: &Theme, area: Rect) {
    let Some(h) = &heat.data else {
        return loading(f, " Heatmap ".into(), theme, area);
    };
    let title = format!(
        " Active tenants × due time ({} buckets, oldest first, rows {}-{}{}) ",
        zoom_label(h.spec.bucket_ms),
        h.offset + 1,
        h.offset + h.rows.len(),
        if h.more { ", more: PgDn" } else { "" }
    );
    let mut lines = vec![heat_axis(&h.spec, NAME_COL + 1)];
    if h.rows.is_empty() {
        lines.push(Line::from("  no tenant has work due"));
    }
    for (i, r) in h.rows.iter().enumerate() {
        let name = Span::styled(
            format!("{:<w$} ", cut(&r.name, NAME_COL), w = NAME_COL),
            if i == heat.sel {
                theme.selected()
            } else {
                Style::default()
            },
        );
        let mut v = vec![name];
        v.extend(heat_cells(&r.cells, h.spec.cap, h.spec.now_col, theme));
        lines.push(Line::from(v));
    }
    let inner_h = area.height.saturating_sub(2) as usize;
    while lines.len() + 1 < inner_h {
        lines.push(Line::from(""));
    }
    lines.push(Line::from(format!(
        "{}{}   +/- zoom",
        " ".repeat(NAME_COL + 1),
        legend(h.spec.cap)
    )));
    f.render_widget(Paragraph::new(lines).block(block(title, theme)), area);
}
