//! The active-tenant heatmap: due rows of a tenant counted per due-time
//! bucket, with a cap per cell ([`CAP`]) so a cell costs at most `cap + 1`
//! keys read and one seek, whatever the backlog.
//!
//! Columns are aligned to the zoom so cells do not shift between refreshes.
//! Column `now_col` holds "now"; columns to its left are overdue (column 0
//! also takes everything older), columns to its right are scheduled
//! (retries waiting out their backoff; the last column takes everything
//! later).

use ankusa_store::queries;
use ankusa_store::{Store, StoreError};

/// Zoom levels: bucket widths in ms, 1 s to 1 h.
pub const ZOOMS: [u64; 7] = [1_000, 5_000, 15_000, 60_000, 300_000, 900_000, 3_600_000];

/// Cells above this many rows show as saturated.
pub const CAP: u32 = 8;

/// The geometry of a heatmap row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeatSpec {
    pub bucket_ms: u64,
    pub cols: usize,
    pub now_col: usize,
    pub cap: u32,
}

impl HeatSpec {
    /// A spec for `cols` columns with three quarters of them overdue.
    pub fn new(bucket_ms: u64, cols: usize) -> Self {
        let cols = cols.max(2);
        Self {
            bucket_ms: bucket_ms.max(1),
            cols,
            now_col: (cols * 3 / 4).min(cols - 1),
            cap: CAP,
        }
    }

    /// `[lo, hi)` of due times column `i` counts at `now`.
    pub fn range(&self, i: usize, now: u64) -> (u64, u64) {
        let z = self.bucket_ms;
        let base = now - now % z;
        let start = |c: usize| -> u64 {
            if c >= self.now_col {
                base.saturating_add((c - self.now_col) as u64 * z)
            } else {
                base.saturating_sub((self.now_col - c) as u64 * z)
            }
        };
        let lo = if i == 0 { 0 } else { start(i) };
        let hi = if i + 1 >= self.cols {
            u64::MAX
        } else {
            start(i + 1)
        };
        (lo, hi)
    }

    /// The column a due time falls in at `now`.
    pub fn column_of(&self, at: u64, now: u64) -> usize {
        (0..self.cols)
            .find(|&i| {
                let (lo, hi) = self.range(i, now);
                at >= lo && at < hi
            })
            .unwrap_or(self.cols - 1)
    }
}

/// The column edges at `now`: column `i` counts `edges[i] <= at <
/// edges[i + 1]` (`edges[0]` is 0: column 0 also takes everything older).
pub fn edges(spec: &HeatSpec, now: u64) -> Vec<u64> {
    let mut e: Vec<u64> = (0..spec.cols).map(|i| spec.range(i, now).0).collect();
    e.push(spec.range(spec.cols - 1, now).1);
    e
}

/// Due rows of tenant `ord` per column, each count capped at `cap + 1`
/// (a count above `cap` means "more than cap").
pub fn count_row(
    store: &Store,
    ord: u32,
    spec: &HeatSpec,
    now: u64,
) -> Result<Vec<u32>, StoreError> {
    Ok(count_rows(store, &[ord], spec, now)?
        .pop()
        .unwrap_or_else(|| vec![0; spec.cols]))
}

/// Due rows of several tenants per column, capped: one store iterator for
/// all the rows ([`queries::due_window_counts`]); per row one seek, then per
/// non-empty cell at most `cap + 1` keys read and one seek past a saturated
/// cell, so a refresh costs at most `rows × (1 + cols)` seeks and
/// `rows × cols × (cap + 1)` keys whatever the backlog.
pub fn count_rows(
    store: &Store,
    ords: &[u32],
    spec: &HeatSpec,
    now: u64,
) -> Result<Vec<Vec<u32>>, StoreError> {
    queries::due_window_counts(store, ords, &edges(spec, now), spec.cap)
}

/// A cell's glyph: intensity by count, saturated above the cap. Glyphs carry
/// the information on their own, so the heatmap reads without colour.
pub fn glyph(count: u32, cap: u32) -> char {
    match count {
        0 => '·',
        1 => '░',
        2..=3 => '▒',
        n if n <= cap => '▓',
        _ => '█',
    }
}

/// The legend line for a cap.
pub fn legend(cap: u32) -> String {
    format!("· 0  ░ 1  ▒ 2-3  ▓ 4-{cap}  █ >{cap}")
}

/// A zoom's label.
pub fn zoom_label(ms: u64) -> String {
    if ms >= 3_600_000 {
        format!("{}h", ms / 3_600_000)
    } else if ms >= 60_000 {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_tile_time_without_gaps_and_now_is_in_now_col() {
        let spec = HeatSpec::new(1000, 20);
        let now = 1_700_000_000_500;
        assert_eq!(spec.range(0, now).0, 0);
        assert_eq!(spec.range(spec.cols - 1, now).1, u64::MAX);
        for i in 0..spec.cols - 1 {
            assert_eq!(
                spec.range(i, now).1,
                spec.range(i + 1, now).0,
                "gap after column {i}"
            );
        }
        assert_eq!(spec.column_of(now, now), spec.now_col);
        assert_eq!(spec.column_of(now - 1000, now), spec.now_col - 1);
        assert_eq!(spec.column_of(now + 1000, now), spec.now_col + 1);
        assert_eq!(spec.column_of(0, now), 0);
        assert_eq!(spec.column_of(u64::MAX - 1, now), spec.cols - 1);
    }

    #[test]
    fn glyphs_saturate_above_the_cap() {
        assert_eq!(glyph(0, 8), '·');
        assert_eq!(glyph(1, 8), '░');
        assert_eq!(glyph(3, 8), '▒');
        assert_eq!(glyph(8, 8), '▓');
        assert_eq!(glyph(9, 8), '█');
        assert_eq!(glyph(1000, 8), '█');
    }

    #[test]
    fn zoom_labels() {
        let labels: Vec<String> = ZOOMS.iter().map(|&z| zoom_label(z)).collect();
        assert_eq!(labels, ["1s", "5s", "15s", "1m", "5m", "15m", "1h"]);
    }
}
