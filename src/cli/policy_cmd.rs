//! `ankusa tenants policy show|set|clear` and `ankusa sinks limit
//! show|set|clear`: one [`ankusa_ops::operator::Operator`] call each,
//! through the daemon when one runs, else on the store (as its writer
//! for a change; the dispatcher of the next daemon applies it).

use std::process::ExitCode;

use color_eyre::eyre::Result;

use super::{backend, LimitCommand, PolicyCommand};
use crate::failure;
use crate::output::print_json;
use ankusa_store::policy::{Policy, SinkLimits};

pub fn policy(cmd: PolicyCommand) -> Result<ExitCode> {
    let hint = backend::LIST_HINT;
    match cmd {
        PolicyCommand::Show {
            tenant,
            store,
            admin,
            json,
        } => {
            let op = backend::open(&store.store, admin.token, false)?;
            let v = op
                .tenant_policy(&tenant)
                .map_err(|e| failure::if_not_found(e, hint))?;
            if json {
                print_json(&v)?;
            } else {
                match &v.stored {
                    Some(p) => println!(
                        "tenant {tenant}: {} (set by {}, {} ago)",
                        p.policy,
                        p.by,
                        crate::output::age(ankusa_store::system_now_ms().saturating_sub(p.at))
                    ),
                    None => println!("tenant {tenant}: no policy of its own"),
                }
                match &v.defaults {
                    Some(d) => println!("defaults: {d}"),
                    None => println!(
                        "defaults: those of the daemon's [tenants] (no daemon answered for this store)"
                    ),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Set {
            tenant,
            fields: f,
            store,
            admin,
            json,
        } => {
            let op = backend::open(&store.store, admin.token, true)?;
            let set = Policy {
                weight: f.weight,
                share: f.share,
                cap: f.cap,
                rate: f.rate,
            };
            let c = op
                .set_tenant_policy(&tenant, &set)
                .map_err(|e| failure::if_not_found(e, hint))?;
            if json {
                print_json(&c)?;
            } else if c.changed {
                println!(
                    "tenant {tenant}: policy {} -> {} via {}",
                    c.before.unwrap_or_default(),
                    c.after.unwrap_or_default(),
                    op.describe()
                );
            } else {
                println!(
                    "tenant {tenant}: policy already {}, nothing changed",
                    c.after.unwrap_or_default()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PolicyCommand::Clear {
            tenant,
            store,
            admin,
            json,
        } => {
            let op = backend::open(&store.store, admin.token, true)?;
            let c = op
                .clear_tenant_policy(&tenant)
                .map_err(|e| failure::if_not_found(e, hint))?;
            if json {
                print_json(&c)?;
            } else if c.changed {
                println!(
                    "tenant {tenant}: policy {} cleared via {}; the defaults apply",
                    c.before.unwrap_or_default(),
                    op.describe()
                );
            } else {
                println!("tenant {tenant}: had no policy of its own, nothing changed");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn limit(cmd: LimitCommand) -> Result<ExitCode> {
    match cmd {
        LimitCommand::Show {
            sink,
            store,
            admin,
            json,
        } => {
            let op = backend::open(&store.store, admin.token, false)?;
            let v = op.sink_limits(&sink)?;
            if json {
                print_json(&v)?;
            } else {
                match &v.stored {
                    Some(s) => println!(
                        "sink {}: {} (set by {}, {} ago)",
                        v.sink,
                        s.limits,
                        s.by,
                        crate::output::age(ankusa_store::system_now_ms().saturating_sub(s.at))
                    ),
                    None => println!(
                        "sink {}: no limits set at run time (its configuration applies)",
                        v.sink
                    ),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LimitCommand::Set {
            sink,
            max_in_flight,
            rate,
            store,
            admin,
            json,
        } => {
            let op = backend::open(&store.store, admin.token, true)?;
            let c = op.set_sink_limits(
                &sink,
                &SinkLimits {
                    max_in_flight,
                    rate,
                },
            )?;
            if json {
                print_json(&c)?;
            } else if c.changed {
                println!(
                    "sink {}: limits {} -> {} via {}",
                    c.sink,
                    c.before.unwrap_or_default(),
                    c.after.unwrap_or_default(),
                    op.describe()
                );
            } else {
                println!(
                    "sink {}: limits already {}, nothing changed",
                    c.sink,
                    c.after.unwrap_or_default()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        LimitCommand::Clear {
            sink,
            store,
            admin,
            json,
        } => {
            let op = backend::open(&store.store, admin.token, true)?;
            let c = op.clear_sink_limits(&sink)?;
            if json {
                print_json(&c)?;
            } else if c.changed {
                println!(
                    "sink {}: limits {} cleared via {}; its configuration applies",
                    c.sink,
                    c.before.unwrap_or_default(),
                    op.describe()
                );
            } else {
                println!(
                    "sink {}: had no limits set at run time, nothing changed",
                    c.sink
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
