//! The keymap as data: input handling looks keys up here and the help
//! overlay is generated from the same table, so they cannot disagree.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key does (named apart from `ankusa_ops::operator::Action`, the
/// outcome of an operator operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAction {
    Down,
    Up,
    PageDown,
    PageUp,
    Top,
    Bottom,
    Open,
    Back,
    Quit,
    Filter,
    Command,
    Help,
    Goto(Tab),
    NextTab,
    Sort,
    ZoomIn,
    ZoomOut,
    TenantDlq,
    Select,
    DlqOrder,
    Purge,
    Replay,
    ReplayTenant,
    /// Pause the selected tenant or sink (guarded).
    Pause,
    /// Resume it (guarded).
    Resume,
    Refresh,
    /// Copy the selected row's id to the clipboard (OSC 52).
    Copy,
    /// The actions this console took.
    Actions,
    MigBackup,
    MigPlan,
    MigRun,
    MigPause,
    MigCheck,
}

/// The top-level screens reachable by number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Overview,
    Tenants,
    Heatmap,
    Dlq,
    Migration,
    Log,
    Sinks,
}

impl Tab {
    pub const ALL: [Tab; 7] = [
        Tab::Overview,
        Tab::Tenants,
        Tab::Heatmap,
        Tab::Dlq,
        Tab::Migration,
        Tab::Log,
        Tab::Sinks,
    ];

    /// The tab bar's geometry: each tab, its label and the column it
    /// starts at. The bar is ` ` then, per tab, `[N Title]` (current) or
    /// ` N Title ` (both the label's width + 2) and a space; the view draws
    /// it from here and a click is mapped back through [`Tab::at`], so the
    /// two cannot disagree.
    pub fn bar() -> Vec<(Tab, String, u16)> {
        let mut x = 1u16;
        Tab::ALL
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let label = format!("{} {}", i + 1, t.title());
                let at = x;
                let w = u16::try_from(label.chars().count()).unwrap_or(u16::MAX);
                x = x.saturating_add(w.saturating_add(3));
                (*t, label, at)
            })
            .collect()
    }

    /// The tab drawn at column `x` of the tab bar, if any.
    pub fn at(x: u16) -> Option<Tab> {
        Tab::bar().into_iter().find_map(|(t, label, at)| {
            let w = u16::try_from(label.chars().count()).unwrap_or(u16::MAX);
            (x >= at && x < at.saturating_add(w + 2)).then_some(t)
        })
    }

    pub fn title(self) -> &'static str {
        match self {
            Tab::Overview => "Overview",
            Tab::Tenants => "Tenants",
            Tab::Heatmap => "Heatmap",
            Tab::Dlq => "DLQ",
            Tab::Migration => "Migration",
            Tab::Log => "Log",
            Tab::Sinks => "Sinks",
        }
    }
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Everywhere,
    Tenants,
    Tenant,
    Heatmap,
    Dlq,
    Migration,
    /// Only shown and active in WRITE mode.
    Write,
}

impl Scope {
    pub fn title(self) -> &'static str {
        match self {
            Scope::Everywhere => "Everywhere",
            Scope::Tenants => "Tenants",
            Scope::Tenant => "Tenant detail",
            Scope::Heatmap => "Heatmap",
            Scope::Dlq => "DLQ",
            Scope::Migration => "Migration (guided upgrade; a store no other process holds)",
            Scope::Write => "Guarded actions (WRITE, or FOLLOW through the daemon)",
        }
    }
}

/// A key pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Code(KeyCode),
}

impl Key {
    fn matches(self, ev: &KeyEvent) -> bool {
        match self {
            Key::Char(c) => {
                ev.code == KeyCode::Char(c)
                    && !ev
                        .modifiers
                        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
            }
            Key::Code(c) => ev.code == c,
        }
    }
}

pub struct Binding {
    pub keys: &'static [Key],
    pub label: &'static str,
    pub action: KeyAction,
    pub scope: Scope,
    pub help: &'static str,
}

use Key::{Char as C, Code};

pub const KEYMAP: &[Binding] = &[
    Binding { keys: &[C('j'), Code(KeyCode::Down)], label: "j ↓", action: KeyAction::Down, scope: Scope::Everywhere, help: "next row" },
    Binding { keys: &[C('k'), Code(KeyCode::Up)], label: "k ↑", action: KeyAction::Up, scope: Scope::Everywhere, help: "previous row" },
    Binding { keys: &[Code(KeyCode::PageDown), C(' ')], label: "PgDn", action: KeyAction::PageDown, scope: Scope::Everywhere, help: "next page" },
    Binding { keys: &[Code(KeyCode::PageUp)], label: "PgUp", action: KeyAction::PageUp, scope: Scope::Everywhere, help: "previous page" },
    Binding { keys: &[C('g'), Code(KeyCode::Home)], label: "g", action: KeyAction::Top, scope: Scope::Everywhere, help: "first row (first page)" },
    Binding { keys: &[C('G'), Code(KeyCode::End)], label: "G", action: KeyAction::Bottom, scope: Scope::Everywhere, help: "last row of the page" },
    Binding { keys: &[Code(KeyCode::Enter)], label: "Enter", action: KeyAction::Open, scope: Scope::Everywhere, help: "open the selected row" },
    Binding { keys: &[C('q'), Code(KeyCode::Esc)], label: "q Esc", action: KeyAction::Back, scope: Scope::Everywhere, help: "back; quit from a top screen" },
    Binding { keys: &[C('Q')], label: "Q", action: KeyAction::Quit, scope: Scope::Everywhere, help: "quit" },
    Binding { keys: &[C('/')], label: "/", action: KeyAction::Filter, scope: Scope::Everywhere, help: "filter tenants by name" },
    Binding { keys: &[C(':')], label: ":", action: KeyAction::Command, scope: Scope::Everywhere, help: "a command (listed under Commands below)" },
    Binding { keys: &[C('?')], label: "?", action: KeyAction::Help, scope: Scope::Everywhere, help: "this help" },
    Binding { keys: &[C('1')], label: "1", action: KeyAction::Goto(Tab::Overview), scope: Scope::Everywhere, help: "overview" },
    Binding { keys: &[C('2')], label: "2", action: KeyAction::Goto(Tab::Tenants), scope: Scope::Everywhere, help: "tenants" },
    Binding { keys: &[C('3')], label: "3", action: KeyAction::Goto(Tab::Heatmap), scope: Scope::Everywhere, help: "heatmap" },
    Binding { keys: &[C('4')], label: "4", action: KeyAction::Goto(Tab::Dlq), scope: Scope::Everywhere, help: "DLQ (all tenants)" },
    Binding { keys: &[C('5')], label: "5", action: KeyAction::Goto(Tab::Migration), scope: Scope::Everywhere, help: "migration" },
    Binding { keys: &[C('6')], label: "6", action: KeyAction::Goto(Tab::Log), scope: Scope::Everywhere, help: "log" },
    Binding { keys: &[C('7')], label: "7", action: KeyAction::Goto(Tab::Sinks), scope: Scope::Everywhere, help: "sinks (health, pauses; Enter: one sink)" },
    Binding { keys: &[C('8')], label: "8", action: KeyAction::Actions, scope: Scope::Everywhere, help: "this console's actions, each with its command line" },
    Binding { keys: &[Code(KeyCode::Tab)], label: "Tab", action: KeyAction::NextTab, scope: Scope::Everywhere, help: "next screen" },
    Binding { keys: &[C('r')], label: "r", action: KeyAction::Refresh, scope: Scope::Everywhere, help: "refresh now (re-rank a sorted list)" },
    Binding { keys: &[C('y')], label: "y", action: KeyAction::Copy, scope: Scope::Everywhere, help: "copy the selected hook, tenant or sink id (OSC 52)" },
    Binding { keys: &[C('s')], label: "s", action: KeyAction::Sort, scope: Scope::Tenants, help: "sort: ordinal, pending, scheduled, inflight, dead, bytes, archive, delivered/s, accepted/s (this page)" },
    Binding { keys: &[C('d')], label: "d", action: KeyAction::TenantDlq, scope: Scope::Tenant, help: "this tenant's DLQ" },
    Binding { keys: &[C('+'), C('z')], label: "+ z", action: KeyAction::ZoomIn, scope: Scope::Heatmap, help: "zoom in (narrower buckets, down to 1s)" },
    Binding { keys: &[C('-'), C('Z')], label: "- Z", action: KeyAction::ZoomOut, scope: Scope::Heatmap, help: "zoom out (wider buckets, up to 1h)" },
    Binding { keys: &[C('x')], label: "x", action: KeyAction::Select, scope: Scope::Dlq, help: "mark / unmark the row for replay" },
    Binding { keys: &[C('o')], label: "o", action: KeyAction::DlqOrder, scope: Scope::Dlq, help: "newest first / oldest first" },
    Binding { keys: &[C('b')], label: "b", action: KeyAction::MigBackup, scope: Scope::Migration, help: "1. back the store up into a new sibling directory" },
    Binding { keys: &[C('n')], label: "n", action: KeyAction::MigPlan, scope: Scope::Migration, help: "2. dry run: rows per phase" },
    Binding { keys: &[C('M')], label: "M", action: KeyAction::MigRun, scope: Scope::Migration, help: "3. migrate (or resume), after typing \"migrate\"" },
    Binding { keys: &[C('p')], label: "p Esc", action: KeyAction::MigPause, scope: Scope::Migration, help: "pause after the current step (M resumes)" },
    Binding { keys: &[C('c')], label: "c", action: KeyAction::MigCheck, scope: Scope::Migration, help: "4. store check (runs by itself after the migration)" },
    Binding { keys: &[C('P')], label: "P", action: KeyAction::Purge, scope: Scope::Write, help: "purge this tenant's pending and/or dead rows (tenant detail)" },
    Binding { keys: &[C('R')], label: "R", action: KeyAction::Replay, scope: Scope::Write, help: "replay the marked DLQ rows (or the selected one)" },
    Binding { keys: &[C('A')], label: "A", action: KeyAction::ReplayTenant, scope: Scope::Write, help: "replay every dead row of this tenant (tenant DLQ or detail)" },
    Binding { keys: &[C('H')], label: "H", action: KeyAction::Pause, scope: Scope::Write, help: "hold (pause) the selected tenant or sink: rows stay queued" },
    Binding { keys: &[C('U')], label: "U", action: KeyAction::Resume, scope: Scope::Write, help: "unpause (resume) the selected tenant or sink" },
];

/// The action of a key, if any.
pub fn lookup(ev: &KeyEvent) -> Option<KeyAction> {
    if ev.modifiers.contains(KeyModifiers::CONTROL) && ev.code == KeyCode::Char('c') {
        return Some(KeyAction::Quit);
    }
    KEYMAP
        .iter()
        .find(|b| b.keys.iter().any(|k| k.matches(ev)))
        .map(|b| b.action)
}

/// Help lines, grouped by scope, from [`KEYMAP`].
pub fn help_lines(can_act: bool) -> Vec<(Option<&'static str>, String)> {
    let mut out = Vec::new();
    for scope in [
        Scope::Everywhere,
        Scope::Tenants,
        Scope::Tenant,
        Scope::Heatmap,
        Scope::Dlq,
        Scope::Migration,
        Scope::Write,
    ] {
        out.push((Some(scope.title()), String::new()));
        if scope == Scope::Write && !can_act {
            out.push((
                None,
                "  hidden: actions need a running daemon to act through (its".into(),
            ));
            out.push((
                None,
                "  admin API), or --write on a store no daemon holds.".into(),
            ));
            continue;
        }
        for b in KEYMAP.iter().filter(|b| b.scope == scope) {
            out.push((None, format!("  {:<7} {}", b.label, b.help)));
        }
    }
    out
}
