//! The guard of an action that changes what the node does (purge, replay,
//! migrate, repair, pause, resume, drain, undrain, a tenant's policy): the exact scope and the dry run's
//! count first (a pause or a resume changes no row's content and is not
//! counted), then the typed confirmation (the tenant's name for a purge or
//! a tenant's pause, `SOURCE/NAME` for a sink's), then progress (a sink's
//! resume is a job unparking its rows), then the result. Nothing runs before the typed word matches, and a running
//! action cannot be interrupted from here (it is chunked and resumable).

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use ankusa_ops::model::Kinds;
use ankusa_ops::model::SinkView;
use ankusa_store::policy::{Policy, RateError, SinkLimits};

use crate::data::{ActionResult, ActionScope, Progress, Request, TenantData};
use crate::fmt::{num, quoted, utc};
use crate::keymap::KeyAction;
use crate::screens::dlq::DlqState;
use crate::screens::Screen;
use crate::theme::{block, centered, Theme};

/// A guarded action's stages: exact scope and dry-run count, typed
/// confirmation, progress, result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    Counting,
    Confirm { count: u64, typed: String },
    Running(Progress),
    Done(Result<ActionResult, String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub scope: ActionScope,
    pub stage: Stage,
}

/// What a key on the guard asks the app to do.
#[derive(Debug, Clone, PartialEq)]
pub enum GuardNext {
    Stay,
    /// Close the guard; after a finished action, refresh the screen.
    Close {
        refresh: bool,
    },
    Fetch(Request),
    /// The migration was confirmed: it runs on the migration screen, one
    /// step per request, each showing its cursor.
    Migrate,
}

/// Why a key names no scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoScope {
    /// Nothing to act on yet (no row selected, the tenant not loaded): the
    /// key does nothing.
    Nothing,
    /// The action does not apply on this screen.
    NotHere,
}

/// The scope of `:policy ARG` on `screen`: `clear`, or `field=value`
/// pairs (`weight`, `share`, `cap`, `rate`) merged into the tenant's stored
/// policy. Refused, with the reason, off a tenant's detail, on a field or
/// value it does not know, and when nothing would change.
pub fn policy_scope(
    arg: &str,
    screen: &Screen,
    tenant: Option<&TenantData>,
) -> Result<ActionScope, String> {
    let Screen::Tenant { ord } = *screen else {
        return Err(":policy works on a tenant's detail (Enter on the tenants list)".into());
    };
    let Some(t) = tenant.filter(|t| t.ord == ord) else {
        return Err("the tenant is still loading".into());
    };
    let before = t.policy.as_ref().map(|p| p.policy);
    let after = if arg.trim() == "clear" {
        None
    } else {
        let mut set = Policy::default();
        for pair in arg.split_whitespace() {
            let Some((k, v)) = pair.split_once('=') else {
                return Err(format!(
                    "{}: write field=value (weight=4 cap=20 rate=50/s), or clear",
                    quoted(pair, 30)
                ));
            };
            let n = || {
                v.parse::<u32>()
                    .map_err(|_| format!("{k}={}: a whole number", quoted(v, 20)))
            };
            match k {
                "weight" => set.weight = Some(n()?),
                "share" => set.share = Some(n()?),
                "cap" => set.cap = Some(n()?),
                "rate" => set.rate = Some(v.parse().map_err(|e: RateError| e.to_string())?),
                _ => {
                    return Err(format!(
                        "unknown field {}: weight, share, cap or rate",
                        quoted(k, 20)
                    ))
                }
            }
        }
        let merged = set.over(&before.unwrap_or_default());
        merged.check()?;
        Some(merged)
    };
    if after == before {
        return Err(format!(
            "the policy of {} is already {}: nothing to change",
            quoted(&t.name, 30),
            before.map_or_else(|| "the defaults".to_owned(), |p| p.to_string())
        ));
    }
    Ok(ActionScope::Policy {
        ord,
        tenant: t.name.clone(),
        before,
        after,
    })
}

/// The scope of `:limit ARG` for `sink` (the one selected or open on the
/// sinks screen): `clear`, or `max_in_flight=N` / `rate=R` merged into its
/// stored limits.
pub fn limits_scope(arg: &str, sink: Option<&SinkView>) -> Result<ActionScope, String> {
    let Some(v) = sink else {
        return Err(":limit works on the sinks screen (7), on the sink selected or open".into());
    };
    let before = v.limits;
    let after = if arg.trim() == "clear" {
        None
    } else {
        let mut set = SinkLimits::default();
        for pair in arg.split_whitespace() {
            let Some((k, val)) = pair.split_once('=') else {
                return Err(format!(
                    "{}: write field=value (max_in_flight=4 rate=20/s), or clear",
                    quoted(pair, 30)
                ));
            };
            match k {
                "max_in_flight" => {
                    set.max_in_flight = Some(val.parse().map_err(|_| {
                        format!("max_in_flight={}: a whole number", quoted(val, 20))
                    })?)
                }
                "rate" => set.rate = Some(val.parse().map_err(|e: RateError| e.to_string())?),
                _ => {
                    return Err(format!(
                        "unknown field {}: max_in_flight or rate",
                        quoted(k, 20)
                    ))
                }
            }
        }
        let merged = set.over(&before.unwrap_or_default());
        merged.check()?;
        Some(merged)
    };
    let name = format!("{}/{}", v.source, v.name);
    if after == before {
        return Err(format!(
            "the limits of {} are already {}: nothing to change",
            quoted(&name, 30),
            before.map_or_else(|| "its configuration's".to_owned(), |l| l.to_string())
        ));
    }
    Ok(ActionScope::SinkLimits {
        sink: name,
        before,
        after,
    })
}

/// The scope `action` has on `screen`.
pub fn scope_for(
    action: KeyAction,
    screen: &Screen,
    tenant: Option<&TenantData>,
    dlq: &DlqState,
) -> Result<ActionScope, NoScope> {
    Ok(match (action, screen.clone()) {
        (KeyAction::Purge, Screen::Tenant { ord }) => {
            let Some(t) = tenant.filter(|t| t.ord == ord) else {
                return Err(NoScope::Nothing);
            };
            ActionScope::Purge {
                ord,
                tenant: t.name.clone(),
                kinds: Kinds::BOTH,
            }
        }
        (KeyAction::Replay, Screen::Dlq { .. }) => {
            let rows = dlq.replay_rows();
            if rows.is_empty() {
                return Err(NoScope::Nothing);
            }
            let sinks = rows.iter().map(|r| dlq.sink_of(r)).collect();
            ActionScope::ReplayRows { rows, sinks }
        }
        (KeyAction::Replay, Screen::DeadDetail { row }) => ActionScope::ReplayRows {
            sinks: vec![dlq.sink_of(&row)],
            rows: vec![row],
        },
        (
            KeyAction::ReplayTenant,
            Screen::Dlq {
                ord: Some(ord),
                name,
            },
        ) => ActionScope::ReplayTenant {
            ord,
            tenant: dlq.name_of(ord, name),
        },
        (KeyAction::ReplayTenant, Screen::Tenant { ord }) => {
            let Some(t) = tenant.filter(|t| t.ord == ord) else {
                return Err(NoScope::Nothing);
            };
            ActionScope::ReplayTenant {
                ord,
                tenant: t.name.clone(),
            }
        }
        _ => return Err(NoScope::NotHere),
    })
}

/// `:replay-since`: the rows dead-lettered in the last `span_ms` before
/// `now`, of the tenant `screen` shows, else of every tenant.
pub fn since_scope(
    now: u64,
    span_ms: u64,
    screen: &Screen,
    tenant: Option<&TenantData>,
    dlq: &DlqState,
) -> ActionScope {
    let tenant = match screen.clone() {
        Screen::Dlq {
            ord: Some(ord),
            name,
        } => Some((ord, dlq.name_of(ord, name))),
        Screen::Tenant { ord } => tenant
            .filter(|t| t.ord == ord)
            .map(|t| (ord, t.name.clone())),
        _ => None,
    };
    ActionScope::ReplayRange {
        tenant,
        from: now.saturating_sub(span_ms),
        to: now.saturating_add(1),
    }
}

impl Guard {
    /// A new guard, counting its scope's rows (or, for a scope that is not
    /// counted, asking for the confirmation at once).
    pub fn new(scope: ActionScope) -> Self {
        let stage = if scope.counts() {
            Stage::Counting
        } else {
            Stage::Confirm {
                count: 0,
                typed: String::new(),
            }
        };
        Guard { scope, stage }
    }

    /// The dry run's count arrived (for this scope: a Tab may have changed
    /// the purge kinds since it was asked).
    pub fn on_dry_run(&mut self, scope: &ActionScope, count: u64) {
        if self.scope == *scope {
            self.stage = Stage::Confirm {
                count,
                typed: String::new(),
            };
        }
    }

    pub fn key(&mut self, k: &KeyEvent, status: &mut String) -> GuardNext {
        match (&mut self.stage, k.code) {
            (Stage::Running(_), _) => {
                *status = "the action is running; it cannot be interrupted from here".into();
            }
            (Stage::Done(_), KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) => {
                return GuardNext::Close { refresh: true };
            }
            (_, KeyCode::Esc) => {
                *status = "cancelled: nothing was changed".into();
                return GuardNext::Close { refresh: false };
            }
            (Stage::Confirm { .. }, KeyCode::Tab) => {
                // Purge kinds: both, pending only, dead only.
                if let ActionScope::Purge { kinds, .. } = &mut self.scope {
                    *kinds = kinds.next();
                    self.stage = Stage::Counting;
                    return GuardNext::Fetch(Request::DryRun(self.scope.clone()));
                }
            }
            (Stage::Confirm { typed, .. }, KeyCode::Backspace) => {
                typed.pop();
            }
            (Stage::Confirm { typed, .. }, KeyCode::Char(c))
                if !c.is_control() && typed.len() < 200 =>
            {
                typed.push(c);
            }
            (Stage::Confirm { typed, count }, KeyCode::Enter) => {
                if *typed != self.scope.confirm_word() {
                    let word = self.scope.confirm_word();
                    // A long tenant name is on the guard above, whole.
                    *status = if word.chars().count() <= 50 {
                        format!("type {word:?} exactly to confirm")
                    } else {
                        "type the name shown above exactly to confirm".into()
                    };
                    return GuardNext::Stay;
                }
                if self.scope == ActionScope::Migrate {
                    return GuardNext::Migrate;
                }
                let total = *count;
                self.stage = Stage::Running(Progress { done: 0, total });
                return GuardNext::Fetch(Request::Execute(self.scope.clone()));
            }
            _ => {}
        }
        GuardNext::Stay
    }
}

pub fn draw(f: &mut Frame, g: &Guard, theme: &Theme, area: Rect) {
    draw_on(f, g, None, theme, area)
}

/// The guard, naming the node it acts on when there are several (the
/// fleet console).
pub fn draw_on(f: &mut Frame, g: &Guard, node: Option<&str>, theme: &Theme, area: Rect) {
    let (scope, stage) = (&g.scope, &g.stage);
    let mut lines = vec![Line::from(format!(" Scope: {}", scope.describe()))];
    if let Some(n) = node {
        lines.push(Line::from(vec![
            Span::raw(" On node: "),
            Span::styled(n.to_owned(), theme.title()),
        ]));
    }
    if let ActionScope::ReplayRows { rows, sinks } = scope {
        for (r, sink) in rows.iter().zip(sinks).take(3) {
            lines.push(Line::from(format!(
                "   {} sink {} dead at {}",
                r.hook_id,
                sink,
                utc(r.at)
            )));
        }
        if rows.len() > 3 {
            lines.push(Line::from(format!("   … and {} more", rows.len() - 3)));
        }
    }
    lines.push(Line::from(""));
    match stage {
        Stage::Counting => lines.push(Line::from(" Dry run: counting the rows this would touch…")),
        Stage::Confirm { count, typed } => {
            lines.push(Line::from(match scope {
                ActionScope::Pause(_) => Span::styled(
                    " Its rows stay queued: none is claimed or dead-lettered, none is lost.",
                    theme.title(),
                ),
                ActionScope::Resume(_) => Span::styled(
                    " Its rows become due at once (a sink's parked rows, by a job).",
                    theme.title(),
                ),
                ActionScope::Drain { on: true, .. } => Span::styled(
                    " Hooks that still arrive are accepted; it delivers what it holds.",
                    theme.title(),
                ),
                ActionScope::SinkLimits { before, after, .. } => Span::styled(
                    format!(
                        " Now: {}. After: {}.",
                        before.map_or_else(|| "its configuration's".to_owned(), |l| l.to_string()),
                        after.map_or_else(|| "its configuration's".to_owned(), |l| l.to_string())
                    ),
                    theme.title(),
                ),
                ActionScope::Policy { before, after, .. } => Span::styled(
                    format!(
                        " Now: {}. After: {}.",
                        before.map_or_else(|| "the defaults".to_owned(), |p| p.to_string()),
                        after.map_or_else(|| "the defaults".to_owned(), |p| p.to_string())
                    ),
                    theme.title(),
                ),
                ActionScope::Drain { on: false, .. } => Span::styled(
                    " The balancer puts it back after its rise checks.",
                    theme.title(),
                ),
                _ => Span::styled(
                    format!(" Dry run: {} row(s) would change.", num(*count as i64)),
                    theme.title(),
                ),
            }));
            lines.push(Line::from(match scope {
                ActionScope::Purge { .. } => {
                    " Tab: pending+dead / pending only / dead only. Purged rows are gone."
                }
                ActionScope::Migrate => {
                    " Rows move in synced steps; an interrupted run resumes where it stopped."
                }
                ActionScope::Repair => {
                    " Counted: rows to quarantine, markers to put back, counters to set, hooks to reclaim."
                }
                ActionScope::Pause(_) => {
                    " Inflight deliveries finish; retries burn no attempts while paused."
                }
                ActionScope::Resume(_) => " Deliveries start again within one dispatcher tick.",
                ActionScope::Drain { .. } => " Audited, like `ankusa node drain|undrain`.",
                ActionScope::Policy { .. } => {
                    " No row changes; the dispatcher applies it on its next tick. Audited, like `ankusa tenants policy`."
                }
                ActionScope::SinkLimits { .. } => {
                    " No row changes; its waiting rows stay due. Audited, like `ankusa sinks limit`."
                }
                _ => " Replayed rows become due now and leave the DLQ.",
            }));
            lines.push(Line::from(format!(
                " Type {:?} and press Enter to confirm; Esc cancels.",
                scope.confirm_word()
            )));
            lines.push(Line::from(vec![
                Span::raw(" > "),
                Span::styled(format!("{typed}▏"), theme.title()),
            ]));
        }
        Stage::Running(p) if p.total == 0 => {
            // A resume's job counts as it goes: no total to measure against.
            lines.push(Line::from(format!(
                " Running: {} row(s) so far…",
                num(p.done as i64)
            )));
        }
        Stage::Running(p) => {
            lines.push(Line::from(format!(
                " Running: {} of {} row(s)…",
                num(p.done as i64),
                num(p.total as i64)
            )));
            let w = 40usize;
            let filled = if p.total == 0 {
                w
            } else {
                (p.done.min(p.total) as usize * w) / p.total as usize
            };
            lines.push(Line::from(format!(
                " [{}{}]",
                "#".repeat(filled),
                ".".repeat(w - filled)
            )));
        }
        Stage::Done(Ok(ActionResult {
            note: Some(note), ..
        })) => {
            lines.push(Line::from(Span::styled(
                format!(" Done. {note}"),
                theme.ok(),
            )));
            lines.push(Line::from(" Audited. Enter or Esc closes and refreshes."));
        }
        Stage::Done(Ok(r)) => {
            lines.push(Line::from(Span::styled(
                format!(
                    " Done: {} row(s) changed (dry run said {}).",
                    num(r.touched as i64),
                    num(r.expected as i64)
                ),
                theme.ok(),
            )));
            lines.push(Line::from(" Enter or Esc closes and refreshes."));
        }
        Stage::Done(Err(e)) => {
            lines.push(Line::from(Span::styled(
                format!(" Failed: {e}"),
                theme.error(),
            )));
            lines.push(Line::from(" Enter or Esc closes."));
        }
    }
    let w = 76u16.min(area.width);
    let inner = usize::from(w.saturating_sub(2)).max(1);
    let rows: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner)).sum();
    let r = centered(area, w, rows as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines)
            .alignment(Alignment::Left)
            .block(block(" Guarded action ".into(), theme))
            .wrap(Wrap { trim: false }),
        r,
    );
}
