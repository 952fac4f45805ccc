//! `ankusa dlq list|show|replay`: the dead-letter queue, through the
//! daemon when one runs ([`super::backend`]).

use std::process::ExitCode;
use std::time::SystemTime;

use color_eyre::eyre::{eyre, Result};

use super::backend;
use super::backend::LIST_HINT;
use super::DlqCommand;
use crate::failure;
use crate::output;
use crate::output::print_json;
use ankusa_ops::model::{DlqDetail, ReplayRequest};
use ankusa_ops::operator::Action;

fn ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub fn run(cmd: DlqCommand) -> Result<ExitCode> {
    match cmd {
        DlqCommand::List {
            store,
            fleet,
            admin,
            tenant,
            oldest,
            event_type,
            limit,
            cursor,
            json,
        } => {
            let order = if oldest {
                ankusa_store::queries::DlqOrder::OldestFirst
            } else {
                ankusa_store::queries::DlqOrder::NewestFirst
            };
            if let Some(p) = &event_type {
                ankusa_ops::event_type::Pattern::parse(p)
                    .map_err(|m| failure::usage(format!("--event-type {m}")))?;
            }
            let filter = ankusa_ops::reads::DlqFilter {
                sink: None,
                event_type,
            };
            if let Some(fleet) = fleet {
                return super::fleet_cmd::dlq(&fleet, tenant, order, limit, filter, json);
            }
            let Some(store) = store else {
                return Err(failure::usage("give --store DIR or --fleet FLEET.toml"));
            };
            let b = backend::open(&store, admin.token, false)?;
            let page = b
                .dlq(tenant.as_deref(), order, cursor.as_deref(), limit, &filter)
                .map_err(|e| failure::if_not_found(e, LIST_HINT))?;
            if json {
                print_json(&page)?;
            } else {
                let now = ankusa_store::system_now_ms();
                // The type column only where types exist: a relay that does
                // not route keeps the table it had.
                let typed = filter.event_type.is_some()
                    || page.entries.iter().any(|e| e.row.event_type.is_some());
                let rows: Vec<Vec<String>> = page
                    .entries
                    .iter()
                    .map(|e| {
                        let mut r = vec![
                            e.row.hook_id.clone(),
                            e.tenant.clone(),
                            output::dlq_sink(&e.sink_name, &e.row.source_id, e.row.sink),
                            format!("{} ago", output::age(now.saturating_sub(e.row.at))),
                        ];
                        if typed {
                            r.push(e.row.event_type.clone().unwrap_or_else(|| "-".into()));
                        }
                        r
                    })
                    .collect();
                let head: &[&str] = if typed {
                    &["hook", "tenant", "sink", "dead", "type"]
                } else {
                    &["hook", "tenant", "sink", "dead"]
                };
                print!("{}", output::table(head, &rows));
                if let Some(next) = &page.next {
                    eprintln!("more: --cursor {next}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        DlqCommand::Show {
            id,
            store,
            admin,
            json,
        } => {
            let b = backend::open(&store.store, admin.token, false)?;
            let d = b
                .dlq_entry(&id)
                .map_err(|e| failure::if_not_found(e, "`ankusa dlq list` shows the dead hooks"))?;
            if json {
                print_json(&d)?;
            } else {
                print!("{}", detail_text(&d, ankusa_store::system_now_ms()));
            }
            Ok(ExitCode::SUCCESS)
        }
        DlqCommand::Replay {
            store,
            admin,
            ids,
            rows,
            tenant,
            since,
            from,
            until,
            dry_run,
            yes,
            json,
        } => {
            let now = ankusa_store::system_now_ms();
            let from = match (since, from) {
                (Some(d), _) => Some(now.saturating_sub(
                    u64::try_from(std::time::Duration::from(d).as_millis()).unwrap_or(u64::MAX),
                )),
                (None, Some(t)) => Some(ms(t.into())),
                (None, None) => None,
            };
            let req = ReplayRequest {
                ids,
                rows,
                tenant,
                from,
                to: until.map(|t| ms(t.into())),
                dry_run,
            };
            let b = backend::open(&store.store, admin.token, true)?;
            let Action::Counted(count) = b
                .replay(req.clone(), true)
                .map_err(|e| failure::if_not_found(e, "`ankusa dlq list` shows the dead rows"))?
            else {
                return Err(eyre!("the dry run started a job"));
            };
            if dry_run {
                if json {
                    print_json(&count)?;
                } else {
                    println!(
                        "dry run: replay {} would make {} dead rows due again via {}",
                        count.scope,
                        count.rows,
                        b.describe()
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            if !yes {
                eprintln!(
                    "replay {}: {} dead rows become due again via {}",
                    count.scope,
                    count.rows,
                    b.describe()
                );
                backend::confirm("type yes to replay them: ", "yes")?;
            }
            backend::finish_leftovers(&b)?;
            let Action::Started(job) = b.replay(req, false)? else {
                return Err(eyre!("the replay did not start a job"));
            };
            let done = backend::finish(&b, *job)?;
            if json {
                print_json(&done)?;
            } else {
                println!(
                    "job {} {}: replayed {} dead rows",
                    done.id,
                    backend::state(&done),
                    done.progress.replayed
                );
            }
            Ok(backend::exit_code(&done))
        }
    }
}

fn detail_text(d: &DlqDetail, now: u64) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "hook         {} (tenant {})", d.hook_id, d.tenant);
    for s in &d.dead {
        let _ = writeln!(
            o,
            "sink {}       dead {} ago after {} attempts",
            output::sink_label(&s.sink_name, s.sink),
            output::age(now.saturating_sub(s.dead_at)),
            s.attempts
        );
        for a in &s.history {
            let status = if a.status == 0 {
                "no response".to_owned()
            } else {
                a.status.to_string()
            };
            let _ = writeln!(
                o,
                "  {} ago  {status}  {}",
                output::age(now.saturating_sub(a.at)),
                a.error
            );
        }
    }
    match &d.hook {
        Some(h) => {
            let _ = writeln!(o, "source       {}", h.source);
            if let Some(t) = &h.event_type {
                let _ = writeln!(o, "event type   {t}");
            }
            if let Some(k) = &h.idempotency_key {
                let _ = writeln!(o, "idempotency  {k}");
            }
            for (name, value) in &h.headers {
                let _ = writeln!(o, "header       {name}: {value}");
            }
            let _ = writeln!(
                o,
                "body         {} bytes, {}{}",
                h.body_len,
                h.body_kind,
                if h.body_truncated { ", cut" } else { "" }
            );
            for line in &h.body_preview {
                let _ = writeln!(o, "  {line}");
            }
        }
        None => {
            let _ = writeln!(o, "body         (gone)");
        }
    }
    o
}
