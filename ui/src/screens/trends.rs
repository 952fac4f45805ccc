//! The rates-and-trends pieces the overview and the tenant detail draw: a
//! rate line per cumulative total (number, arrow, one-line sparkline), the
//! backlog and oldest-due trends, and a chart block (ratatui sparklines).
//! Drawn from a [`Series`] the app already holds; no reads of their own.
//!
//! A rate is shown only beside a running daemon ([`crate::app::App::rates_live`]):
//! on a stopped store the totals cannot move, and a zero would read as "no
//! traffic", so these say "no daemon: no rates" and show the totals.

use ankusa_store::{Total, Totals};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Sparkline;
use ratatui::Frame;

use crate::fmt::{age, num, per_s, spark};
use crate::rates::{Dir, Series, Trend};
use crate::theme::{block, Theme};

/// What a screen needs to draw its rates: the series of what it shows, and
/// whether a daemon moves the totals at all.
#[derive(Debug, Clone, Copy)]
pub struct Rates<'a> {
    pub series: Option<&'a Series>,
    pub live: bool,
}

/// The totals a screen lists: unrouted hooks only on a store that has
/// had one (a node that does not route by event type never does).
pub fn shown(totals: &Totals) -> impl Iterator<Item = Total> + '_ {
    Total::ALL
        .into_iter()
        .filter(|&t| t != Total::Unrouted || totals.unrouted > 0)
}

/// The label of a total in a rate line.
pub fn label(t: Total) -> &'static str {
    match t {
        Total::Accepted => "accepted",
        Total::Delivered => "delivered",
        Total::Retried => "retried",
        Total::DeadLettered => "dead-lettered",
        Total::Unrouted => "unrouted",
    }
}

/// The column title of a rate (`dlv/s`).
pub fn short(t: Total) -> &'static str {
    match t {
        Total::Accepted => "acc/s",
        Total::Delivered => "dlv/s",
        Total::Retried => "rtr/s",
        Total::DeadLettered => "dl/s",
        Total::Unrouted => "unr/s",
    }
}

/// The colour of a direction: more dead letters or retries, a bigger
/// backlog, an older oldest row are bad news; more deliveries good. The
/// arrow says it without colour.
fn dir_style(theme: &Theme, d: Dir, up_is_bad: bool) -> ratatui::style::Style {
    match (d, up_is_bad) {
        (Dir::Flat, _) => theme.plain(),
        (Dir::Up, true) | (Dir::Down, false) => theme.warn(),
        _ => theme.better(),
    }
}

/// Unrouted hooks on the rise mean a producer sends types no sink wants,
/// or a sink lost its subscription: worth a look either way.
fn up_is_bad(t: Total) -> bool {
    matches!(t, Total::Retried | Total::DeadLettered | Total::Unrouted)
}

/// A rate cell for a list: `12/s↑`, `…` while measuring, `-` without a daemon.
pub fn rate_cell(series: Option<&Series>, t: Total, live: bool) -> String {
    if !live {
        return "-".into();
    }
    match series.and_then(|s| s.rate(t)) {
        Some(r) => format!("{}{}", per_s(r.per_s), r.dir.arrow()),
        None => "…".into(),
    }
}

/// One rate line: `accepted      12/s ↑ ▂▃▅▇` in `width` columns.
pub fn rate_line(series: Option<&Series>, t: Total, width: usize, theme: &Theme) -> Line<'static> {
    let head = Span::styled(format!("{:<14}", label(t)), theme.label());
    let Some(s) = series else {
        return Line::from(vec![head, Span::raw("…")]);
    };
    match s.rate(t) {
        Some(r) => {
            let spark_w = width.saturating_sub(14 + 7 + 3);
            Line::from(vec![
                head,
                Span::raw(format!("{:>7} ", per_s(r.per_s))),
                Span::styled(
                    r.dir.arrow().to_owned(),
                    dir_style(theme, r.dir, up_is_bad(t)),
                ),
                Span::raw(" "),
                Span::styled(spark(&s.rate_bars(t), spark_w), theme.better()),
            ])
        }
        None => Line::from(vec![head, Span::raw("… measuring")]),
    }
}

fn trend_text(t: &Trend, show: impl Fn(i64) -> String) -> String {
    let d = t.now - t.then;
    let sign = if d >= 0 { "+" } else { "-" };
    format!(
        "{} {sign}{} in {}",
        show(t.now),
        show(d.abs()),
        span(t.over_ms)
    )
}

/// A trend's span, short: `40s`, `10m` (whole minutes from one on).
fn span(ms: u64) -> String {
    if ms < 60_000 {
        format!("{}s", ms / 1000)
    } else {
        format!("{}m", (ms + 30_000) / 60_000)
    }
}

/// The backlog trend line (`backlog  1,566 ↑ +120 in 10m00s`).
pub fn backlog_line(series: Option<&Series>, theme: &Theme) -> Line<'static> {
    trend_line(
        "backlog",
        series.and_then(Series::backlog_trend),
        num,
        theme,
    )
}

/// The oldest-due trend line (`oldest due  5m10s ↑ +1m08s in 10m00s`).
pub fn oldest_line(series: Option<&Series>, theme: &Theme) -> Line<'static> {
    trend_line(
        "oldest due",
        series.and_then(Series::oldest_trend),
        |ms| age(u64::try_from(ms).unwrap_or(0)),
        theme,
    )
}

fn trend_line(
    name: &str,
    t: Option<Trend>,
    show: impl Fn(i64) -> String,
    theme: &Theme,
) -> Line<'static> {
    let head = Span::styled(format!("{name:<14}"), theme.label());
    match t {
        Some(t) => {
            let text = trend_text(&t, &show);
            let (first, rest) = text.split_once(' ').unwrap_or((&text, ""));
            Line::from(vec![
                head,
                Span::raw(format!("{first} ")),
                Span::styled(t.dir.arrow().to_owned(), dir_style(theme, t.dir, true)),
                Span::raw(format!(" {rest}")),
            ])
        }
        None => Line::from(vec![head, Span::raw("… (measuring)")]),
    }
}

/// What replaces the rates on a stopped store: why, and the totals.
pub fn no_daemon_lines(totals: &Totals, theme: &Theme) -> Vec<Line<'static>> {
    let mut v = vec![Line::from(Span::styled(
        "no daemon: no rates".to_owned(),
        theme.warn(),
    ))];
    v.push(Line::from("totals since the store began:"));
    for t in shown(totals) {
        v.push(Line::from(vec![
            Span::styled(format!("{:<14}", label(t)), theme.label()),
            Span::raw(num(i64::try_from(totals.get(t)).unwrap_or(i64::MAX))),
        ]));
    }
    v
}

/// The chart block: delivered and accepted per second over the last
/// minute, and the backlog over the history (up to an hour), as ratatui
/// sparklines side by side. Draws nothing in an area under 4 rows.
pub fn charts(f: &mut Frame, series: Option<&Series>, theme: &Theme, area: Rect) {
    if area.height < 4 {
        return;
    }
    let Some(s) = series else {
        return;
    };
    let [left, mid, right] = Layout::horizontal([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .areas(area);
    let draw = |f: &mut Frame, title: String, data: Vec<u64>, style: Style, at: Rect| {
        let w = usize::from(at.width.saturating_sub(2));
        let shown = data[data.len().saturating_sub(w)..].to_vec();
        f.render_widget(
            Sparkline::default()
                .block(block(title, theme))
                .data(&shown)
                .style(style),
            at,
        );
    };
    let rate_title = |t: Total| match s.rate(t) {
        Some(r) => format!(" {}/s {} {} ", label(t), per_s(r.per_s), r.dir.arrow()),
        None => format!(" {}/s … ", label(t)),
    };
    draw(
        f,
        rate_title(Total::Delivered),
        s.rate_bars(Total::Delivered),
        theme.better(),
        left,
    );
    draw(
        f,
        rate_title(Total::Accepted),
        s.rate_bars(Total::Accepted),
        theme.label(),
        mid,
    );
    let backlog_title = format!(" backlog, last {} ", age(s.history_span_ms()));
    draw(f, backlog_title, s.backlog_bars(), theme.warn(), right);
}

/// The rates block of the tenant detail: four rates in two columns, then
/// the two trends; on a stopped store, why there are none and the totals.
pub fn block_lines(
    series: Option<&Series>,
    totals: &Totals,
    live: bool,
    width: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    if !live {
        let t = |x: Total| num(i64::try_from(totals.get(x)).unwrap_or(i64::MAX));
        return vec![
            Line::from(Span::styled(
                " no daemon: no rates".to_owned(),
                theme.warn(),
            )),
            Line::from(format!(
                " totals: accepted {}   delivered {}   retried {}   dead-lettered {}",
                t(Total::Accepted),
                t(Total::Delivered),
                t(Total::Retried),
                t(Total::DeadLettered)
            )),
        ];
    }
    let col = width.saturating_sub(2) / 2;
    let pair = |a: Total, b: Total| {
        let mut spans = vec![Span::raw(" ")];
        let left = rate_line(series, a, col.saturating_sub(1), theme);
        let used: usize = left.spans.iter().map(|s| s.content.chars().count()).sum();
        spans.extend(left.spans);
        spans.push(Span::raw(" ".repeat(col.saturating_sub(used))));
        spans.extend(rate_line(series, b, col.saturating_sub(1), theme).spans);
        Line::from(spans)
    };
    let mut trends = vec![Span::raw(" ")];
    let backlog = backlog_line(series, theme);
    let used: usize = backlog
        .spans
        .iter()
        .map(|s| s.content.chars().count())
        .sum();
    trends.extend(backlog.spans);
    trends.push(Span::raw(" ".repeat(col.saturating_sub(used).max(2))));
    trends.extend(oldest_line(series, theme).spans);
    vec![
        pair(Total::Accepted, Total::Delivered),
        pair(Total::Retried, Total::DeadLettered),
        Line::from(trends),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unrouted total shows once a store has one, and only then: a
    /// relay that does not route keeps the overview it had.
    #[test]
    fn unrouted_shows_only_on_a_store_that_has_one() {
        let mut t = Totals::default();
        assert!(!shown(&t).any(|x| x == Total::Unrouted));
        assert_eq!(shown(&t).count(), Total::ALL.len() - 1);
        t.unrouted = 1;
        assert!(shown(&t).any(|x| x == Total::Unrouted));
        let lines = no_daemon_lines(&t, &Theme { color: false });
        assert!(
            lines
                .iter()
                .any(|l| l.spans.iter().any(|s| s.content.contains("unrouted"))),
            "{lines:?}"
        );
    }
}
