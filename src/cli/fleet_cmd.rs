//! `ankusa tenants list --fleet` and `ankusa dlq list --fleet`: every node
//! of a fleet file asked at once ([`ankusa_ops::fleet`]), the answers
//! printed with a node column. A node that does not answer is named on
//! stderr and in the JSON (`unreachable`), and the command exits 4 after
//! printing what the other nodes said: a script never mistakes a partial
//! fleet for a whole one.

use std::path::Path;
use std::process::ExitCode;

use ankusa_ops::fleet::{self, Fleet, NodeLine};
use ankusa_store::queries::DlqOrder;
use color_eyre::eyre::Result;

use crate::failure::Exit;
use crate::output::{self, print_json};

pub fn tenants(path: &Path, sort: Option<String>, limit: usize, json: bool) -> Result<ExitCode> {
    let f = Fleet::load(path)?;
    let answers = fleet::survey(&f, sort.clone(), limit);
    let m = fleet::merge_tenants(&answers, sort.as_deref());
    if json {
        print_json(&m)?;
    } else {
        let rows: Vec<Vec<String>> = m
            .tenants
            .iter()
            .map(|t| {
                let c = &t.tenant.counters;
                vec![
                    t.node.clone(),
                    t.tenant.id.clone(),
                    c.pending.to_string(),
                    c.scheduled.to_string(),
                    c.inflight.to_string(),
                    c.dead.to_string(),
                    output::bytes(c.bytes),
                ]
            })
            .collect();
        print!(
            "{}",
            output::table(
                &[
                    "node",
                    "tenant",
                    "pending",
                    "scheduled",
                    "inflight",
                    "dead",
                    "bytes"
                ],
                &rows
            )
        );
        let up = m.nodes.len() - m.unreachable.len();
        let t = &m.totals;
        println!(
            "fleet totals ({up} of {} nodes): pending {}  scheduled {}  inflight {}  dead {}  bytes {}",
            m.nodes.len(),
            t.pending,
            t.scheduled,
            t.inflight,
            t.dead,
            output::bytes(t.bytes)
        );
        for n in m.nodes.iter().filter(|n| n.reachable && n.more) {
            eprintln!(
                "more: node {} has more tenants than --limit {limit} shows",
                n.name
            );
        }
    }
    Ok(unreachable(&m.nodes))
}

pub fn dlq(
    path: &Path,
    tenant: Option<String>,
    order: DlqOrder,
    limit: usize,
    filter: ankusa_ops::reads::DlqFilter,
    json: bool,
) -> Result<ExitCode> {
    let f = Fleet::load(path)?;
    let m = fleet::dlq(&f, tenant, order, limit, filter);
    if json {
        print_json(&m)?;
    } else {
        let now = ankusa_store::system_now_ms();
        let rows: Vec<Vec<String>> = m
            .entries
            .iter()
            .map(|e| {
                vec![
                    e.node.clone(),
                    e.entry.row.hook_id.clone(),
                    e.entry.tenant.clone(),
                    output::dlq_sink(&e.entry.sink_name, &e.entry.row.source_id, e.entry.row.sink),
                    format!("{} ago", output::age(now.saturating_sub(e.entry.row.at))),
                    e.entry.row.event_type.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        print!(
            "{}",
            output::table(&["node", "hook", "tenant", "sink", "dead", "type"], &rows)
        );
    }
    Ok(unreachable(&m.nodes))
}

/// Names every node that did not answer on stderr; exit 4 if any.
fn unreachable(nodes: &[NodeLine]) -> ExitCode {
    let mut any = false;
    for n in nodes.iter().filter(|n| !n.reachable) {
        any = true;
        eprintln!(
            "ankusa: node {} ({}) is unreachable: {}",
            n.name,
            n.endpoint,
            n.error.as_deref().unwrap_or("no answer")
        );
    }
    if any {
        Exit::Unavailable.code()
    } else {
        ExitCode::SUCCESS
    }
}
