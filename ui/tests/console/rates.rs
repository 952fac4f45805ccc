//! Rates and trends as pure state: sample series in (fixed clock), rates,
//! arrows and trends out; and the app beside a (simulated) daemon, where a
//! change in load shows within two refreshes.

use std::path::PathBuf;

use ankusa_store::{Counters, Total, Totals};
use ankusa_ui::app::{App, Header, Msg};
use ankusa_ui::data::{DaemonStatus, OpenMode, Overview, Reply, Request};
use ankusa_ui::rates::{
    Dir, RateBook, Sample, Series, HISTORY_MAX, MAX_TENANT_SERIES, RATE_WINDOW_MS,
};
use ankusa_ui::screens::migration::MigrationState;

const T0: u64 = 1_700_000_000_000;

fn totals(accepted: u64, delivered: u64) -> Totals {
    Totals {
        accepted,
        delivered,
        ..Totals::default()
    }
}

fn sample(at: u64, accepted: u64, delivered: u64, backlog: i64) -> Sample {
    Sample {
        at,
        totals: totals(accepted, delivered),
        backlog,
        oldest_age_ms: Some(0),
    }
}

#[test]
fn the_first_sample_gives_no_rate_and_the_second_does() {
    let mut s = Series::default();
    assert!(s.push(sample(T0, 100, 50, 0)));
    assert_eq!(s.rate(Total::Accepted), None, "one reading is no rate");
    assert_eq!(s.backlog_trend(), None);
    assert!(s.push(sample(T0 + 2_000, 120, 60, 0)));
    let r = s.rate(Total::Accepted).expect("a rate");
    assert_eq!(r.per_s, 10.0);
    assert_eq!(r.over_ms, 2_000);
    assert_eq!(s.rate(Total::Delivered).map(|r| r.per_s), Some(5.0));
    assert_eq!(s.rate(Total::Retried).map(|r| r.per_s), Some(0.0));
}

#[test]
fn a_reading_no_newer_than_the_last_is_ignored() {
    let mut s = Series::default();
    s.push(sample(T0, 0, 0, 0));
    s.push(sample(T0 + 2_000, 20, 0, 0));
    assert!(
        !s.push(sample(T0 + 2_000, 999, 0, 0)),
        "same catch-up, no news"
    );
    assert!(!s.push(sample(T0 + 1_000, 999, 0, 0)));
    assert_eq!(s.rate(Total::Accepted).map(|r| r.per_s), Some(10.0));
}

#[test]
fn the_rate_is_over_the_last_minute_and_the_arrow_follows_the_last_interval() {
    let mut s = Series::default();
    // Two minutes at 10/s, a reading every 2 s.
    let mut acc = 0;
    let mut at = T0;
    for _ in 0..60 {
        s.push(sample(at, acc, acc, 0));
        at += 2_000;
        acc += 20;
    }
    let r = s.rate(Total::Accepted).expect("rate");
    assert!(r.over_ms <= RATE_WINDOW_MS + 2_000, "over {}", r.over_ms);
    assert!(r.over_ms >= RATE_WINDOW_MS, "over {}", r.over_ms);
    assert_eq!(r.per_s, 10.0);
    assert_eq!(r.dir, Dir::Flat, "steady load");
    // Load doubles: the next reading shows it (up), the minute's average moves.
    s.push(sample(at, acc + 20, acc - 20, 0));
    let up = s.rate(Total::Accepted).expect("rate");
    assert_eq!(up.dir, Dir::Up);
    assert!(up.per_s > 10.0);
    // Deliveries stop: down at the next reading.
    assert_eq!(s.rate(Total::Delivered).map(|r| r.dir), Some(Dir::Down));
    let bars = s.rate_bars(Total::Accepted);
    assert_eq!(bars.last(), Some(&20));
    assert!(bars.len() <= 31, "one bar per interval in the window");
}

#[test]
fn a_total_that_goes_down_is_a_reset_not_a_negative_rate() {
    let mut s = Series::default();
    s.push(sample(T0, 1_000, 1_000, 5));
    s.push(sample(T0 + 2_000, 1_010, 1_010, 5));
    assert!(s.rate(Total::Accepted).is_some());
    // Another store under the same path (restored from a backup).
    s.push(sample(T0 + 4_000, 3, 3, 5));
    assert_eq!(s.rate(Total::Accepted), None, "starts again from the reset");
    s.push(sample(T0 + 6_000, 13, 3, 5));
    assert_eq!(s.rate(Total::Accepted).map(|r| r.per_s), Some(5.0));
    assert_eq!(s.rate(Total::Delivered).map(|r| r.per_s), Some(0.0));
}

#[test]
fn trends_compare_now_with_ten_minutes_ago_from_an_hour_of_bounded_history() {
    let mut s = Series::default();
    // 90 minutes, one reading every 5 s; the backlog grows 1 per reading
    // and the oldest row ages with the clock.
    for i in 0..1080u64 {
        s.push(Sample {
            at: T0 + i * 5_000,
            totals: Totals::default(),
            backlog: i as i64,
            oldest_age_ms: Some(i * 5_000),
        });
    }
    let t = s.backlog_trend().expect("trend");
    assert_eq!(t.dir, Dir::Up);
    assert_eq!(t.now, 1079);
    // The oldest reading within ten minutes (history is one per 10 s).
    assert!((590_000..=600_000).contains(&t.over_ms), "{}", t.over_ms);
    assert_eq!(
        (t.now - t.then) as u64,
        t.over_ms / 5_000,
        "one row per 5 s"
    );
    assert_eq!(s.oldest_trend().map(|t| t.dir), Some(Dir::Up));
    let bars = s.backlog_bars();
    assert!(bars.len() <= HISTORY_MAX + 1, "{} bars", bars.len());
    assert!(s.history_span_ms() <= 3_600_000 + 10_000);
    // A level that holds is flat; one that shrinks is down.
    let mut flat = Series::default();
    let mut down = Series::default();
    for i in 0..10u64 {
        flat.push(sample(T0 + i * 10_000, 0, 0, 1_000 + (i as i64 % 2)));
        down.push(sample(T0 + i * 10_000, 0, 0, 1_000 - 50 * i as i64));
    }
    assert_eq!(flat.backlog_trend().map(|t| t.dir), Some(Dir::Flat));
    assert_eq!(down.backlog_trend().map(|t| t.dir), Some(Dir::Down));
}

#[test]
fn the_book_keeps_a_bounded_number_of_tenants_evicting_the_least_recently_shown() {
    let mut b = RateBook::default();
    for ord in 1..=(MAX_TENANT_SERIES as u32) {
        b.sample_tenant(ord, sample(T0, 0, 0, 0));
    }
    // Tenant 1 is shown again; then one more tenant arrives.
    b.sample_tenant(1, sample(T0 + 2_000, 1, 0, 0));
    b.sample_tenant(10_000, sample(T0 + 2_000, 0, 0, 0));
    assert_eq!(b.tenant_series(), MAX_TENANT_SERIES);
    assert!(b.tenant(1).is_some(), "recently shown: kept");
    assert!(b.tenant(2).is_none(), "least recently shown: evicted");
    assert!(b.tenant(10_000).is_some());
}

fn follow_app() -> App {
    let header = Header {
        path: PathBuf::from("/s"),
        mode: OpenMode::Follow { pid: 7 },
        format: Some(3),
        opened_at: T0,
        fresh_at: T0,
        daemon: None,
    };
    App::new(header, MigrationState::default(), 2000, T0, 80, 24)
}

fn overview(accepted: u64, delivered: u64) -> Overview {
    Overview {
        node: Counters::default(),
        totals: totals(accepted, delivered),
        tenants: 1,
        active: 0,
        active_capped: false,
        oldest: None,
        oldest_name: None,
        format: Some(3),
        quarantined: 0,
        store_fault: None,
        pauses: 0,
    }
}

/// One refresh as the feed answers it: the catch-up, then the overview.
fn refresh(a: &mut App, now: u64, daemon: DaemonStatus, o: Overview) {
    a.update(Msg::Tick(now));
    a.update(Msg::Reply(Request::Refresh, Ok(Reply::Refreshed(daemon))));
    a.update(Msg::Reply(Request::Overview, Ok(Reply::Overview(o))));
}

#[test]
fn beside_a_daemon_a_change_in_load_shows_within_two_refreshes() {
    let mut a = follow_app();
    let run = DaemonStatus::Running(7);
    let mut acc = 0;
    let mut now = T0;
    for _ in 0..40 {
        refresh(&mut a, now, run, overview(acc, acc));
        now += 2_000;
        acc += 10;
    }
    assert!(a.rates_live());
    let steady = a.rates.node().rate(Total::Accepted).expect("rate");
    assert_eq!((steady.per_s, steady.dir), (5.0, Dir::Flat));
    // The load quadruples.
    refresh(&mut a, now, run, overview(acc + 30, acc));
    let r1 = a.rates.node().rate(Total::Accepted).expect("rate");
    assert_eq!(r1.dir, Dir::Up, "the first refresh after the change");
    assert!(r1.per_s > steady.per_s);
    // A re-read without a catch-up (a screen change) adds no reading.
    a.update(Msg::Reply(
        Request::Overview,
        Ok(Reply::Overview(overview(acc + 30, acc))),
    ));
    assert_eq!(a.rates.node().rate(Total::Accepted), Some(r1));
}

#[test]
fn without_a_daemon_there_are_no_rates() {
    let mut a = follow_app();
    refresh(&mut a, T0, DaemonStatus::NotRunning, overview(5, 5));
    assert!(
        !a.rates_live(),
        "the daemon stopped: the totals cannot move"
    );
    for mode in [OpenMode::ReadOnly, OpenMode::Write] {
        let mut a = follow_app();
        a.header.mode = mode;
        a.header.daemon = Some(DaemonStatus::Running(7));
        assert!(!a.rates_live());
    }
}

/// A console opened beside a running daemon starts with the daemon's last
/// hour: seeded samples before its own readings give a ten-minute trend at
/// once, and readings it took before the seed arrived are kept after it.
#[test]
fn the_daemons_last_hour_seeds_the_node_trends() {
    let mut book = RateBook::default();
    let now = T0 + 3_600_000;
    // One reading of its own, taken before the history answered.
    assert!(book.sample_node(sample(now + 1_000, 36_100, 36_000, 50)));
    assert!(
        book.node().backlog_trend().is_none(),
        "one reading: no trend yet"
    );
    // The daemon's hour: a sample every 10 s, backlog falling from 410 to 50.
    let seed: Vec<Sample> = (0..360u64)
        .map(|i| sample(T0 + i * 10_000, i * 100, i * 100, 410 - i as i64))
        .collect();
    book.seed_node(&seed);
    let node = book.node();
    let t = node.backlog_trend().expect("a trend at once");
    assert_eq!(t.dir, Dir::Down, "{t:?}");
    assert_eq!(t.now, 50, "the console's own reading is the newest");
    assert!(
        node.history_span_ms() >= 3_500_000,
        "{}",
        node.history_span_ms()
    );
    assert!(node.rate(Total::Delivered).is_some());
    // A seed newer than nothing it has changes nothing of its order.
    assert_eq!(node.last().map(|s| s.at), Some(now + 1_000));
}

/// In FOLLOW mode the first refresh asks the daemon for its last hour,
/// once; a store opened read-only never asks (it has no daemon to ask).
#[test]
fn the_history_is_asked_once_and_only_beside_a_daemon() {
    use ankusa_ui::app::Effect;
    let asks = |e: &[Effect]| {
        e.iter()
            .filter(|x| matches!(x, Effect::Fetch(Request::History)))
            .count()
    };
    let mut a = follow_app();
    assert_eq!(asks(&a.update(Msg::Tick(T0))), 1);
    a.update(Msg::Reply(
        Request::Refresh,
        Ok(Reply::Refreshed(DaemonStatus::Running(7))),
    ));
    assert_eq!(asks(&a.update(Msg::Tick(T0 + 5_000))), 0, "asked once");
    let mut ro = follow_app();
    ro.header.mode = OpenMode::ReadOnly;
    assert_eq!(asks(&ro.update(Msg::Tick(T0))), 0);
}
