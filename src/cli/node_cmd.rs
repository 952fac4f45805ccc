//! `ankusa node drain|undrain|status`: one [`ankusa_ops::operator::Operator`]
//! call each, through the daemon when one runs, else on the store.

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::Duration;

use color_eyre::eyre::Result;

use super::{backend, NodeCommand};
use crate::output::print_json;
use ankusa_ops::model::NodeState;

pub fn run(cmd: NodeCommand) -> Result<ExitCode> {
    match cmd {
        NodeCommand::Drain {
            store,
            admin,
            wait,
            json,
        } => {
            let op = backend::open(&store.store, admin.token, true)?;
            let mut n = op.drain(true)?;
            if !json {
                println!(
                    "draining via {}: /healthz answers 503 draining",
                    op.describe()
                );
            }
            if wait {
                let tty = std::io::stderr().is_terminal();
                while !n.empty {
                    if tty {
                        eprint!("\r{} rows still owed a delivery   ", n.owed);
                    }
                    std::thread::sleep(Duration::from_millis(200));
                    n = op.node()?;
                }
                if tty {
                    eprintln!();
                }
            }
            report(&n, json)
        }
        NodeCommand::Undrain { store, admin, json } => {
            let op = backend::open(&store.store, admin.token, true)?;
            let n = op.drain(false)?;
            if !json {
                println!("not draining via {}: /healthz answers 200", op.describe());
            }
            report(&n, json)
        }
        NodeCommand::Status { store, admin, json } => {
            let op = backend::open(&store.store, admin.token, false)?;
            report(&op.node()?, json)
        }
    }
}

fn report(n: &NodeState, json: bool) -> Result<ExitCode> {
    if json {
        print_json(n)?;
        return Ok(ExitCode::SUCCESS);
    }
    match &n.node {
        Some(id) => println!("node       {id}"),
        None => println!("node       (no id yet: the daemon records one at its first boot)"),
    }
    match &n.draining {
        Some(d) => println!(
            "draining   since {} by {}",
            humantime::format_rfc3339_millis(
                std::time::UNIX_EPOCH + Duration::from_millis(d.since)
            ),
            d.by
        ),
        None => println!("draining   no"),
    }
    println!(
        "owed       {} rows (pending, scheduled, inflight){}",
        n.owed,
        if n.empty { ": empty" } else { "" }
    );
    println!("dead       {} rows (kept)", n.dead);
    Ok(ExitCode::SUCCESS)
}
