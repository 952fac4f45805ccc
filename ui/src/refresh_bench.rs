//! `ankusa bench console`: time to first frame and each screen's refresh
//! store work on a large fixture (10^6 rows, 10^5 tenants) against a small
//! one (10^3 rows, 10 tenants), in one run. Self-asserting: the first frame
//! must come in under 0.5 s on the large store, and every screen's refresh
//! must cost at most 2x on the large store what it costs on the small one.
//!
//! "Refresh store work" is the time [`Feed::execute`] takes for the
//! requests a screen sends on a refresh (catch-up and lock check included):
//! the 10th percentile of many runs, lowest of three rounds; the ratio
//! counts the small store's cost as at least [`FLOOR`]. The on-demand ranking behind a counter sort is
//! reported but not asserted: it runs when the operator picks a sort, never
//! on a refresh.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ankusa_store::counters::Field;
use ankusa_store::fixture::{self, FixtureSpec};
use ankusa_store::{queries, tenants, Store};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde::Serialize;

use crate::app::{App, Header, Msg};
use crate::data::{DataError, Feed, OpenRequest, Reply, Request, TenantsQuery, RANK_LIMIT};
use crate::error::ConsoleError;
use crate::heatmap::HeatSpec;
use crate::screens::migration::MigrationState;
use crate::theme::Theme;
use crate::view;

/// First frame budget.
pub const FIRST_FRAME_MAX: Duration = Duration::from_millis(500);
/// Large/small refresh cost ratio allowed.
pub const RATIO_MAX: f64 = 2.0;
/// The small store's cost is counted as at least this much when the ratio is
/// taken (the store gauge bench's floor): below it a refresh is a handful of
/// seeks and point reads whose cost in a debug build is set by RocksDB's
/// depth (levels and files per seek, a log of the store's size) and by
/// whether a page is full, not by the backlog. See docs/benchmarks.md.
pub const FLOOR: Duration = Duration::from_millis(1);

const RUNS: usize = 101;
/// Heatmap rows the small store fills (its active tenants).
const HEAT_EQUAL_ROWS: usize = 9;
const ROUNDS: usize = 3;

#[derive(Debug, Clone, Serialize)]
pub struct StoreShape {
    pub name: &'static str,
    pub tenants: u32,
    pub rows: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub screen: String,
    pub small_us: f64,
    pub large_us: f64,
    pub ratio: f64,
    pub asserted: bool,
    pub pass: bool,
    /// What the screen shows on the small and the large store: rows of a
    /// list, non-empty cells of a heatmap (+ DLQ rows on the tenant detail).
    pub shown: [u64; 2],
}

/// Opens the console's feed on a fixture, as `ankusa console` does.
fn open(path: &Path, now: u64) -> Result<Feed, ConsoleError> {
    let req = OpenRequest {
        path: path.to_path_buf(),
        ..OpenRequest::default()
    };
    Feed::open(&req, now).map_err(|source| ConsoleError::Open {
        path: path.to_path_buf(),
        source,
    })
}

/// Names the request a failure came from.
fn failed(r: &Request) -> impl FnOnce(DataError) -> ConsoleError + '_ {
    move |source| ConsoleError::Request {
        request: format!("{r:?}"),
        source,
    }
}

/// Counts what a screen's replies show (see [`Cell::shown`]).
fn shown(src: &mut Feed, reqs: &[Request], now: u64) -> Result<u64, ConsoleError> {
    let nonzero = |v: &[u32]| v.iter().filter(|&&c| c > 0).count() as u64;
    let mut n = 0u64;
    for r in reqs {
        n += match src.execute(r, now, &mut |_| {}).map_err(failed(r))? {
            Reply::Tenants(p) => p.rows.len() as u64,
            Reply::CountersOf(c) => c.len() as u64,
            Reply::Tenant(t) => nonzero(&t.heat) + t.dlq.entries.len() as u64,
            Reply::Heatmap(h) => h.rows.iter().map(|r| nonzero(&r.cells)).sum(),
            Reply::Dlq(d) => d.page.entries.len() as u64,
            Reply::Overview(_) | Reply::DeadDetail(_) => 1,
            Reply::Sinks(d) => d.sinks.len() as u64,
            Reply::Sink(d) => 1 + d.dlq.len() as u64,
            _ => 0,
        };
    }
    Ok(n)
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub stores: Vec<StoreShape>,
    pub first_frame_small_ms: f64,
    pub first_frame_large_ms: f64,
    pub first_frame_max_ms: f64,
    pub ratio_max: f64,
    pub floor_us: f64,
    pub cells: Vec<Cell>,
    pub pass: bool,
}

const SMALL: StoreShape = StoreShape {
    name: "small",
    tenants: 10,
    rows: 1_000,
};
const LARGE: StoreShape = StoreShape {
    name: "large",
    tenants: 100_000,
    rows: 1_000_000,
};

/// Builds (or reuses) a fixture; returns the fixture's `now`.
fn ensure_fixture(dir: &Path, shape: &StoreShape) -> Result<u64, ConsoleError> {
    let marker = dir.join("ankusa-bench-console.json");
    if let Ok(text) = std::fs::read_to_string(&marker) {
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|_| ConsoleError::Marker(marker.clone()))?;
        if v["tenants"] == shape.tenants && v["rows"] == shape.rows {
            // A fixture built before the sinks screen has no catalog yet.
            ensure_catalog(&Store::open(dir)?)?;
            return v["now"]
                .as_u64()
                .ok_or_else(|| ConsoleError::Marker(marker.clone()));
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|source| ConsoleError::File {
            what: "cannot remove the stale fixture",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let now = ankusa_store::system_now_ms();
    eprintln!(
        "building the {} fixture ({} rows, {} tenants)…",
        shape.name, shape.rows, shape.tenants
    );
    let store = Store::create_or_open(dir)?;
    let spec = FixtureSpec::new(shape.tenants, shape.rows, 1, now);
    fixture::write(&store, &spec, |_, _| {})?;
    store.flush()?;
    ensure_catalog(&store)?;
    drop(store);
    std::fs::write(
        &marker,
        serde_json::json!({"tenants": shape.tenants, "rows": shape.rows, "now": now}).to_string(),
    )
    .map_err(|source| ConsoleError::File {
        what: "cannot write the fixture marker",
        path: marker.clone(),
        source,
    })?;
    Ok(now)
}

/// The sink catalog a daemon would record for the fixture's sources (the
/// sinks screen lists it). Written once, with the fixture.
fn ensure_catalog(store: &Store) -> Result<(), ConsoleError> {
    if !ankusa_store::sinks::catalog(store)?.is_empty() {
        return Ok(());
    }
    let entries: Vec<_> = ["shop", "billing"]
        .into_iter()
        .flat_map(|source| {
            (0..2u16).map(move |index| {
                ankusa_store::sinks::SinkEntry::live(
                    source,
                    index,
                    format!("{source}-{index}"),
                    format!("http://{source}-{index}.internal:8080"),
                )
            })
        })
        .collect();
    ankusa_store::sinks::replace(store, &entries)?;
    Ok(())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Opens the console's feed and draws its first frame, as `run` does.
fn first_frame(path: &Path, now: u64) -> Result<Duration, ConsoleError> {
    let t0 = Instant::now();
    let mut src = open(path, now)?;
    let header = Header {
        path: src.path.clone(),
        mode: src.mode.clone(),
        format: src.probe.format,
        opened_at: now,
        fresh_at: now,
        daemon: None,
    };
    let mut app = App::new(header, MigrationState::default(), 2000, now, 80, 24);
    let effects = app.update(Msg::Tick(now));
    for e in effects {
        if let crate::app::Effect::Fetch(r) = e {
            let reply = src.execute(&r, now, &mut |_| {}).map_err(|e| e.to_string());
            app.update(Msg::Reply(r, reply));
        }
    }
    let mut term = Terminal::new(TestBackend::new(80, 24))
        .map_err(ConsoleError::terminal("cannot start the test terminal"))?;
    term.draw(|f| view::draw(f, &app, &Theme { color: false }))
        .map_err(ConsoleError::terminal("cannot draw the first frame"))?;
    if app.overview.is_none() {
        return Err(ConsoleError::NoFirstFrame);
    }
    Ok(t0.elapsed())
}

struct Targets {
    big_tenant: u32,
    dead_tenant: u32,
    dead_row: Option<ankusa_store::rows::DeadRow>,
    ranked: Vec<u32>,
}

fn targets(src: &Feed) -> Result<Targets, ConsoleError> {
    let s = src
        .store()
        .ok_or_else(|| ConsoleError::NotOpen(src.path.clone()))?;
    let top = tenants::top_by(s, Field::Pending, 20)?;
    let big_tenant = top.first().map_or(1, |t| t.ord);
    let dead_tenant = tenants::ord_of(s, fixture::DEAD_ONLY_TENANT)?.unwrap_or(1);
    let dead_row = queries::dlq_page(s, None, 1)?.entries.into_iter().next();
    Ok(Targets {
        big_tenant,
        dead_tenant,
        dead_row,
        ranked: top.iter().map(|t| t.ord).collect(),
    })
}

/// The refresh requests of each screen (at 80×24 unless noted).
fn screens(t: &Targets) -> Vec<(String, Vec<Request>)> {
    let heat80 = HeatSpec::new(1000, 80 - 21);
    let heat160 = HeatSpec::new(60_000, 160 - 21);
    let mut v = vec![
        ("overview".to_owned(), vec![Request::Overview]),
        (
            "tenants (ordinal page)".to_owned(),
            vec![Request::Tenants(TenantsQuery {
                after: None,
                filter: String::new(),
                limit: 18,
            })],
        ),
        (
            "tenants (filter, no match)".to_owned(),
            vec![Request::Tenants(TenantsQuery {
                after: None,
                filter: "zz-no-such".into(),
                limit: 18,
            })],
        ),
        (
            "tenants (sorted page refresh)".to_owned(),
            vec![Request::CountersOf(
                t.ranked.iter().copied().take(18).collect(),
            )],
        ),
        (
            "tenant detail".to_owned(),
            vec![Request::Tenant {
                ord: t.big_tenant,
                dlq_limit: 6,
                heat: heat80,
            }],
        ),
        (
            "heatmap 80x24 (1s)".to_owned(),
            vec![Request::Heatmap {
                offset: 0,
                rows: 16,
                heat: heat80,
            }],
        ),
        (
            // The small store has 9 active tenants, so its 160x48 heatmap
            // shows 9 rows; the large one would show 40. Asserted at the
            // rows both stores show: the cost per row is the claim (a
            // screen of 40 rows costs more than one of 9, by design); the
            // full 40-row screen is reported, not asserted, below.
            format!("heatmap 160x48 (1m), {HEAT_EQUAL_ROWS} rows"),
            vec![Request::Heatmap {
                offset: 0,
                rows: HEAT_EQUAL_ROWS,
                heat: heat160,
            }],
        ),
        (
            "dlq (all tenants)".to_owned(),
            vec![Request::Dlq {
                ord: None,
                cursor: None,
                limit: 18,
                order: Default::default(),
                event_type: None,
            }],
        ),
        (
            "dlq (one tenant)".to_owned(),
            vec![Request::Dlq {
                ord: Some(t.dead_tenant),
                cursor: None,
                limit: 18,
                order: Default::default(),
                event_type: None,
            }],
        ),
    ];
    if let Some(r) = &t.dead_row {
        v.push((
            "dead delivery detail".to_owned(),
            vec![Request::DeadDetail(r.clone())],
        ));
    }
    // No daemon answers here: the catalog and the pauses from the store, as
    // on a stopped store; the detail walks the DLQ for the sink's rows.
    v.push(("sinks".to_owned(), vec![Request::Sinks]));
    v.push((
        "sink detail".to_owned(),
        vec![Request::Sink {
            sink: crate::data::SinkRef {
                source: "shop".into(),
                sink: 0,
            },
            dlq_limit: crate::screens::sinks::dlq_rows(24),
        }],
    ));
    for (_, reqs) in &mut v {
        reqs.insert(0, Request::Refresh);
    }
    v
}

/// One cell: the 10th percentile of [`RUNS`] repetitions, the lowest of
/// [`ROUNDS`] rounds (the store gauge bench's rule). A debug build on two
/// shared cores has long-tailed scheduling noise; the low percentile of the
/// best round is the cost of the work itself, which is what the rule is
/// about.
fn time_requests(src: &mut Feed, reqs: &[Request], now: u64) -> Result<Duration, ConsoleError> {
    let mut best = Duration::MAX;
    for _ in 0..ROUNDS {
        let mut samples = Vec::with_capacity(RUNS);
        for i in 0..RUNS + 3 {
            let t0 = Instant::now();
            for r in reqs {
                src.execute(r, now, &mut |_| {}).map_err(failed(r))?;
            }
            // The first runs warm the block cache and are not counted.
            if i >= 3 {
                samples.push(t0.elapsed());
            }
        }
        samples.sort();
        best = best.min(samples[samples.len() / 10]);
    }
    Ok(best)
}

/// Builds (or reuses, under `dir`) the two fixtures and measures them. The
/// caller prints the report ([`render`], or JSON) and fails the run when
/// `pass` is false.
pub fn run(dir: Option<PathBuf>) -> Result<Report, ConsoleError> {
    let (base, temp) = match dir {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("ankusa-bench-console-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&base).map_err(|source| ConsoleError::File {
        what: "cannot create the bench directory",
        path: base.clone(),
        source,
    })?;
    let result = measure(&base);
    if temp {
        let _ = std::fs::remove_dir_all(&base);
    }
    result
}

fn measure(base: &Path) -> Result<Report, ConsoleError> {
    let small_dir = base.join("small");
    let large_dir = base.join("large");
    let small_now = ensure_fixture(&small_dir, &SMALL)?;
    let large_now = ensure_fixture(&large_dir, &LARGE)?;

    let ff_small = median(
        (0..5)
            .map(|_| first_frame(&small_dir, small_now))
            .collect::<Result<Vec<_>, _>>()?,
    );
    let ff_large = median(
        (0..5)
            .map(|_| first_frame(&large_dir, large_now))
            .collect::<Result<Vec<_>, _>>()?,
    );

    let mut small = open(&small_dir, small_now)?;
    let mut large = open(&large_dir, large_now)?;
    let ts = targets(&small)?;
    let tl = targets(&large)?;
    let mut cells = Vec::new();
    for ((name, rs), (_, rl)) in screens(&ts).into_iter().zip(screens(&tl)) {
        let s = time_requests(&mut small, &rs, small_now)?;
        let l = time_requests(&mut large, &rl, large_now)?;
        let ratio = l.as_secs_f64() / s.max(FLOOR).as_secs_f64();
        let pass = ratio <= RATIO_MAX;
        cells.push(Cell {
            screen: name,
            small_us: s.as_secs_f64() * 1e6,
            large_us: l.as_secs_f64() * 1e6,
            ratio,
            asserted: true,
            pass,
            shown: [
                shown(&mut small, &rs, small_now)?,
                shown(&mut large, &rl, large_now)?,
            ],
        });
    }
    // Reported, not asserted: the full 160x48 heatmap (40 rows on the large
    // store, 9 on the small one: not the same screen).
    let full = [
        Request::Refresh,
        Request::Heatmap {
            offset: 0,
            rows: 40,
            heat: HeatSpec::new(60_000, 160 - 21),
        },
    ];
    let s = time_requests(&mut small, &full, small_now)?;
    let l = time_requests(&mut large, &full, large_now)?;
    cells.push(Cell {
        screen: "heatmap 160x48 (1m), full screen (9 vs 40 rows)".into(),
        small_us: s.as_secs_f64() * 1e6,
        large_us: l.as_secs_f64() * 1e6,
        ratio: l.as_secs_f64() / s.max(FLOOR).as_secs_f64(),
        asserted: false,
        pass: true,
        shown: [
            shown(&mut small, &full, small_now)?,
            shown(&mut large, &full, large_now)?,
        ],
    });
    // Reported, not asserted: the on-demand ranking of a counter sort.
    let rank = [Request::Rank {
        field: Field::Dead,
        limit: RANK_LIMIT,
    }];
    let s = time_requests_n(&mut small, &rank, small_now, 3)?;
    let l = time_requests_n(&mut large, &rank, large_now, 3)?;
    cells.push(Cell {
        screen: "rank by a counter (on demand, not a refresh)".into(),
        small_us: s.as_secs_f64() * 1e6,
        large_us: l.as_secs_f64() * 1e6,
        ratio: l.as_secs_f64() / s.max(FLOOR).as_secs_f64(),
        asserted: false,
        pass: true,
        shown: [0, 0],
    });
    let pass = ff_large <= FIRST_FRAME_MAX && cells.iter().all(|c| c.pass);
    Ok(Report {
        stores: vec![SMALL, LARGE],
        first_frame_small_ms: ff_small.as_secs_f64() * 1e3,
        first_frame_large_ms: ff_large.as_secs_f64() * 1e3,
        first_frame_max_ms: FIRST_FRAME_MAX.as_secs_f64() * 1e3,
        ratio_max: RATIO_MAX,
        floor_us: FLOOR.as_secs_f64() * 1e6,
        cells,
        pass,
    })
}

fn time_requests_n(
    src: &mut Feed,
    reqs: &[Request],
    now: u64,
    n: usize,
) -> Result<Duration, ConsoleError> {
    let mut samples = Vec::new();
    for _ in 0..n {
        let t0 = Instant::now();
        for r in reqs {
            src.execute(r, now, &mut |_| {}).map_err(failed(r))?;
        }
        samples.push(t0.elapsed());
    }
    Ok(median(samples))
}

pub fn render(r: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "console bench: small = {} rows / {} tenants, large = {} rows / {} tenants\n",
        SMALL.rows, SMALL.tenants, LARGE.rows, LARGE.tenants
    ));
    out.push_str(&format!(
        "first frame (open + overview + draw 80x24): small {:.1} ms, large {:.1} ms (limit {:.0} ms)\n\n",
        r.first_frame_small_ms, r.first_frame_large_ms, r.first_frame_max_ms
    ));
    out.push_str(&format!(
        "{:<46} {:>10} {:>10} {:>7} {:>13}  {}\n",
        "refresh store work (p10)", "small µs", "large µs", "ratio", "shown s/l", "pass"
    ));
    for c in &r.cells {
        out.push_str(&format!(
            "{:<46} {:>10.0} {:>10.0} {:>6.2}x {:>13}  {}\n",
            c.screen,
            c.small_us,
            c.large_us,
            c.ratio,
            format!("{}/{}", c.shown[0], c.shown[1]),
            if !c.asserted {
                "(not asserted)"
            } else if c.pass {
                "ok"
            } else {
                "FAIL"
            }
        ));
    }
    out.push_str(&format!(
        "\nrule: first frame < {:.0} ms on the large store; each refresh large / max(small, {:.0} µs) <= {:.1}x\n(cell = 10th percentile of {RUNS} runs, lowest of {ROUNDS} rounds)\nresult: {}\n",
        r.first_frame_max_ms,
        r.floor_us,
        r.ratio_max,
        if r.pass { "PASS" } else { "FAIL" }
    ));
    out
}
