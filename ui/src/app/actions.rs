//! The guarded actions started from a key: the guard popup for replay,
//! purge, pause and resume (a scope, a count, a confirmation) and the copy
//! of what is selected. Nothing changes the store until the guard is
//! confirmed.

use super::{App, Effect, CANNOT_ACT};
use crate::data::{ActionScope, PauseTarget};
use crate::fmt::quoted;
use crate::keymap::KeyAction;
use crate::popups::guard::{self, NoScope};
use crate::screens::{Next, Screen};

impl App {
    pub(super) fn start_guard(&mut self, action: KeyAction) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        match guard::scope_for(action, self.screen(), self.tenant.as_ref(), &self.dlq) {
            Ok(scope) => self.follow(Next::Guard(scope)),
            Err(NoScope::Nothing) => Vec::new(),
            Err(NoScope::NotHere) => {
                self.status = "that action does not apply here (see ?)".into();
                Vec::new()
            }
        }
    }

    /// `y`: the id of what is selected (a hook in the DLQ or a dead
    /// delivery, a tenant in the list or its detail, a sink), for the
    /// clipboard; the footer says what was copied.
    pub(super) fn copy(&mut self) -> Vec<Effect> {
        let n = self.list_rows();
        let found: Option<(&str, String)> = match self.screen().clone() {
            Screen::Dlq { .. } => self.dlq.selected().map(|r| ("hook id", r.hook_id.clone())),
            Screen::DeadDetail { row } => Some(("hook id", row.hook_id)),
            Screen::Tenants => self.tenants.selected(n).map(|(id, _)| ("tenant", id)),
            Screen::Tenant { ord } => self
                .tenant
                .as_ref()
                .filter(|t| t.ord == ord)
                .map(|t| ("tenant", t.name.clone())),
            s @ (Screen::Sinks | Screen::Sink { .. }) => self
                .sinks
                .pause_target(&s, n)
                .and_then(|(t, _)| t.sink)
                .map(|(k, name)| ("sink", format!("{}/{name}", k.source))),
            Screen::Actions => self
                .actions
                .selected()
                .and_then(|e| e.equivalent.as_ref())
                .map(|e| ("command", e.cli.clone())),
            _ => None,
        };
        let Some((what, text)) = found else {
            self.status = "y copies the selected hook, tenant or sink: nothing to copy here".into();
            return Vec::new();
        };
        if crate::clipboard::osc52(&text).is_none() {
            self.status = format!("cannot copy that {what}");
            return Vec::new();
        }
        self.status = format!("copied {what} {} (OSC 52)", quoted(&text, 40));
        vec![Effect::Copy(text)]
    }

    /// `H` / `U`: the guarded pause or resume of what the screen selects
    /// (the tenant on the tenants list or its detail, the sink on the sinks
    /// list or its detail). Refused at once when there is nothing to do
    /// (pausing what is paused, resuming what is not): the guard is for a
    /// change.
    pub(super) fn start_pause(&mut self, resume: bool) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        let n = self.list_rows();
        let found = match self.screen().clone() {
            Screen::Tenants => self.tenants.selected(n).map(|(id, paused)| {
                let t = PauseTarget {
                    tenant: Some(id),
                    sink: None,
                };
                (t, paused)
            }),
            Screen::Tenant { ord } => self.tenant.as_ref().filter(|t| t.ord == ord).map(|t| {
                let paused = t.paused.iter().any(|p| {
                    p.pause.scope.sink.is_none()
                        && p.pause.scope.tenant.as_deref() == Some(t.name.as_str())
                });
                let target = PauseTarget {
                    tenant: Some(t.name.clone()),
                    sink: None,
                };
                (target, paused)
            }),
            s @ (Screen::Sinks | Screen::Sink { .. }) => self.sinks.pause_target(&s, n),
            _ => {
                self.status = "pause and resume work on tenants and sinks (see ?)".into();
                return Vec::new();
            }
        };
        let Some((target, paused)) = found else {
            return Vec::new();
        };
        self.guard_pause(target, paused, resume)
    }

    /// `:pause-for TENANT` / `:resume-for TENANT` on the sinks list or a
    /// sink's detail: the guarded pause or resume of that sink for one
    /// tenant (its other sinks, and other tenants on this sink, go on).
    pub(super) fn pause_sink_for(&mut self, tenant: &str, resume: bool) -> Vec<Effect> {
        if !self.can_act() {
            self.status = CANNOT_ACT.into();
            return Vec::new();
        }
        let n = self.list_rows();
        let screen = self.screen().clone();
        if !matches!(screen, Screen::Sinks | Screen::Sink { .. }) {
            self.status =
                "pause-for and resume-for name a tenant on the sinks screen (see ?)".into();
            return Vec::new();
        }
        let Some((mut target, _)) = self.sinks.pause_target(&screen, n) else {
            return Vec::new();
        };
        let paused = self.sinks.paused_for(&screen, n, tenant);
        target.tenant = Some(tenant.to_owned());
        self.guard_pause(target, paused, resume)
    }

    /// The guard of a pause or resume of `target`, refused at once when
    /// there is nothing to do.
    pub(super) fn guard_pause(
        &mut self,
        target: PauseTarget,
        paused: bool,
        resume: bool,
    ) -> Vec<Effect> {
        if paused != resume {
            self.status = if resume {
                format!("{} is not paused", quoted(&target.label(), 50))
            } else {
                format!(
                    "{} is already paused (U resumes)",
                    quoted(&target.label(), 40)
                )
            };
            return Vec::new();
        }
        let scope = if resume {
            ActionScope::Resume(target)
        } else {
            ActionScope::Pause(target)
        };
        self.follow(Next::Guard(scope))
    }
}
