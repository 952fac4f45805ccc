//! Keys and the mouse: what a key does on the screen in front, in a popup
//! (the top overlay takes every key), and the moves of the selection,
//! pages, filter and sort that keys and clicks share.

use super::{App, Effect, LIST_TOP, TAB_ROW};
use crate::keymap::{self, KeyAction, Tab};
use crate::popups::guard::GuardNext;
use crate::popups::help;
use crate::popups::input::{self, Edit, InputKind};
use crate::popups::Overlay;
use crate::screens::tenants::SortKey;
use crate::screens::{overview, tenant, Next, Screen};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

impl App {
    /// A click on a tab opens its screen, a click on a list row selects
    /// it, the wheel moves the selection as `j`/`k` do (and scrolls the
    /// help). Under a popup only the help's wheel counts: a click never
    /// reaches the screen beneath a guard or an input line.
    pub(super) fn mouse(&mut self, m: MouseEvent) -> Vec<Effect> {
        let wheel = match m.kind {
            MouseEventKind::ScrollDown => Some(KeyAction::Down),
            MouseEventKind::ScrollUp => Some(KeyAction::Up),
            _ => None,
        };
        if let Some(top) = self.overlays.last() {
            if let (Overlay::Help(scroll), Some(a)) = (top, wheel) {
                let code = if a == KeyAction::Down {
                    KeyCode::Down
                } else {
                    KeyCode::Up
                };
                let k = KeyEvent::new(code, KeyModifiers::NONE);
                if let Some(s) = help::key(*scroll, &k, self.can_act()) {
                    self.set_top(Overlay::Help(s));
                }
            }
            return Vec::new();
        }
        if let Some(a) = wheel {
            return self.move_sel(a);
        }
        if m.kind != MouseEventKind::Down(MouseButton::Left) {
            return Vec::new();
        }
        if m.row == TAB_ROW {
            return match Tab::at(m.column) {
                Some(t) => {
                    self.status.clear();
                    self.goto(t)
                }
                None => Vec::new(),
            };
        }
        if let Some(i) = m.row.checked_sub(LIST_TOP).map(usize::from) {
            if i < self.rows_on_screen() {
                if let Some(s) = self.sel_mut() {
                    *s = i;
                }
            }
        }
        Vec::new()
    }

    pub(super) fn key(&mut self, k: KeyEvent) -> Vec<Effect> {
        if let Some(top) = self.overlays.last().cloned() {
            return self.overlay_key(top, k);
        }
        let Some(action) = keymap::lookup(&k) else {
            return Vec::new();
        };
        self.status.clear();
        match action {
            KeyAction::Quit => {
                self.quit = true;
                vec![Effect::Quit]
            }
            // Esc while this console migrates pauses rather than leaving.
            KeyAction::Back if *self.screen() == Screen::Migration && self.migration.running() => {
                self.migration.pause(&mut self.status);
                Vec::new()
            }
            KeyAction::Back => self.back(),
            KeyAction::MigBackup
            | KeyAction::MigPlan
            | KeyAction::MigRun
            | KeyAction::MigPause
            | KeyAction::MigCheck => {
                if *self.screen() != Screen::Migration {
                    self.status = "that key works on the migration screen (5)".into();
                    return Vec::new();
                }
                let next =
                    self.migration
                        .key(action, &self.header.path, self.now, &mut self.status);
                self.follow(next)
            }
            KeyAction::Help => {
                self.overlays.push(Overlay::Help(0));
                Vec::new()
            }
            KeyAction::Filter => {
                self.overlays.push(Overlay::Input {
                    kind: InputKind::Filter,
                    text: self.tenants.filter.clone(),
                });
                Vec::new()
            }
            KeyAction::Command => {
                self.overlays.push(Overlay::Input {
                    kind: InputKind::Command,
                    text: String::new(),
                });
                Vec::new()
            }
            KeyAction::Goto(t) => self.goto(t),
            KeyAction::NextTab => {
                let i = Tab::ALL
                    .iter()
                    .position(|t| *t == self.screen().tab())
                    .unwrap_or(0);
                self.goto(Tab::ALL[(i + 1) % Tab::ALL.len()])
            }
            KeyAction::Refresh => {
                if self.tenants.sort.is_some() && *self.screen() == Screen::Tenants {
                    self.tenants.ranked = None;
                }
                self.refresh()
            }
            KeyAction::Down | KeyAction::Up | KeyAction::Top | KeyAction::Bottom => {
                self.move_sel(action)
            }
            KeyAction::PageDown => self.page(true),
            KeyAction::PageUp => self.page(false),
            KeyAction::Open => self.open(),
            KeyAction::Sort => {
                if *self.screen() != Screen::Tenants {
                    return Vec::new();
                }
                let next = self.tenants.next_sort();
                self.set_sort(next)
            }
            KeyAction::ZoomIn | KeyAction::ZoomOut => {
                if !matches!(self.screen(), Screen::Heatmap | Screen::Tenant { .. }) {
                    return Vec::new();
                }
                self.heat.zoom(action == KeyAction::ZoomIn);
                self.reload()
            }
            KeyAction::TenantDlq => match self.screen().clone() {
                Screen::Tenant { ord } => self.follow(tenant::open_dlq(ord, self.tenant.as_ref())),
                _ => Vec::new(),
            },
            KeyAction::DlqOrder => {
                if let Screen::Dlq { .. } = self.screen() {
                    self.dlq.toggle_order();
                    return self.reload();
                }
                Vec::new()
            }
            KeyAction::Select => {
                if let Screen::Dlq { .. } = self.screen() {
                    self.dlq.toggle_mark();
                }
                Vec::new()
            }
            KeyAction::Purge | KeyAction::Replay | KeyAction::ReplayTenant => {
                self.start_guard(action)
            }
            KeyAction::Copy => self.copy(),
            KeyAction::Actions => self.show_actions(),
            KeyAction::Pause => self.start_pause(false),
            KeyAction::Resume => self.start_pause(true),
        }
    }

    /// `j`/`k`/`g`/`G` (and the wheel) on a list.
    pub(super) fn move_sel(&mut self, action: KeyAction) -> Vec<Effect> {
        let n = self.rows_on_screen();
        if let Some(s) = self.sel_mut() {
            *s = match action {
                KeyAction::Down => (*s + 1).min(n.saturating_sub(1)),
                KeyAction::Up => s.saturating_sub(1),
                KeyAction::Top => 0,
                _ => n.saturating_sub(1),
            };
        }
        if action == KeyAction::Top {
            return self.first_page();
        }
        Vec::new()
    }

    pub(super) fn open(&mut self) -> Vec<Effect> {
        let next = match self.screen().clone() {
            Screen::Tenants => self.tenants.open(self.list_rows()),
            Screen::Heatmap => self.heat.open(),
            Screen::Tenant { ord } => tenant::open_dlq(ord, self.tenant.as_ref()),
            Screen::Dlq { .. } => self.dlq.open(),
            Screen::Migration => self.migration.open(),
            Screen::Overview => overview::open(self.overview.as_ref()),
            Screen::Sinks => self.sinks.open(self.list_rows()),
            _ => Next::Stay,
        };
        self.follow(next)
    }

    pub(super) fn overlay_key(&mut self, top: Overlay, k: KeyEvent) -> Vec<Effect> {
        match top {
            Overlay::Help(scroll) => {
                match help::key(scroll, &k, self.can_act()) {
                    Some(s) => self.set_top(Overlay::Help(s)),
                    None => {
                        self.overlays.pop();
                    }
                }
                Vec::new()
            }
            Overlay::Input { kind, mut text } => match input::key(&mut text, &k) {
                Edit::Cancel => {
                    self.overlays.pop();
                    self.prompt_history.reset();
                    Vec::new()
                }
                Edit::Submit => {
                    self.overlays.pop();
                    match kind {
                        InputKind::Filter => self.set_filter(text),
                        InputKind::Command => {
                            self.prompt_history.push(&text);
                            self.command(&text)
                        }
                    }
                }
                walk @ (Edit::Older | Edit::Newer) => {
                    if kind == InputKind::Command {
                        let shown = if walk == Edit::Older {
                            self.prompt_history.older(&text)
                        } else {
                            self.prompt_history.newer()
                        };
                        if let Some(t) = shown {
                            text = t;
                        }
                        self.set_top(Overlay::Input { kind, text });
                    }
                    Vec::new()
                }
                Edit::Editing => {
                    self.set_top(Overlay::Input { kind, text });
                    Vec::new()
                }
            },
            Overlay::Guard(mut g) => {
                let next = g.key(&k, &mut self.status);
                self.set_top(Overlay::Guard(g));
                match next {
                    GuardNext::Stay => Vec::new(),
                    GuardNext::Close { refresh } => {
                        self.overlays.pop();
                        if refresh {
                            self.refresh()
                        } else {
                            Vec::new()
                        }
                    }
                    GuardNext::Fetch(req) => self.fetch(vec![req]),
                    GuardNext::Migrate => {
                        self.overlays.pop();
                        self.status.clear();
                        let next = self.migration.run();
                        self.follow(next)
                    }
                }
            }
        }
    }

    pub(super) fn set_top(&mut self, o: Overlay) {
        if let Some(top) = self.overlays.last_mut() {
            *top = o;
        }
    }

    pub(super) fn set_filter(&mut self, text: String) -> Vec<Effect> {
        self.tenants.set_filter(text);
        if *self.screen() != Screen::Tenants {
            self.stack = vec![Screen::Tenants];
        }
        self.reload()
    }

    pub(super) fn set_sort(&mut self, k: SortKey) -> Vec<Effect> {
        self.tenants.set_sort(k, &mut self.status);
        self.order_by_rate();
        self.reload()
    }

    /// Orders the page shown by its rows' rates, when sorted by a rate
    /// (fastest first; rows without a rate yet last, by ordinal).
    pub(super) fn order_by_rate(&mut self) {
        let (Some(t), Some(p)) = (self.tenants.rate_sort, &self.tenants.page) else {
            return;
        };
        let live = self.rates_live();
        let mut v: Vec<(f64, u32)> = p
            .rows
            .iter()
            .map(|r| {
                let rate = self
                    .rates
                    .tenant(r.ord)
                    .and_then(|s| s.rate(t))
                    .filter(|_| live)
                    .map_or(-1.0, |r| r.per_s);
                (rate, r.ord)
            })
            .collect();
        v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        self.tenants.rate_order = v.into_iter().map(|(_, o)| o).collect();
    }

    pub(super) fn first_page(&mut self) -> Vec<Effect> {
        if *self.screen() == Screen::Sinks {
            // The whole list is one answer: paging fetches nothing.
            self.sinks.page = 0;
            return Vec::new();
        }
        let moved = match self.screen() {
            Screen::Tenants => self.tenants.first_page(),
            Screen::Dlq { .. } => self.dlq.first_page(),
            Screen::Heatmap => self.heat.first_page(),
            _ => false,
        };
        self.reload_if(moved)
    }

    pub(super) fn page(&mut self, down: bool) -> Vec<Effect> {
        let n = self.list_rows();
        if *self.screen() == Screen::Sinks {
            self.sinks.page(down, n, &mut self.status);
            return Vec::new();
        }
        let moved = match self.screen() {
            Screen::Tenants => self.tenants.page(down, n, &mut self.status),
            Screen::Dlq { .. } => self.dlq.page(down, &mut self.status),
            Screen::Heatmap => self.heat.page(down, n),
            _ => false,
        };
        self.reload_if(moved)
    }
}
