//! The `:` prompt's commands, parsed by [`crate::commands`] (one table for
//! the parser, the help and docs/console.md) and carried out here.

use super::{App, Effect, CANNOT_ACT};
use crate::commands::{self, Refused, What};
use crate::data::{ActionScope, OpenMode, Request};
use crate::fmt::quoted;
use crate::keymap::Tab;
use crate::popups::guard;
use crate::screens::tenants::SortKey;
use crate::screens::{Next, Screen};
use ankusa_store::counters::Field;

impl App {
    /// `:replay-since 2h`: replay the rows dead-lettered in the last `d`,
    /// of the tenant whose DLQ is shown, else of every tenant.
    pub(super) fn replay_since(&mut self, d: &str) -> Vec<Effect> {
        let Ok(span) = humantime::parse_duration(d.trim()) else {
            self.status = format!(
                "{} is not a duration (try :replay-since 30m)",
                quoted(d, 30)
            );
            return Vec::new();
        };
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        let ms = u64::try_from(span.as_millis()).unwrap_or(u64::MAX);
        let scope =
            guard::since_scope(self.now, ms, self.screen(), self.tenant.as_ref(), &self.dlq);
        self.follow(Next::Guard(scope))
    }

    /// `:policy weight=4 cap=20` or `:policy clear` on a tenant's detail:
    /// the guard shows the stored policy and what it becomes.
    pub(super) fn policy(&mut self, arg: &str) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        match guard::policy_scope(arg, self.screen(), self.tenant.as_ref()) {
            Ok(scope) => self.follow(Next::Guard(scope)),
            Err(why) => {
                self.status = why;
                Vec::new()
            }
        }
    }

    /// `:limit max_in_flight=4 rate=20/s` or `:limit clear` on the sinks
    /// screen or a sink's detail: the selected (or open) sink.
    pub(super) fn limit(&mut self, arg: &str) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        let n = self.list_rows();
        let screen = self.screen().clone();
        let shown = matches!(screen, Screen::Sinks | Screen::Sink { .. })
            .then(|| self.sinks.shown(&screen, n))
            .flatten();
        match guard::limits_scope(arg, shown) {
            Ok(scope) => self.follow(Next::Guard(scope)),
            Err(why) => {
                self.status = why;
                Vec::new()
            }
        }
    }

    /// `:` commands ([`crate::commands`] says which there are).
    pub fn command(&mut self, line: &str) -> Vec<Effect> {
        let p = match commands::parse(line) {
            Ok(p) => p,
            Err(Refused::Unknown(l)) => {
                self.status = format!("unknown command {} (see ?)", quoted(&l, 40));
                return Vec::new();
            }
            Err(Refused::NeedsArgument(s)) => {
                self.status = format!("{} needs its argument: {}", s.name, s.usage());
                return Vec::new();
            }
            Err(Refused::TakesNone(s)) => {
                self.status = format!("{} takes no argument: {}", s.name, s.usage());
                return Vec::new();
            }
        };
        let arg = p.arg.as_str();
        match p.what {
            What::Quit => {
                self.quit = true;
                vec![Effect::Quit]
            }
            What::Goto(tab) => self.goto(tab),
            What::Tenants if arg.is_empty() => self.goto(Tab::Tenants),
            What::Dlq if arg.is_empty() => self.goto(Tab::Dlq),
            What::Dlq => self.fetch(vec![Request::TenantByName {
                name: arg.to_owned(),
                dlq: true,
            }]),
            What::DlqType => self.dlq_type(arg),
            What::Actions => self.show_actions(),
            What::Tenants | What::Tenant => self.fetch(vec![Request::TenantByName {
                name: arg.to_owned(),
                dlq: false,
            }]),
            What::ReplaySince => self.replay_since(arg),
            What::Repair => self.repair(),
            What::Drain => self.drain(true),
            What::Undrain => self.drain(false),
            What::Policy => self.policy(arg),
            What::Limit => self.limit(arg),
            What::PauseFor => self.pause_sink_for(arg, false),
            What::ResumeFor => self.pause_sink_for(arg, true),
            What::Sort => self.sort_by(arg),
        }
    }

    /// `8`, `:actions`: this console's actions.
    pub(super) fn show_actions(&mut self) -> Vec<Effect> {
        self.stack = vec![Screen::Actions];
        Vec::new()
    }

    /// `:dlq-type PATTERN`: the DLQ shown (the node's, unless a tenant's
    /// is on screen) narrowed to an event type pattern; alone, every row.
    pub(super) fn dlq_type(&mut self, arg: &str) -> Vec<Effect> {
        let pattern = if arg.is_empty() {
            None
        } else {
            match ankusa_ops::event_type::Pattern::parse(arg) {
                Ok(_) => Some(arg.to_owned()),
                Err(m) => {
                    self.status = format!("dlq-type: {m}");
                    return Vec::new();
                }
            }
        };
        if !matches!(self.screen(), Screen::Dlq { .. }) {
            let s = Screen::of_tab(Tab::Dlq);
            self.enter(&s);
            self.stack = vec![s];
        }
        self.dlq.set_event_type(pattern);
        self.reload()
    }

    /// `:sort FIELD`: a counter, `archive`, a rate (`delivered/s`), or the
    /// ordinal (alone).
    pub(super) fn sort_by(&mut self, f: &str) -> Vec<Effect> {
        match f {
            "ord" | "ordinal" | "" => {
                self.stack = vec![Screen::Tenants];
                self.set_sort(SortKey::Ordinal)
            }
            f => match Field::parse(f)
                .or_else(|| (f == "archive").then_some(Field::ArchivePending))
                .map(SortKey::Counter)
                .or_else(|| {
                    let name = f.strip_suffix("/s")?.replace('-', "_");
                    ankusa_store::Total::ALL
                        .into_iter()
                        .find(|t| t.name() == name)
                        .map(SortKey::Rate)
                }) {
                Some(key) => {
                    self.stack = vec![Screen::Tenants];
                    self.set_sort(key)
                }
                None => {
                    self.status = format!("unknown counter {} (see ?)", quoted(f, 40));
                    Vec::new()
                }
            },
        }
    }

    /// `:drain` / `:undrain`: the guarded drain (undrain) of the node this
    /// console acts on, through the daemon it follows (or on the stopped
    /// store it holds with `--write`): the same audited call as `ankusa
    /// node drain|undrain`.
    pub(super) fn drain(&mut self, on: bool) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        self.follow(Next::Guard(ActionScope::Drain { on, node: None }))
    }

    /// `:repair`: the guarded `store repair` of the store this console
    /// holds. Only a console opened with `--write` holds it; the dry run
    /// says how many things a repair would change (0 on a healthy store).
    pub(super) fn repair(&mut self) -> Vec<Effect> {
        if self.header.mode != OpenMode::Write {
            self.status =
                "repair needs a stopped store: reopen the console with --write (no daemon)".into();
            return Vec::new();
        }
        self.follow(Next::Guard(crate::data::ActionScope::Repair))
    }
}
