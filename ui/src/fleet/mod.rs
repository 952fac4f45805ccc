//! The fleet console (`ankusa console --fleet FLEET.toml`): one console
//! over several nodes, each reached through its admin API
//! ([`ankusa_ops::fleet`]).
//!
//! The same shape as the single-node console: [`FleetApp::update`] is a
//! pure function of the state and a message (time arrives as a tick), its
//! effects are fetches answered on worker threads ([`worker`]), and each
//! screen draws itself ([`nodes`], [`tenants`], [`tenant`]; the frame in
//! [`view`]). Guarded actions use the single-node console's guard
//! ([`crate::popups::guard`]) and run through
//! [`crate::data::actions::act_on`] on the operator of the node they name.
//!
//! Invariants:
//! - The UI thread never talks to a node: every question runs on a worker
//!   thread, a survey of the fleet costs at most the fleet's timeout, and a
//!   survey is not sent while the last one is outstanding. A node that
//!   hangs therefore never freezes the screen: keys are handled meanwhile,
//!   and the node shows as unreachable when the deadline passes.
//! - An action goes to the node it names (the guard's scope says which),
//!   never to another: the node is part of the fetch, not looked up later.
//! - An unreachable node stays on every screen with its last-known figures
//!   and their age; the fleet totals sum the answering nodes only and say
//!   how many answered.

pub mod nodes;
pub mod tenant;
pub mod tenants;
pub mod view;
pub mod worker;

use std::path::PathBuf;

use ankusa_ops::fleet::{Answer, Fleet, FleetView, NodeFigures, NodeStatus, TenantOnNode};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::data::{ActionResult, ActionScope, PauseTarget, Progress, Request};
use crate::fmt::quoted;
use crate::popups::guard::{Guard, GuardNext, Stage};
use crate::popups::Overlay;

/// Tenants each node is asked for on a survey, most pending first (the
/// merge of every node's top rows is the fleet's top rows).
pub const TENANTS_PER_NODE: usize = 200;
/// Dead rows of a tenant asked of each node holding it.
pub const DLQ_PER_NODE: usize = 20;

/// A screen of the fleet console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetScreen {
    Nodes,
    Tenants,
    /// A tenant, as every node holding rows of it has it; actions go to
    /// `node`, the node of the row it was opened from.
    Tenant {
        name: String,
        node: String,
    },
}

/// What the fleet console asks its workers.
#[derive(Debug, Clone, PartialEq)]
pub enum FleetRequest {
    /// Every node's figures and top tenants.
    Survey,
    /// A tenant from the nodes that hold rows of it.
    Tenant { name: String, nodes: Vec<String> },
    /// A guarded action's dry run on one node.
    DryRun { node: String, scope: ActionScope },
    /// A guarded action on one node.
    Execute { node: String, scope: ActionScope },
}

/// The workers' answers.
#[derive(Debug, Clone)]
pub enum FleetReply {
    Survey(Vec<Answer<NodeFigures>>),
    Tenant {
        name: String,
        answers: Vec<Answer<TenantOnNode>>,
    },
    DryRun(ActionScope, Result<u64, String>),
    Done(Result<ActionResult, String>),
}

#[derive(Debug)]
pub enum FleetMsg {
    Key(KeyEvent),
    Tick(u64),
    Resize(u16, u16),
    Reply(FleetReply),
    Progress(Progress),
}

#[derive(Debug, Clone, PartialEq)]
pub enum FleetEffect {
    Fetch(FleetRequest),
    Quit,
}

/// A tenant's detail as the nodes holding it answered.
#[derive(Debug, Clone)]
pub struct TenantShown {
    pub name: String,
    pub answers: Vec<Answer<TenantOnNode>>,
    pub at: u64,
}

/// The fleet console's state.
#[derive(Debug, Clone)]
pub struct FleetApp {
    pub now: u64,
    pub width: u16,
    pub height: u16,
    pub refresh_ms: u64,
    /// The fleet file's path and timeout, for the header.
    pub path: PathBuf,
    pub timeout_ms: u64,
    pub view: FleetView,
    pub stack: Vec<FleetScreen>,
    pub node_sel: usize,
    pub tenant_sel: usize,
    /// First row of the tenants list shown.
    pub tenant_top: usize,
    pub tenant: Option<TenantShown>,
    pub overlays: Vec<Overlay>,
    /// The node the open guard acts on.
    pub guard_node: Option<String>,
    pub status: String,
    /// A survey is outstanding.
    pub surveying: bool,
    pub last_survey: Option<u64>,
    /// When the last survey's answers arrived.
    pub surveyed_at: Option<u64>,
    pub quit: bool,
}

/// Rows of chrome around a list: header, tabs, footer, block borders,
/// column titles, the totals line.
const CHROME: u16 = 7;

impl FleetApp {
    pub fn new(fleet: &Fleet, refresh_ms: u64, now: u64, width: u16, height: u16) -> FleetApp {
        FleetApp {
            now,
            width,
            height,
            refresh_ms: refresh_ms.max(100),
            path: fleet.path.clone(),
            timeout_ms: u64::try_from(fleet.timeout.as_millis()).unwrap_or(u64::MAX),
            view: FleetView::new(fleet),
            stack: vec![FleetScreen::Nodes],
            node_sel: 0,
            tenant_sel: 0,
            tenant_top: 0,
            tenant: None,
            overlays: Vec::new(),
            guard_node: None,
            status: String::new(),
            surveying: false,
            last_survey: None,
            surveyed_at: None,
            quit: false,
        }
    }

    pub fn screen(&self) -> &FleetScreen {
        self.stack.last().unwrap_or(&FleetScreen::Nodes)
    }

    /// Rows a list shows at the current size.
    pub fn list_rows(&self) -> usize {
        usize::from(self.height.saturating_sub(CHROME)).max(1)
    }

    fn survey(&mut self) -> Vec<FleetEffect> {
        if self.surveying {
            return Vec::new();
        }
        self.surveying = true;
        self.last_survey = Some(self.now);
        vec![FleetEffect::Fetch(FleetRequest::Survey)]
    }

    /// The survey, and the open tenant's detail again.
    fn refresh(&mut self) -> Vec<FleetEffect> {
        let mut e = self.survey();
        e.extend(self.tenant_fetch());
        e
    }

    fn tenant_fetch(&self) -> Vec<FleetEffect> {
        let FleetScreen::Tenant { name, node } = self.screen() else {
            return Vec::new();
        };
        let mut nodes = self.view.holders(name);
        if !nodes.contains(node) {
            nodes.push(node.clone());
        }
        vec![FleetEffect::Fetch(FleetRequest::Tenant {
            name: name.clone(),
            nodes,
        })]
    }

    pub fn update(&mut self, msg: FleetMsg) -> Vec<FleetEffect> {
        match msg {
            FleetMsg::Tick(now) => {
                self.now = now;
                let due = self
                    .last_survey
                    .is_none_or(|t| now.saturating_sub(t) >= self.refresh_ms);
                if due && !self.surveying {
                    return self.refresh();
                }
                Vec::new()
            }
            FleetMsg::Resize(w, h) => {
                self.width = w;
                self.height = h;
                self.clamp();
                Vec::new()
            }
            FleetMsg::Progress(p) => {
                if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
                    g.stage = Stage::Running(p);
                }
                Vec::new()
            }
            FleetMsg::Reply(r) => self.apply(r),
            FleetMsg::Key(k) => self.key(k),
        }
    }

    fn apply(&mut self, reply: FleetReply) -> Vec<FleetEffect> {
        match reply {
            FleetReply::Survey(answers) => {
                self.surveying = false;
                self.surveyed_at = Some(self.now);
                self.view.apply(answers, self.now);
                self.clamp();
            }
            FleetReply::Tenant { name, answers } => {
                if matches!(self.screen(), FleetScreen::Tenant { name: n, .. } if *n == name) {
                    self.tenant = Some(TenantShown {
                        name,
                        answers,
                        at: self.now,
                    });
                }
            }
            FleetReply::DryRun(scope, count) => {
                if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
                    match count {
                        Ok(n) => g.on_dry_run(&scope, n),
                        Err(e) => g.stage = Stage::Done(Err(e)),
                    }
                }
            }
            FleetReply::Done(r) => {
                if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
                    g.stage = Stage::Done(r);
                }
            }
        }
        Vec::new()
    }

    fn clamp(&mut self) {
        let n = self.view.nodes.len();
        self.node_sel = self.node_sel.min(n.saturating_sub(1));
        let t = self.view.tenant_rows().len();
        self.tenant_sel = self.tenant_sel.min(t.saturating_sub(1));
        self.scroll();
    }

    /// Keeps the selected tenant row on screen.
    fn scroll(&mut self) {
        let rows = self.list_rows();
        if self.tenant_sel < self.tenant_top {
            self.tenant_top = self.tenant_sel;
        } else if self.tenant_sel >= self.tenant_top + rows {
            self.tenant_top = self.tenant_sel + 1 - rows;
        }
    }

    fn key(&mut self, k: KeyEvent) -> Vec<FleetEffect> {
        if let Some(Overlay::Guard(g)) = self.overlays.last_mut() {
            let next = g.key(&k, &mut self.status);
            return self.guard_next(next);
        }
        let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
        self.status.clear();
        match k.code {
            _ if ctrl_c => self.quit(),
            KeyCode::Char('Q') => self.quit(),
            KeyCode::Char('q') | KeyCode::Esc => {
                if self.stack.len() <= 1 {
                    return self.quit();
                }
                self.stack.pop();
                self.tenant = None;
                Vec::new()
            }
            KeyCode::Char('1') => self.goto(FleetScreen::Nodes),
            KeyCode::Char('2') => self.goto(FleetScreen::Tenants),
            KeyCode::Tab => {
                let to = if *self.screen() == FleetScreen::Nodes {
                    FleetScreen::Tenants
                } else {
                    FleetScreen::Nodes
                };
                self.goto(to)
            }
            KeyCode::Char('r') => self.refresh(),
            KeyCode::Char('j') | KeyCode::Down => self.move_sel(1),
            KeyCode::Char('k') | KeyCode::Up => self.move_sel(-1),
            KeyCode::PageDown | KeyCode::Char(' ') => {
                let n = self.list_rows() as isize;
                self.move_sel(n)
            }
            KeyCode::PageUp => {
                let n = self.list_rows() as isize;
                self.move_sel(-n)
            }
            KeyCode::Char('g') | KeyCode::Home => self.move_sel(isize::MIN / 2),
            KeyCode::Char('G') | KeyCode::End => self.move_sel(isize::MAX / 2),
            KeyCode::Enter => self.open(),
            KeyCode::Char('D') => self.start_drain(true),
            KeyCode::Char('U') if *self.screen() == FleetScreen::Nodes => self.start_drain(false),
            KeyCode::Char('H') => self.start_pause(false),
            KeyCode::Char('U') => self.start_pause(true),
            KeyCode::Char('A') => self.start_replay(),
            _ => Vec::new(),
        }
    }

    fn quit(&mut self) -> Vec<FleetEffect> {
        self.quit = true;
        vec![FleetEffect::Quit]
    }

    fn goto(&mut self, s: FleetScreen) -> Vec<FleetEffect> {
        self.stack = vec![s];
        self.tenant = None;
        Vec::new()
    }

    fn move_sel(&mut self, by: isize) -> Vec<FleetEffect> {
        let (sel, n) = match self.screen() {
            FleetScreen::Nodes => (&mut self.node_sel, self.view.nodes.len()),
            FleetScreen::Tenants => {
                let n = self.view.tenant_rows().len();
                (&mut self.tenant_sel, n)
            }
            FleetScreen::Tenant { .. } => return Vec::new(),
        };
        let max = n.saturating_sub(1) as isize;
        *sel = (*sel as isize).saturating_add(by).clamp(0, max.max(0)) as usize;
        self.scroll();
        Vec::new()
    }

    /// The selected tenant row: (node, tenant id, paused).
    pub fn selected_tenant(&self) -> Option<(String, String, bool)> {
        self.view
            .tenant_rows()
            .get(self.tenant_sel)
            .map(|(node, _, t, paused)| ((*node).to_owned(), t.id.clone(), *paused))
    }

    /// The node selected on the nodes screen, with its status.
    pub fn selected_node(&self) -> Option<&(String, String, NodeStatus)> {
        self.view.nodes.get(self.node_sel)
    }

    fn open(&mut self) -> Vec<FleetEffect> {
        match self.screen() {
            FleetScreen::Nodes => {
                self.stack = vec![FleetScreen::Tenants];
                Vec::new()
            }
            FleetScreen::Tenants => {
                let Some((node, name, _)) = self.selected_tenant() else {
                    return Vec::new();
                };
                self.tenant = None;
                self.stack.push(FleetScreen::Tenant { name, node });
                self.tenant_fetch()
            }
            FleetScreen::Tenant { .. } => Vec::new(),
        }
    }

    /// `D` / `U` on the nodes screen: the guarded drain (undrain) of the
    /// selected node. Refused at once when the node does not answer, or
    /// already is in the state asked for.
    fn start_drain(&mut self, on: bool) -> Vec<FleetEffect> {
        if *self.screen() != FleetScreen::Nodes {
            self.status = "drain and undrain work on the nodes screen (1)".into();
            return Vec::new();
        }
        let Some((name, _, st)) = self.selected_node().cloned() else {
            return Vec::new();
        };
        let NodeStatus::Up { figures, .. } = &st else {
            self.status = format!(
                "node {} is not answering: nothing to send it",
                quoted(&name, 40)
            );
            return Vec::new();
        };
        let draining = figures.state.draining.is_some();
        if draining == on {
            self.status = if on {
                format!(
                    "node {} is already draining (U undrains)",
                    quoted(&name, 40)
                )
            } else {
                format!("node {} is not draining", quoted(&name, 40))
            };
            return Vec::new();
        }
        let scope = ActionScope::Drain {
            on,
            node: Some(name.clone()),
        };
        self.open_guard(name, scope)
    }

    /// The node and tenant an action on a tenant goes to: the selected row
    /// on the tenants list, the open tenant's node on its detail.
    fn tenant_target(&self) -> Option<(String, String, bool)> {
        match self.screen() {
            FleetScreen::Tenants => self.selected_tenant(),
            FleetScreen::Tenant { name, node } => {
                let paused = self
                    .view
                    .tenant_rows()
                    .iter()
                    .any(|(n, _, t, p)| *n == node && t.id == *name && *p);
                Some((node.clone(), name.clone(), paused))
            }
            FleetScreen::Nodes => None,
        }
    }

    /// `H` / `U` on the tenants list or a tenant: the guarded pause
    /// (resume) of the tenant on its node.
    fn start_pause(&mut self, resume: bool) -> Vec<FleetEffect> {
        let Some((node, tenant, paused)) = self.tenant_target() else {
            self.status = "pause and resume work on tenants (2)".into();
            return Vec::new();
        };
        if paused != resume {
            self.status = if resume {
                format!("{} is not paused on {node}", quoted(&tenant, 40))
            } else {
                format!("{} is already paused on {node}", quoted(&tenant, 40))
            };
            return Vec::new();
        }
        let t = PauseTarget {
            tenant: Some(tenant),
            sink: None,
        };
        let scope = if resume {
            ActionScope::Resume(t)
        } else {
            ActionScope::Pause(t)
        };
        self.open_guard(node, scope)
    }

    /// `A` on a tenant's detail: the guarded replay of every dead row of
    /// the tenant on the node it was opened from.
    fn start_replay(&mut self) -> Vec<FleetEffect> {
        let FleetScreen::Tenant { name, node } = self.screen().clone() else {
            self.status = "A replays a tenant's dead rows: open the tenant first".into();
            return Vec::new();
        };
        let scope = ActionScope::ReplayTenant {
            ord: 0,
            tenant: name,
        };
        self.open_guard(node, scope)
    }

    fn open_guard(&mut self, node: String, scope: ActionScope) -> Vec<FleetEffect> {
        self.overlays
            .push(Overlay::Guard(Box::new(Guard::new(scope.clone()))));
        self.guard_node = Some(node.clone());
        if scope.counts() {
            vec![FleetEffect::Fetch(FleetRequest::DryRun { node, scope })]
        } else {
            Vec::new()
        }
    }

    fn guard_next(&mut self, next: GuardNext) -> Vec<FleetEffect> {
        match next {
            GuardNext::Stay | GuardNext::Migrate => Vec::new(),
            GuardNext::Close { refresh } => {
                self.overlays.pop();
                self.guard_node = None;
                if refresh {
                    self.refresh()
                } else {
                    Vec::new()
                }
            }
            GuardNext::Fetch(req) => {
                let Some(node) = self.guard_node.clone() else {
                    return Vec::new();
                };
                match req {
                    Request::Execute(scope) => {
                        vec![FleetEffect::Fetch(FleetRequest::Execute { node, scope })]
                    }
                    Request::DryRun(scope) => {
                        vec![FleetEffect::Fetch(FleetRequest::DryRun { node, scope })]
                    }
                    _ => Vec::new(),
                }
            }
        }
    }
}
