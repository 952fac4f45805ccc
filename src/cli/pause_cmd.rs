//! `ankusa tenants pause|resume` and `ankusa sinks list|show|pause|resume`:
//! one [`ankusa_ops::operator::Operator`] call each, through the daemon
//! when one runs, else on the store directly (as its writer for a pause).

use std::process::ExitCode;

use color_eyre::eyre::{eyre, Result};

use super::{backend, AdminArg, SinksCommand, StoreArg};
use crate::output::{self, print_json};
use ankusa_ops::model::{PauseRequest, SinkView};

pub fn pause(
    tenant: Option<String>,
    sink: Option<String>,
    store: &StoreArg,
    admin: AdminArg,
    json: bool,
) -> Result<ExitCode> {
    let op = backend::open(&store.store, admin.token, true)?;
    let p = op.pause(&PauseRequest { tenant, sink })?;
    if json {
        print_json(&p)?;
    } else if p.created {
        println!(
            "paused {} via {}: its rows stay queued until it is resumed",
            p.pause.label,
            op.describe()
        );
    } else {
        println!(
            "{} was already paused (since {} ago, by {})",
            p.pause.label,
            output::age(ankusa_store::system_now_ms().saturating_sub(p.pause.pause.at)),
            p.pause.pause.by
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn resume(
    tenant: Option<String>,
    sink: Option<String>,
    store: &StoreArg,
    admin: AdminArg,
    json: bool,
) -> Result<ExitCode> {
    let op = backend::open(&store.store, admin.token, true)?;
    backend::finish_leftovers(&op)?;
    let r = op.resume(&PauseRequest { tenant, sink })?;
    let Some(job) = r.job.clone() else {
        if json {
            print_json(&r)?;
        } else {
            println!(
                "resumed {} via {}: its rows are due now",
                r.pause.label,
                op.describe()
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    let done = backend::finish(&op, job)?;
    if json {
        print_json(&ankusa_ops::model::Resumed {
            pause: r.pause,
            job: Some(done.clone()),
        })?;
    } else {
        println!(
            "resumed {} via {}: job {} {}, {} parked rows due now",
            r.pause.label,
            op.describe(),
            done.id,
            backend::state(&done),
            done.progress.resumed
        );
    }
    Ok(backend::exit_code(&done))
}

pub fn sinks(cmd: SinksCommand) -> Result<ExitCode> {
    match cmd {
        SinksCommand::List { store, admin, json } => {
            let op = backend::open(&store.store, admin.token, false)?;
            let page = op.sinks()?;
            if json {
                print_json(&page)?;
            } else if page.sinks.is_empty() {
                println!("no sinks recorded: the store's sink catalog is written when a daemon boots on it");
            } else {
                print!("{}", sinks_table(&page.sinks));
            }
            Ok(ExitCode::SUCCESS)
        }
        SinksCommand::Show {
            sink,
            store,
            admin,
            json,
        } => {
            let op = backend::open(&store.store, admin.token, false)?;
            let page = op.sinks()?;
            let Some((source, name)) = sink.split_once('/') else {
                return Err(eyre!(
                    "name a sink as SOURCE/SINK (by name or position), e.g. shop/0"
                ));
            };
            let Some(v) = page
                .sinks
                .into_iter()
                .find(|v| v.source == source && (v.name == name || v.index.to_string() == name))
            else {
                return Err(eyre!(
                    "no sink {sink:?}: `ankusa sinks list` names the node's sinks"
                ));
            };
            if json {
                print_json(&v)?;
            } else {
                println!("sink       {}/{} (position {})", v.source, v.name, v.index);
                println!("endpoint   {}", v.endpoint);
                println!("paused     {}", paused_text(&v));
                match v.waiting {
                    Some(w) => println!("waiting    {w} row(s) (due, retrying or parked)"),
                    None => println!(
                        "waiting    not counted (a store an earlier release wrote: the daemon counts it when it starts)"
                    ),
                }
                match &v.health {
                    None => println!("health     no daemon: no delivery figures"),
                    Some(h) => {
                        let now = ankusa_store::system_now_ms();
                        let ago = |t: Option<u64>| {
                            t.map_or("never".to_owned(), |t| {
                                format!("{} ago", output::age(now.saturating_sub(t)))
                            })
                        };
                        println!(
                            "last min   {} delivered, {} failed, {} in flight",
                            h.delivered_1m, h.failed_1m, h.inflight
                        );
                        println!(
                            "latency    p50 {}  p99 {}",
                            ms(h.latency_p50_ms),
                            ms(h.latency_p99_ms)
                        );
                        println!(
                            "last       status {} {}, success {}",
                            h.last_status.map_or("-".to_owned(), |s| s.to_string()),
                            ago(h.last_attempt_at),
                            ago(h.last_success_at)
                        );
                        println!("failing    {} in a row", h.consecutive_failures);
                        if let Some(e) = &h.last_error {
                            println!("error      {e}");
                        }
                        if !h.failing_tenants.is_empty() {
                            println!("tenants    {}", h.failing_tenants.join(", "));
                        }
                        if let Some(b) = &h.breaker {
                            println!("breaker    {}", breaker_text(b, now));
                        }
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SinksCommand::Pause {
            sink,
            store,
            admin,
            json,
        } => pause(None, Some(sink), &store, admin, json),
        SinksCommand::Resume {
            sink,
            store,
            admin,
            json,
        } => resume(None, Some(sink), &store, admin, json),
        SinksCommand::Limit(c) => super::policy_cmd::limit(c),
    }
}

fn paused_text(v: &SinkView) -> String {
    match (v.paused, v.paused_for.is_empty()) {
        (true, _) => "PAUSED for every tenant".to_owned(),
        (false, false) => format!("for tenants {}", v.paused_for.join(", ")),
        (false, true) => "no".to_owned(),
    }
}

/// A circuit breaker in one line: its state, since when, the next probe
/// and why it tripped.
fn breaker_text(b: &ankusa_ops::model::BreakerView, now: u64) -> String {
    use ankusa_ops::model::BreakerState;
    let mut out = match b.state {
        BreakerState::Closed => "closed".to_owned(),
        BreakerState::Open => "OPEN".to_owned(),
        BreakerState::HalfOpen => "HALF-OPEN (one probe)".to_owned(),
    };
    if let Some(at) = b.opened_at {
        out.push_str(&format!(" for {}", output::age(now.saturating_sub(at))));
    }
    if let Some(at) = b.next_probe_at {
        out.push_str(&format!(
            ", next probe in {}",
            output::age(at.saturating_sub(now))
        ));
    }
    if let Some(r) = &b.reason {
        out.push_str(&format!(", last tripped: {r}"));
    }
    out.push_str(&format!(", {} trip(s)", b.trips));
    out
}

fn breaker_cell(h: Option<&ankusa_ops::model::SinkHealth>) -> String {
    use ankusa_ops::model::BreakerState;
    match h.and_then(|h| h.breaker.as_ref()).map(|b| b.state) {
        None => "-".to_owned(),
        Some(BreakerState::Closed) => "closed".to_owned(),
        Some(BreakerState::Open) => "OPEN".to_owned(),
        Some(BreakerState::HalfOpen) => "HALF".to_owned(),
    }
}

fn ms(v: Option<u64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v}ms"))
}

fn sinks_table(sinks: &[SinkView]) -> String {
    let rows: Vec<Vec<String>> = sinks
        .iter()
        .map(|v| {
            let h = v.health.as_ref();
            let n = |f: fn(&ankusa_ops::model::SinkHealth) -> u64| {
                h.map_or("-".to_owned(), |h| f(h).to_string())
            };
            vec![
                format!("{}/{}", v.source, v.name),
                v.index.to_string(),
                v.endpoint.clone(),
                paused_text(v),
                v.waiting.map_or("-".to_owned(), |w| w.to_string()),
                n(|h| h.delivered_1m),
                n(|h| h.failed_1m),
                n(|h| h.consecutive_failures),
                h.and_then(|h| h.last_status)
                    .map_or("-".to_owned(), |s| s.to_string()),
                ms(h.and_then(|h| h.latency_p99_ms)),
                breaker_cell(h),
            ]
        })
        .collect();
    let mut out = output::table(
        &[
            "sink", "position", "endpoint", "paused", "waiting", "ok/1m", "fail/1m", "streak",
            "last", "p99", "breaker",
        ],
        &rows,
    );
    if sinks.iter().all(|v| v.health.is_none()) {
        out.push_str("(no daemon: no delivery figures)\n");
    }
    out
}
