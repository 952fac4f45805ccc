//! A fleet: several nodes, each one daemon reached through its admin API,
//! named in a fleet file (`FLEET.toml`, docs/fleet.md "The fleet console").
//!
//! This module owns three things, each used by the command line
//! (`ankusa tenants list --fleet`, `ankusa dlq list --fleet`) and the
//! console (`ankusa console --fleet`) alike:
//!
//! - [`Fleet::load`]: the file's format. Unknown fields, duplicate names, a
//!   node with both or neither of `socket` and `url`, `https://` (no TLS
//!   yet) and a TCP node without a token are refused, each error naming the
//!   file and the node.
//! - [`ask_all`]: one question to every node in parallel, each on its own
//!   thread with its own client, under one deadline: a node that hangs
//!   costs at most the fleet's `timeout`, never another node's answer.
//!   A node that did not answer in time is reported as unreachable; its
//!   thread ends by itself when its own request times out.
//! - The merges: [`FleetTenants`] and [`FleetDlq`] (rows with their node,
//!   and fleet totals that are the sum of the answering nodes' own
//!   node-aggregate counters, never of the rows listed), and [`FleetView`],
//!   the console's per-node state: up with its figures, or unreachable with
//!   its last-known figures and when they were fetched.
//!
//! Invariant: an unreachable node is always named (in [`NodeLine`], in
//! `unreachable`), never silently dropped from a total.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ankusa_store::queries::DlqOrder;
use ankusa_store::tenants::TenantInfo;
use ankusa_store::{Counters, Totals};
use serde::{Deserialize, Serialize};

use crate::client::{Client, Transport};
use crate::model::{DlqEntry, NodeState, Stats, TenantDetail, TenantsPage};
use crate::operator::Operator;
use crate::wire::{CountersJson, Opt, TenantInfoJson, TotalsJson};

/// How long one node may take to answer when the file says nothing.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a fleet file was refused.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("cannot read the fleet file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the fleet file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("the fleet file {path}, node {node:?}: {message}")]
    Node {
        path: PathBuf,
        node: String,
        message: String,
    },
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileForm {
    /// How long one node may take (a human duration).
    #[serde(default)]
    timeout: Option<String>,
    nodes: Vec<NodeForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeForm {
    name: String,
    #[serde(default)]
    socket: Option<PathBuf>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    token_file: Option<PathBuf>,
}

/// One node of the fleet: its name in the file, how to reach its admin
/// API, and the bearer token to send.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub transport: Transport,
    pub token: Option<String>,
}

// The token stays out of debug output and logs.
impl std::fmt::Debug for NodeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeSpec")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// A loaded fleet file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    pub path: PathBuf,
    /// How long one node may take to answer one question.
    pub timeout: Duration,
    /// In the file's order.
    pub nodes: Vec<NodeSpec>,
}

impl Fleet {
    /// Reads and checks `path`. A relative `socket` or `token_file` is
    /// relative to the file's directory.
    pub fn load(path: &Path) -> Result<Fleet, FleetError> {
        let text = std::fs::read_to_string(path).map_err(|source| FleetError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Fleet::parse(path, &text, base)
    }

    /// Checks the text of a fleet file (`path` names it in errors).
    pub fn parse(path: &Path, text: &str, base: &Path) -> Result<Fleet, FleetError> {
        let parse_err = |message: String| FleetError::Parse {
            path: path.to_owned(),
            message,
        };
        let form: FileForm = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
        let timeout = match &form.timeout {
            None => DEFAULT_TIMEOUT,
            Some(t) => humantime::parse_duration(t)
                .map_err(|e| parse_err(format!("timeout = {t:?}: {e}")))?,
        };
        if timeout.is_zero() || timeout > Duration::from_secs(60) {
            return Err(parse_err(format!(
                "timeout = {}: give 1ms to 60s",
                humantime::format_duration(timeout)
            )));
        }
        if form.nodes.is_empty() {
            return Err(parse_err(
                "no [[nodes]]: name at least one node with its socket or url".into(),
            ));
        }
        let mut seen = HashSet::new();
        let mut nodes = Vec::with_capacity(form.nodes.len());
        for n in form.nodes {
            let node_err = |message: String| FleetError::Node {
                path: path.to_owned(),
                node: n.name.clone(),
                message,
            };
            if !valid_name(&n.name) {
                return Err(node_err(
                    "name: give 1 to 64 of a-z A-Z 0-9 '-' '_' '.'".into(),
                ));
            }
            if !seen.insert(n.name.clone()) {
                return Err(node_err("name: two nodes have this name".into()));
            }
            let transport = match (&n.socket, &n.url) {
                (Some(s), None) => Transport::Unix(base.join(s)),
                (None, Some(u)) => Transport::Tcp(tcp_address(u).map_err(node_err)?),
                (Some(_), Some(_)) => {
                    return Err(node_err("give either socket or url, not both".into()))
                }
                (None, None) => {
                    return Err(node_err(
                        "give socket = \"/path/to/admin.sock\" or url = \"http://HOST:PORT\""
                            .into(),
                    ))
                }
            };
            let token = match (n.token.clone(), &n.token_file) {
                (Some(_), Some(_)) => {
                    return Err(node_err("give either token or token_file, not both".into()))
                }
                (Some(t), None) => Some(t),
                (None, Some(f)) => {
                    let file = base.join(f);
                    let t = std::fs::read_to_string(&file)
                        .map_err(|e| node_err(format!("token_file {}: {e}", file.display())))?;
                    Some(t.trim_end_matches(['\n', '\r']).to_owned())
                }
                (None, None) => None,
            };
            if matches!(transport, Transport::Tcp(_)) && token.is_none() {
                return Err(node_err(
                    "url: the admin API on TCP always requires a token; give token or token_file"
                        .into(),
                ));
            }
            nodes.push(NodeSpec {
                name: n.name,
                transport,
                token,
            });
        }
        Ok(Fleet {
            path: path.to_owned(),
            timeout,
            nodes,
        })
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

fn valid_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// `http://HOST:PORT` (an optional trailing `/`) to `HOST:PORT`.
fn tcp_address(url: &str) -> Result<String, String> {
    if url.starts_with("https://") {
        return Err(format!(
            "url = {url:?}: TLS is not supported yet; reach the node's admin socket over \
             `ssh -L` (socket = ...), or its admin.listen over http:// on a trusted network"
        ));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!("url = {url:?}: give http://HOST:PORT"));
    };
    let addr = rest.strip_suffix('/').unwrap_or(rest);
    let port_ok = addr
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
    if !port_ok || addr.contains('/') {
        return Err(format!(
            "url = {url:?}: give http://HOST:PORT (no path; the admin routes are known)"
        ));
    }
    Ok(addr.to_owned())
}

/// The operator of one node: its daemon, through its admin API, each
/// request bounded by the fleet's timeout.
pub fn operator(fleet: &Fleet, node: &NodeSpec) -> crate::Result<Operator> {
    let c = Client::new(node.transport.clone(), node.token.clone(), fleet.timeout)?;
    Ok(Operator::Daemon(c))
}

/// One node's answer to a question put to the whole fleet.
#[derive(Debug, Clone)]
pub struct Answer<T> {
    pub node: String,
    pub endpoint: String,
    /// The node's answer, or why there is none (an unreachable node).
    pub result: Result<T, String>,
    /// How long it took (the deadline, for a node that did not answer).
    pub took: Duration,
}

/// Asks every node `ask` in parallel and waits at most the fleet's
/// timeout: the answers in the file's order, an unreachable node's with
/// its error. A node's thread that is still waiting when the deadline
/// passes is left to end on its own client timeout; its answer is dropped.
pub fn ask_all<T, F>(fleet: &Fleet, ask: F) -> Vec<Answer<T>>
where
    T: Send + 'static,
    F: Fn(&Operator) -> crate::Result<T> + Send + Sync + 'static,
{
    let ask = Arc::new(ask);
    let (tx, rx) = mpsc::channel::<(usize, Result<T, String>, Duration)>();
    let t0 = Instant::now();
    let mut answers: Vec<Answer<T>> = fleet
        .nodes
        .iter()
        .map(|n| Answer {
            node: n.name.clone(),
            endpoint: n.transport.to_string(),
            result: Err(format!(
                "no answer within {}",
                humantime::format_duration(fleet.timeout)
            )),
            took: fleet.timeout,
        })
        .collect();
    for (i, n) in fleet.nodes.iter().enumerate() {
        let (tx, ask, n, fleet) = (tx.clone(), ask.clone(), n.clone(), fleet.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("ankusa-fleet-{}", n.name))
            .spawn(move || {
                let r = operator(&fleet, &n)
                    .and_then(|op| ask(&op))
                    .map_err(|e| e.to_string());
                let _ = tx.send((i, r, t0.elapsed()));
            });
        if let (Err(e), Some(a)) = (spawned, answers.get_mut(i)) {
            a.result = Err(format!("cannot start a thread to ask it: {e}"));
            a.took = Duration::ZERO;
        }
    }
    drop(tx);
    let deadline = t0 + fleet.timeout;
    let mut pending = answers.iter().filter(|a| a.took > Duration::ZERO).count();
    while pending > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, r, took)) => {
                if let Some(a) = answers.get_mut(i) {
                    a.result = r;
                    a.took = took;
                }
                pending -= 1;
            }
            Err(_) => break,
        }
    }
    answers
}

/// What the fleet's views ask each node on every refresh: its stats, its
/// drain state, and its top tenants by `sort` (or the first by ordinal).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFigures {
    pub stats: Stats,
    pub state: NodeState,
    pub tenants: TenantsPage,
}

/// Asks every node for its [`NodeFigures`], `limit` tenants each.
pub fn survey(fleet: &Fleet, sort: Option<String>, limit: usize) -> Vec<Answer<NodeFigures>> {
    ask_all(fleet, move |op| {
        Ok(NodeFigures {
            stats: op.stats()?,
            state: op.node()?,
            tenants: op.tenants_page(sort.as_deref(), None, limit)?,
        })
    })
}

/// One node in a fleet answer (`--json`): reachable with its figures, or
/// not, with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeLine {
    pub name: String,
    pub endpoint: String,
    pub reachable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The node's own id (`[node] id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub draining: bool,
    /// Its node-aggregate counters (what `ankusa store info` shows).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<CountersJson>"
    )]
    pub counters: Option<Counters>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<TotalsJson>"
    )]
    pub totals: Option<Totals>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenants: Option<u32>,
    /// More tenants than listed: the rows are each node's first `limit`.
    #[serde(default)]
    pub more: bool,
}

impl NodeLine {
    fn unreachable(name: &str, endpoint: &str, error: &str) -> NodeLine {
        NodeLine {
            name: name.to_owned(),
            endpoint: endpoint.to_owned(),
            reachable: false,
            error: Some(error.to_owned()),
            id: None,
            draining: false,
            counters: None,
            totals: None,
            tenants: None,
            more: false,
        }
    }
}

/// A tenant row with the node it is on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetTenant {
    pub node: String,
    #[serde(flatten, with = "TenantInfoJson")]
    pub tenant: TenantInfo,
    #[serde(default)]
    pub paused: bool,
}

/// `ankusa tenants list --fleet --json`: every node's tenants with their
/// node, and the fleet's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetTenants {
    pub nodes: Vec<NodeLine>,
    pub tenants: Vec<FleetTenant>,
    /// The sum of the answering nodes' node-aggregate counters.
    #[serde(with = "CountersJson")]
    pub totals: Counters,
    /// The sum of their cumulative totals.
    #[serde(with = "TotalsJson")]
    pub cumulative: Totals,
    /// Nodes that did not answer (their figures are in no total).
    pub unreachable: Vec<String>,
}

/// Adds `b` into `a`, field by field.
pub fn add_counters(a: &mut Counters, b: &Counters) {
    a.pending += b.pending;
    a.scheduled += b.scheduled;
    a.inflight += b.inflight;
    a.dead += b.dead;
    a.bytes += b.bytes;
    a.archive_pending += b.archive_pending;
}

fn add_totals(a: &mut Totals, b: &Totals) {
    a.accepted += b.accepted;
    a.delivered += b.delivered;
    a.retried += b.retried;
    a.dead_lettered += b.dead_lettered;
}

/// Merges a survey: rows in the order of `sort` (largest first, then node
/// and ordinal), else by node in the file's order, then ordinal.
pub fn merge_tenants(answers: &[Answer<NodeFigures>], sort: Option<&str>) -> FleetTenants {
    let mut out = FleetTenants {
        nodes: Vec::new(),
        tenants: Vec::new(),
        totals: Counters::default(),
        cumulative: Totals::default(),
        unreachable: Vec::new(),
    };
    for a in answers {
        match &a.result {
            Ok(f) => {
                add_counters(&mut out.totals, &f.stats.node);
                add_totals(&mut out.cumulative, &f.stats.totals);
                out.nodes.push(line_of(&a.node, &a.endpoint, f));
                out.tenants
                    .extend(f.tenants.tenants.iter().map(|t| FleetTenant {
                        node: a.node.clone(),
                        paused: f.tenants.paused.contains(&t.id),
                        tenant: t.clone(),
                    }));
            }
            Err(e) => {
                out.unreachable.push(a.node.clone());
                out.nodes
                    .push(NodeLine::unreachable(&a.node, &a.endpoint, e));
            }
        }
    }
    let field = sort.and_then(ankusa_store::counters::Field::parse);
    if let Some(field) = field {
        // A stable sort keeps the node order, then the ordinal, among equals.
        out.tenants
            .sort_by_key(|t| std::cmp::Reverse(t.tenant.counters.get(field)));
    }
    out
}

fn line_of(name: &str, endpoint: &str, f: &NodeFigures) -> NodeLine {
    NodeLine {
        name: name.to_owned(),
        endpoint: endpoint.to_owned(),
        reachable: true,
        error: None,
        id: f.state.node.as_ref().map(|n| n.to_string()),
        draining: f.state.draining.is_some(),
        counters: Some(f.stats.node),
        totals: Some(f.stats.totals),
        tenants: Some(f.stats.tenants),
        more: f.tenants.next.is_some(),
    }
}

/// A DLQ row with the node it is on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetDlqEntry {
    pub node: String,
    #[serde(flatten)]
    pub entry: DlqEntry,
}

/// `ankusa dlq list --fleet --json`: each node's page, merged newest
/// (or oldest) first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetDlq {
    pub nodes: Vec<NodeLine>,
    pub entries: Vec<FleetDlqEntry>,
    pub unreachable: Vec<String>,
}

/// Asks every node for its first `limit` dead rows (of `tenant`, when
/// given) and merges them by dead-letter time, cut to `limit`.
pub fn dlq(
    fleet: &Fleet,
    tenant: Option<String>,
    order: DlqOrder,
    limit: usize,
    filter: crate::reads::DlqFilter,
) -> FleetDlq {
    let answers = ask_all(fleet, move |op| {
        op.dlq(tenant.as_deref(), order, None, limit, &filter)
    });
    let mut out = FleetDlq {
        nodes: Vec::new(),
        entries: Vec::new(),
        unreachable: Vec::new(),
    };
    for a in answers {
        match a.result {
            Ok(page) => {
                let mut line = NodeLine::unreachable(&a.node, &a.endpoint, "");
                line.reachable = true;
                line.error = None;
                line.more = page.next.is_some();
                out.nodes.push(line);
                out.entries
                    .extend(page.entries.into_iter().map(|entry| FleetDlqEntry {
                        node: a.node.clone(),
                        entry,
                    }));
            }
            Err(e) => {
                out.unreachable.push(a.node.clone());
                out.nodes
                    .push(NodeLine::unreachable(&a.node, &a.endpoint, &e));
            }
        }
    }
    match order {
        DlqOrder::NewestFirst => out
            .entries
            .sort_by_key(|e| std::cmp::Reverse((e.entry.row.at, e.entry.row.seq))),
        DlqOrder::OldestFirst => out
            .entries
            .sort_by_key(|e| (e.entry.row.at, e.entry.row.seq)),
    }
    out.entries.truncate(limit);
    out
}

/// A tenant as one node holds it: its detail and the first page of its
/// dead rows there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantOnNode {
    pub detail: TenantDetail,
    pub dlq: Vec<DlqEntry>,
    /// More dead rows there than listed.
    pub more: bool,
}

/// Asks the nodes named in `nodes` (those that hold rows of `tenant`: its
/// owner, and after a move the node it left) for the tenant, with its
/// first `dlq_limit` dead rows, newest first.
pub fn tenant(
    fleet: &Fleet,
    tenant: &str,
    nodes: &[String],
    dlq_limit: usize,
) -> Vec<Answer<TenantOnNode>> {
    let mut some = fleet.clone();
    some.nodes.retain(|n| nodes.contains(&n.name));
    let tenant = tenant.to_owned();
    ask_all(&some, move |op| {
        let page = op.dlq(
            Some(&tenant),
            DlqOrder::NewestFirst,
            None,
            dlq_limit,
            &crate::reads::DlqFilter::default(),
        )?;
        Ok(TenantOnNode {
            detail: op.tenant(&tenant)?,
            more: page.next.is_some(),
            dlq: page.entries,
        })
    })
}

/// What the console knows of one node.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeStatus {
    /// Never answered yet (the first survey is outstanding).
    Unknown,
    Up {
        figures: Box<NodeFigures>,
        /// When these figures arrived (ms).
        fetched_at: u64,
        /// The previous answer's cumulative totals and when: two readings
        /// give rates.
        previous: Option<(Totals, u64)>,
    },
    Unreachable {
        error: String,
        /// Its last answer and when it arrived, if it ever answered.
        last_known: Option<(Box<NodeFigures>, u64)>,
    },
}

/// The console's fleet: every node in the file's order with its status.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetView {
    pub nodes: Vec<(String, String, NodeStatus)>,
}

/// Rows per second, from two readings of a node's cumulative totals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeRates {
    pub accepted: f64,
    pub delivered: f64,
}

impl FleetView {
    pub fn new(fleet: &Fleet) -> FleetView {
        FleetView {
            nodes: fleet
                .nodes
                .iter()
                .map(|n| (n.name.clone(), n.transport.to_string(), NodeStatus::Unknown))
                .collect(),
        }
    }

    /// Takes a survey's answers, received at `now`: a node that answered
    /// is up with them, one that did not keeps its last-known figures.
    pub fn apply(&mut self, answers: Vec<Answer<NodeFigures>>, now: u64) {
        for a in answers {
            let Some((_, endpoint, st)) = self.nodes.iter_mut().find(|(n, ..)| *n == a.node) else {
                continue;
            };
            *endpoint = a.endpoint;
            let last = match std::mem::replace(st, NodeStatus::Unknown) {
                NodeStatus::Up {
                    figures,
                    fetched_at,
                    ..
                } => Some((figures, fetched_at)),
                NodeStatus::Unreachable { last_known, .. } => last_known,
                NodeStatus::Unknown => None,
            };
            *st = match a.result {
                Ok(f) => NodeStatus::Up {
                    figures: Box::new(f),
                    fetched_at: now,
                    previous: last.map(|(f, at)| (f.stats.totals, at)),
                },
                Err(error) => NodeStatus::Unreachable {
                    error,
                    last_known: last,
                },
            };
        }
    }

    /// The figures to show for a node (its last-known ones when it does not
    /// answer) and when they were fetched.
    pub fn figures(st: &NodeStatus) -> Option<(&NodeFigures, u64)> {
        match st {
            NodeStatus::Up {
                figures,
                fetched_at,
                ..
            } => Some((figures, *fetched_at)),
            NodeStatus::Unreachable {
                last_known: Some((f, at)),
                ..
            } => Some((f, *at)),
            _ => None,
        }
    }

    /// A node's rates over its last two answers; none before two.
    pub fn rates(st: &NodeStatus) -> Option<NodeRates> {
        let NodeStatus::Up {
            figures,
            fetched_at,
            previous: Some((before, at)),
        } = st
        else {
            return None;
        };
        let dt = fetched_at.checked_sub(*at).filter(|d| *d > 0)? as f64 / 1000.0;
        let now = &figures.stats.totals;
        let per_s = |a: u64, b: u64| a.checked_sub(b).map(|d| d as f64 / dt);
        Some(NodeRates {
            accepted: per_s(now.accepted, before.accepted)?,
            delivered: per_s(now.delivered, before.delivered)?,
        })
    }

    /// The sum of the node-aggregate counters of the nodes that answered,
    /// and how many of them did.
    pub fn totals(&self) -> (Counters, usize) {
        let mut c = Counters::default();
        let mut up = 0;
        for (_, _, st) in &self.nodes {
            if let NodeStatus::Up { figures, .. } = st {
                add_counters(&mut c, &figures.stats.node);
                up += 1;
            }
        }
        (c, up)
    }

    /// Every node's tenant rows (an unreachable node's last-known ones),
    /// most pending first (then the file's node order, then ordinal): the
    /// order each node is surveyed in, so the merge of every node's top
    /// rows is the fleet's top rows,
    /// each with its node's name and whether its figures are current.
    pub fn tenant_rows(&self) -> Vec<(&str, bool, &TenantInfo, bool)> {
        let mut rows = Vec::new();
        for (name, _, st) in &self.nodes {
            let current = matches!(st, NodeStatus::Up { .. });
            if let Some((f, _)) = FleetView::figures(st) {
                for t in &f.tenants.tenants {
                    let paused = f.tenants.paused.contains(&t.id);
                    rows.push((name.as_str(), current, t, paused));
                }
            }
        }
        rows.sort_by_key(|(_, _, t, _)| std::cmp::Reverse(t.counters.pending));
        rows
    }

    /// The nodes whose (current or last-known) rows list `tenant`.
    pub fn holders(&self, tenant: &str) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, _, st)| {
                FleetView::figures(st)
                    .is_some_and(|(f, _)| f.tenants.tenants.iter().any(|t| t.id == tenant))
            })
            .map(|(n, ..)| n.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests;
