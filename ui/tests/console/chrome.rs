//! The frame around the screens: every status and refusal line fits the
//! footer at 80 columns, clicks and the wheel map to the same state changes
//! as keys, and `NO_COLOR` leaves no colour in any cell.

use crate::common::*;
use ankusa_ui::app::{App, Msg, CANNOT_ACT, LIST_TOP, STATUS_MAX, TAB_ROW};
use ankusa_ui::data::Feed;
use ankusa_ui::keymap::Tab;
use ankusa_ui::popups::Overlay;
use ankusa_ui::theme::{Theme, PAUSED};
use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::style::Color;

/// The footer row of a frame rendered at the app's size.
fn footer(app: &App) -> String {
    render(app)
        .lines()
        .last()
        .expect("a frame has rows")
        .to_owned()
}

/// Runs `keys` on a fresh 80×24 console over a fixture store (`write`:
/// WRITE mode, else READ-ONLY), after `setup`; returns the app.
fn after(write: bool, setup: impl Fn(&mut App, &mut Feed), keys: &str) -> App {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), write);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    setup(&mut app, &mut src);
    type_keys(&mut app, &mut src, keys);
    app
}

/// The status is set, at most [`STATUS_MAX`] wide, and the footer at 80
/// columns shows all of it.
fn fits(app: &App, case: &str) -> String {
    let s = app.status.clone();
    assert!(!s.is_empty(), "{case}: no status");
    assert!(
        s.chars().count() <= STATUS_MAX,
        "{case}: {} columns: {s}",
        s.chars().count()
    );
    assert_eq!(footer(app), format!(" {s}"), "{case}: cut at 80 columns");
    s
}

#[test]
fn every_refusal_fits_the_footer_at_80_columns() {
    let none = |_: &mut App, _: &mut Feed| {};
    let long = "x".repeat(128);
    // Read-only: every guarded key and command says why not.
    for keys in ["4R", "4A", "2P", ":replay-since 2h\n"] {
        let app = after(false, none, keys);
        assert_eq!(fits(&app, keys), CANNOT_ACT, "{keys}");
    }
    let cases: Vec<(bool, String)> = vec![
        (false, ":repair\n".into()),
        (false, "b".into()),
        (false, "5b".into()),
        (false, format!(":{long}\n")),
        (false, format!(":sort {long}\n")),
        (false, format!(":tenant {long}\n")),
        (false, format!(":replay-since {long}\n")),
        // WRITE: an action where it does not apply, a wrong confirmation, a
        // cancel.
        (true, "P".into()),
        (true, "4Rnope\n".into()),
        (true, "4R\x1b".into()),
    ];
    for (write, keys) in &cases {
        fits(&after(*write, none, keys), keys);
    }
    // Another process holds a store that needs migrating (the longest pid).
    let app = after(
        false,
        |a, s| {
            type_keys(a, s, "5");
            a.migration.holder = Some(4_194_304);
            a.migration.status = None;
        },
        "b",
    );
    assert!(fits(&app, "holder").contains("4194304"));
}

#[test]
fn a_long_tenant_name_to_type_is_pointed_at_not_repeated() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let name = "t".repeat(120);
    {
        let s = ankusa_store::Store::create_or_open(dir.path()).expect("store");
        ingest(&s, &name, 2, |_| NOW - 1_000);
    }
    let mut src = open(dir.path(), true);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, &format!(":tenant {name}\nPnope\n"));
    let s = app.status.clone();
    assert!(s.contains("shown above"), "{s}");
    // Esc: the guard closes and the status fits.
    type_keys(&mut app, &mut src, "\x1b");
    fits(&app, "cancel");
}

/// The frame's cells rendered with `theme`.
fn cells(app: &App, theme: &Theme) -> ratatui::buffer::Buffer {
    let mut term =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(app.width, app.height))
            .expect("terminal");
    term.draw(|f| ankusa_ui::view::draw(f, app, theme))
        .expect("draw");
    term.backend().buffer().clone()
}

fn coloured(buf: &ratatui::buffer::Buffer) -> Vec<(u16, u16, Color, Color)> {
    let mut out = Vec::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            let c = &buf[(x, y)];
            if c.fg != Color::Reset || c.bg != Color::Reset {
                out.push((x, y, c.fg, c.bg));
            }
        }
    }
    out
}

#[test]
fn no_color_leaves_no_colour_on_any_screen_or_popup() {
    let screens: [(bool, &str); 11] = [
        (false, ""),
        (false, "2"),
        (false, "2ssss"),
        (false, ":tenant dead-only\n"),
        (false, "3"),
        (false, "4"),
        (false, "4\n"),
        (false, "5"),
        (false, "6"),
        (false, "?"),
        (true, "4R"),
    ];
    let mut any_colour = 0;
    for (write, keys) in screens {
        for (w, h) in [(80, 24), (160, 48)] {
            let dir = tempfile::tempdir().expect("tempdir");
            fixture_store(dir.path());
            let mut src = open(dir.path(), write);
            let mut app = app_for(&src, w, h);
            start(&mut app, &mut src);
            type_keys(&mut app, &mut src, keys);
            let plain = coloured(&cells(&app, &Theme { color: false }));
            assert!(plain.is_empty(), "{keys:?} at {w}x{h}: {plain:?}");
            any_colour += coloured(&cells(&app, &Theme { color: true })).len();
        }
    }
    // The same frames with colour on do have colour: the check above can
    // see it.
    assert!(any_colour > 0);
}

#[test]
fn dead_counts_are_coloured_and_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    // Tenants by dead count, largest first: the first row has dead rows.
    type_keys(&mut app, &mut src, "2ssss");
    let theme = Theme { color: true };
    let buf = cells(&app, &theme);
    let text = render(&app);
    let head = text
        .lines()
        .position(|l| l.contains("dead↓"))
        .expect("a dead column heading");
    let col = text
        .lines()
        .nth(head)
        .expect("heading")
        .find("dead↓")
        .expect("col");
    // The heading's column in cells (the line is ASCII up to it).
    let x = u16::try_from(col).expect("fits");
    let row = u16::try_from(head + 2).expect("fits");
    assert_eq!(buf[(x, row)].fg, Color::LightRed, "{text}");
    assert_eq!(buf[(x, row)].fg, theme.dead().fg.expect("a colour"));
    assert_ne!(
        theme.dead().fg,
        theme.paused().fg,
        "dead and paused look apart"
    );
    assert_eq!(Theme { color: false }.paused_badge().content, PAUSED);
}

fn mouse(kind: MouseEventKind, x: u16, y: u16) -> Msg {
    Msg::Mouse(MouseEvent {
        kind,
        column: x,
        row: y,
        modifiers: KeyModifiers::NONE,
    })
}

fn click(app: &mut App, src: &mut Feed, x: u16, y: u16) {
    let e = app.update(mouse(MouseEventKind::Down(MouseButton::Left), x, y));
    pump(app, src, e);
}

fn wheel(app: &mut App, src: &mut Feed, down: bool) {
    let kind = if down {
        MouseEventKind::ScrollDown
    } else {
        MouseEventKind::ScrollUp
    };
    let e = app.update(mouse(kind, 10, 10));
    pump(app, src, e);
}

#[test]
fn a_click_on_a_tab_opens_it_where_the_tab_bar_draws_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    for (t, label, at) in Tab::bar() {
        // The label is drawn where the geometry says (inside its brackets
        // or padding), on the tab bar's row.
        let bar = render(&app)
            .lines()
            .nth(usize::from(TAB_ROW))
            .expect("tab bar")
            .to_owned();
        let drawn: String = bar
            .chars()
            .skip(usize::from(at) + 1)
            .take(label.len())
            .collect();
        assert_eq!(drawn, label, "{bar}");
        // First column, last column of the label.
        for x in [at, at + u16::try_from(label.len()).expect("short") + 1] {
            type_keys(&mut app, &mut src, "1");
            click(&mut app, &mut src, x, TAB_ROW);
            assert_eq!(app.screen().tab(), t, "click at {x} on {bar}");
        }
    }
    // Between two tabs and past the last: nothing.
    type_keys(&mut app, &mut src, "2");
    let (_, label, at) = &Tab::bar()[0];
    let gap = at + u16::try_from(label.len()).expect("short") + 2;
    click(&mut app, &mut src, gap, TAB_ROW);
    click(&mut app, &mut src, 79, TAB_ROW);
    assert_eq!(app.screen().tab(), Tab::Tenants);
}

#[test]
fn a_click_on_a_row_selects_it_and_the_wheel_moves_the_selection() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    for keys in ["2", "3", "4"] {
        type_keys(&mut app, &mut src, keys);
        let shown = match keys {
            "2" => app.tenant_rows().len(),
            "3" => app.heat.rows_shown(),
            _ => app.dlq.rows_shown(),
        };
        assert!(shown > 5, "{keys}: {shown} rows");
        let sel = |a: &App| match keys {
            "2" => a.tenants.sel,
            "3" => a.heat.sel,
            _ => a.dlq.sel,
        };
        // The first list row is drawn on the frame's row LIST_TOP.
        let first = match keys {
            "2" => app.tenant_rows()[0].id.clone(),
            "3" => app.heat.data.as_ref().expect("heatmap").rows[0]
                .name
                .clone(),
            _ => app.dlq.data.as_ref().expect("dlq").page.entries[0]
                .hook_id
                .clone(),
        };
        let text = render(&app);
        let drawn = text.lines().nth(usize::from(LIST_TOP)).expect("row");
        assert!(drawn.contains(&first), "{keys}: {first} not on\n{text}");
        // The row clicked is the row drawn selected (reverse video is not
        // in the text, so compare with what `j` selects).
        click(&mut app, &mut src, 20, LIST_TOP + 3);
        assert_eq!(sel(&app), 3, "{keys}");
        let clicked = render(&app);
        type_keys(&mut app, &mut src, "gjjj");
        assert_eq!(sel(&app), 3);
        assert_eq!(render(&app), clicked, "{keys}");
        // Past the last row, on the chrome above: the selection stays.
        click(
            &mut app,
            &mut src,
            20,
            LIST_TOP + u16::try_from(shown).expect("rows"),
        );
        click(&mut app, &mut src, 20, LIST_TOP - 1);
        assert_eq!(sel(&app), 3, "{keys}");
        wheel(&mut app, &mut src, true);
        wheel(&mut app, &mut src, true);
        assert_eq!(sel(&app), 5, "{keys}");
        for _ in 0..10 {
            wheel(&mut app, &mut src, false);
        }
        assert_eq!(sel(&app), 0, "{keys}");
        for _ in 0..(shown + 5) {
            wheel(&mut app, &mut src, true);
        }
        assert_eq!(
            sel(&app),
            shown - 1,
            "{keys}: the wheel stops at the last row"
        );
    }
}

#[test]
fn under_a_popup_only_the_help_scrolls() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    let mut app = app_for(&src, 80, 24);
    start(&mut app, &mut src);
    type_keys(&mut app, &mut src, "2?");
    wheel(&mut app, &mut src, true);
    wheel(&mut app, &mut src, true);
    assert_eq!(app.overlays, vec![Overlay::Help(2)]);
    assert_eq!(app.tenants.sel, 0, "the list under the help did not move");
    click(&mut app, &mut src, 38, TAB_ROW);
    click(&mut app, &mut src, 20, LIST_TOP + 2);
    assert_eq!(app.screen().tab(), Tab::Tenants);
    assert_eq!(app.tenants.sel, 0);
    // The filter line: a click does not reach the list either.
    type_keys(&mut app, &mut src, "\x1b/");
    click(&mut app, &mut src, 20, LIST_TOP + 2);
    assert_eq!(app.tenants.sel, 0);
}

#[test]
fn every_notice_fits_the_footer_at_80_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    fixture_store(dir.path());
    let mut src = open(dir.path(), false);
    for n in [
        ankusa_ui::data::feed::write_ignored(4_194_304),
        ankusa_ui::data::migration::over_limit(u32::MAX),
    ] {
        let mut app = app_for(&src, 80, 24);
        start(&mut app, &mut src);
        app.notices.push(n.clone());
        assert!(n.chars().count() <= STATUS_MAX, "{n}");
        assert_eq!(footer(&app), format!(" {n}"));
    }
}
