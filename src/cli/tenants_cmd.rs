//! `ankusa tenants list|show|purge`: counters only, never a fold; through
//! the daemon when one runs ([`super::backend`]).

use std::process::ExitCode;

use color_eyre::eyre::{eyre, Result};

use super::backend::{self, LIST_HINT};
use super::TenantsCommand;
use crate::failure;
use crate::output;
use crate::output::print_json;
use ankusa_ops::model::{DlqEntry, TenantDetail, TenantsPage};
use ankusa_ops::operator::Action;

pub fn run(cmd: TenantsCommand) -> Result<ExitCode> {
    match cmd {
        TenantsCommand::List {
            store,
            fleet,
            admin,
            sort,
            limit,
            cursor,
            after,
            json,
        } => {
            if let Some(fleet) = fleet {
                return super::fleet_cmd::tenants(&fleet, sort, limit, json);
            }
            let Some(store) = store else {
                return Err(failure::usage("give --store DIR or --fleet FLEET.toml"));
            };
            let b = backend::open(&store, admin.token, false)?;
            let cursor = cursor.or(after.map(|a| a.to_string()));
            let page = b.tenants_page(sort.as_deref(), cursor.as_deref(), limit)?;
            if json {
                print_json(&page)?;
            } else {
                print!("{}", tenants_table(&page));
                if let Some(next) = &page.next {
                    eprintln!("more: --cursor {next}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        TenantsCommand::Show {
            tenant,
            store,
            admin,
            json,
        } => {
            let b = backend::open(&store.store, admin.token, false)?;
            let t = b
                .tenant(&tenant)
                .map_err(|e| failure::if_not_found(e, LIST_HINT))?;
            if json {
                print_json(&t)?;
            } else {
                print!("{}", tenant_text(&t, ankusa_store::system_now_ms()));
            }
            Ok(ExitCode::SUCCESS)
        }
        TenantsCommand::Purge {
            tenant,
            store,
            admin,
            kinds,
            dry_run,
            yes,
            json,
        } => {
            let kinds = ankusa_ops::jobs::parse_kinds(&kinds)?;
            let b = backend::open(&store.store, admin.token, true)?;
            let Action::Counted(count) = b
                .purge(&tenant, kinds, true)
                .map_err(|e| failure::if_not_found(e, LIST_HINT))?
            else {
                return Err(eyre!("the dry run started a job"));
            };
            if dry_run {
                if json {
                    print_json(&count)?;
                } else {
                    println!(
                        "dry run: purge {} would delete {} rows ({}) via {}",
                        count.scope,
                        count.rows,
                        purge_breakdown(&count),
                        b.describe()
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            if !yes {
                eprintln!(
                    "purge {}: {} rows ({}) via {}",
                    count.scope,
                    count.rows,
                    purge_breakdown(&count),
                    b.describe()
                );
                backend::confirm(
                    &format!("type the tenant's name ({tenant}) to delete them: "),
                    &tenant,
                )?;
            }
            backend::finish_leftovers(&b)?;
            let Action::Started(job) = b.purge(&tenant, kinds, false)? else {
                return Err(eyre!("the purge did not start a job"));
            };
            let done = backend::finish(&b, *job)?;
            if json {
                print_json(&done)?;
            } else {
                let p = done.progress.purged;
                println!(
                    "job {} {}: purged {} rows of tenant {tenant} (pending {}, scheduled {}, dead {})",
                    done.id,
                    backend::state(&done),
                    p.total(),
                    p.pending,
                    p.scheduled,
                    p.dead
                );
            }
            Ok(backend::exit_code(&done))
        }
        TenantsCommand::Pause {
            tenant,
            scope,
            store,
            admin,
            json,
        } => super::pause_cmd::pause(Some(tenant), scope.sink, &store, admin, json),
        TenantsCommand::Resume {
            tenant,
            scope,
            store,
            admin,
            json,
        } => super::pause_cmd::resume(Some(tenant), scope.sink, &store, admin, json),
        TenantsCommand::Policy(c) => super::policy_cmd::policy(c),
    }
}

fn purge_breakdown(d: &ankusa_ops::model::DryRun) -> String {
    match d.purge {
        Some(p) => format!(
            "pending {}, scheduled {}, dead {}",
            p.pending, p.scheduled, p.dead
        ),
        None => String::new(),
    }
}

fn tenants_table(page: &TenantsPage) -> String {
    let rows: Vec<Vec<String>> = page
        .tenants
        .iter()
        .map(|t| {
            let c = &t.counters;
            vec![
                if page.policies.contains(&t.id) {
                    format!("{} *", t.id)
                } else {
                    t.id.clone()
                },
                t.ord.to_string(),
                c.pending.to_string(),
                c.scheduled.to_string(),
                c.inflight.to_string(),
                c.dead.to_string(),
                output::bytes(c.bytes),
            ]
        })
        .collect();
    output::table(
        &[
            "tenant",
            "ord",
            "pending",
            "scheduled",
            "inflight",
            "dead",
            "bytes",
        ],
        &rows,
    )
}

fn tenant_text(t: &TenantDetail, now: u64) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let c = &t.counters;
    let _ = writeln!(o, "tenant       {} (ordinal {})", t.tenant, t.ord);
    let _ = writeln!(
        o,
        "queue        pending {}  scheduled {}  inflight {}  dead {}  bytes {}  archive pending {}",
        c.pending,
        c.scheduled,
        c.inflight,
        c.dead,
        output::bytes(c.bytes),
        c.archive_pending
    );
    match t.first_due_at {
        Some(at) if at <= now => {
            let _ = writeln!(o, "oldest due   {} ago", output::age(now - at));
        }
        Some(at) => {
            let _ = writeln!(o, "next due     in {}", output::age(at - now));
        }
        None => {
            let _ = writeln!(o, "oldest due   none");
        }
    }
    if let Some(p) = &t.policy {
        let _ = writeln!(
            o,
            "policy       {} (set by {}, {} ago)",
            p.policy,
            p.by,
            output::age(now.saturating_sub(p.at))
        );
    }
    if !t.latest_dead.is_empty() {
        let _ = writeln!(o, "latest dead");
        for d in &t.latest_dead {
            let _ = writeln!(o, "  {}", dead_line(d, now));
        }
    }
    o
}

/// One DLQ row as a line: id, sink (`SOURCE/NAME`), age.
pub fn dead_line(d: &DlqEntry, now: u64) -> String {
    format!(
        "{}  sink {}  {} ago",
        d.row.hook_id,
        output::sink_label(&d.sink_name, d.row.sink),
        output::age(now.saturating_sub(d.row.at)),
    )
}
