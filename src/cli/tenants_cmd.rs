//! `ankusa tenants list|show`: counters only, never a fold.

use std::process::ExitCode;

use ankusa_store::tenants::{self, Name};
use ankusa_store::{queries, Field, Store};
use color_eyre::eyre::{bail, Result};

use super::{print_json, TenantsCommand};
use crate::output;

pub fn run(cmd: TenantsCommand) -> Result<ExitCode> {
    match cmd {
        TenantsCommand::List {
            store,
            sort,
            limit,
            after,
            json,
        } => {
            let s = Store::open_read_only(&store.store)?;
            let list = match sort.as_deref() {
                Some(f) => {
                    let Some(field) = Field::parse(f) else {
                        bail!("unknown counter {f:?}");
                    };
                    tenants::top_by(&s, field, limit)?
                }
                None => tenants::page(&s, after, limit)?,
            };
            if json {
                print_json(&list)?;
            } else {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|t| {
                        let c = &t.counters;
                        vec![
                            t.id.clone(),
                            t.ord.to_string(),
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
                            "tenant",
                            "ord",
                            "pending",
                            "scheduled",
                            "inflight",
                            "dead",
                            "bytes"
                        ],
                        &rows
                    )
                );
                if sort.is_none() && list.len() == limit {
                    if let Some(last) = list.last() {
                        eprintln!("more: --after {}", last.ord);
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        TenantsCommand::Show {
            tenant,
            store,
            json,
        } => {
            let s = Store::open_read_only(&store.store)?;
            let Some(ord) = tenants::ord_of(&s, &tenant)? else {
                bail!("no tenant {tenant:?} in {}", store.store.display());
            };
            if let Some(Name::Erased) = tenants::name_of(&s, ord)? {
                bail!("tenant {tenant:?} was erased");
            }
            let now = ankusa_store::system_now_ms();
            let counters = queries::counters(&s, ord)?;
            let first = queries::first_due(&s, ord)?;
            let dlq = queries::dlq_page_for_tenant(&s, ord, None, 5)?;
            if json {
                print_json(&serde_json::json!({
                    "tenant": tenant,
                    "ord": ord,
                    "counters": counters,
                    "first_due_at": first.map(|r| r.at),
                    "oldest_due_age_ms": first.map(|r| now.saturating_sub(r.at)),
                    "latest_dead": dlq.entries,
                }))?;
            } else {
                println!("tenant       {tenant} (ordinal {ord})");
                println!(
                    "queue        pending {}  scheduled {}  inflight {}  dead {}  bytes {}  archive pending {}",
                    counters.pending,
                    counters.scheduled,
                    counters.inflight,
                    counters.dead,
                    output::bytes(counters.bytes),
                    counters.archive_pending
                );
                match first {
                    Some(r) if r.at <= now => {
                        println!("oldest due   {} ago", output::age(now - r.at))
                    }
                    Some(r) => println!("next due     in {}", output::age(r.at - now)),
                    None => println!("oldest due   none"),
                }
                if !dlq.entries.is_empty() {
                    println!("latest dead");
                    for d in &dlq.entries {
                        println!(
                            "  {}  sink {}  {} ago  source {}",
                            d.hook_id,
                            d.sink,
                            output::age(now.saturating_sub(d.at)),
                            d.source_id
                        );
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
