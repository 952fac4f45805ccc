//! The fleet console's workers: each request runs on a thread of its own,
//! so a survey, a tenant's detail and an action never wait for one
//! another, and the UI thread never waits for any of them. A survey is
//! bounded by the fleet's timeout ([`ankusa_ops::fleet::ask_all`]); an
//! action by its node client's timeout per request.

use std::sync::mpsc;

use ankusa_ops::fleet::{self, Fleet};

use super::{FleetReply, FleetRequest, TENANTS_PER_NODE};
use crate::data::actions::{act_on, count_on};
use crate::data::Progress;

/// What a worker sends back.
#[derive(Debug)]
pub enum FleetEvent {
    Reply(FleetReply),
    Progress(Progress),
}

/// Runs `req` on a new thread; its reply (and an action's progress) come
/// back on `tx`.
pub fn spawn(
    fleet: &Fleet,
    req: FleetRequest,
    tx: mpsc::Sender<FleetEvent>,
    log: &tracing::Dispatch,
) -> std::io::Result<()> {
    let fleet = fleet.clone();
    let log = log.clone();
    std::thread::Builder::new()
        .name("ankusa-fleet-fetch".into())
        .spawn(move || {
            let _guard = tracing::dispatcher::set_default(&log);
            let reply = answer(&fleet, req, &tx);
            let _ = tx.send(FleetEvent::Reply(reply));
        })
        .map(|_| ())
}

/// Answers one request (on the calling thread).
pub fn answer(fleet: &Fleet, req: FleetRequest, tx: &mpsc::Sender<FleetEvent>) -> FleetReply {
    match req {
        FleetRequest::Survey => {
            let answers = fleet::survey(fleet, Some("pending".into()), TENANTS_PER_NODE);
            for a in &answers {
                if let Err(e) = &a.result {
                    tracing::warn!(target: "console", "node {}: {e}", a.node);
                }
            }
            FleetReply::Survey(answers)
        }
        FleetRequest::Tenant { name, nodes } => FleetReply::Tenant {
            answers: fleet::tenant(fleet, &name, &nodes, super::DLQ_PER_NODE),
            name,
        },
        FleetRequest::DryRun { node, scope } => {
            let r = on_node(fleet, &node)
                .and_then(|op| count_on(&op, &scope).map_err(|e| e.to_string()));
            FleetReply::DryRun(scope, r)
        }
        FleetRequest::Execute { node, scope } => {
            let r = on_node(fleet, &node).and_then(|op| {
                act_on(&op, &scope, &mut |p| {
                    let _ = tx.send(FleetEvent::Progress(p));
                })
                .map_err(|e| e.to_string())
            });
            match &r {
                Ok(_) => tracing::info!(target: "console", "node {node}: {}", scope.describe()),
                Err(e) => {
                    tracing::warn!(target: "console", "node {node}: {}: {e}", scope.describe())
                }
            }
            FleetReply::Done(r)
        }
    }
}

fn on_node(fleet: &Fleet, node: &str) -> Result<ankusa_ops::operator::Operator, String> {
    let spec = fleet
        .node(node)
        .ok_or_else(|| format!("no node {node:?} in {}", fleet.path.display()))?;
    fleet::operator(fleet, spec).map_err(|e| e.to_string())
}
