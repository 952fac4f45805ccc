//! What the console did, as an operator would type it: the `ankusa ...`
//! command line and the `curl` call against the admin API that do the
//! same. Both are built from the very request the console sent
//! ([`super::actions::ask`]), so they cannot drift from it; the actions
//! screen shows them beside each action.
//!
//! Neither carries a token: the command line reads `ANKUSA_ADMIN_TOKEN`,
//! and the `curl` goes to the store's admin socket, where a local user is
//! an admin when the daemon allows it (add `-H "authorization: Bearer
//! $ANKUSA_ADMIN_TOKEN"` otherwise).

use std::path::Path;

use ankusa_ops::model::PurgeRequest;
use ankusa_ops::routes;
use ankusa_ops::wire::{PolicyJson, SinkLimitsJson, Via};

use super::actions::{ask, Ask};
use super::request::ActionScope;

/// An action as a command line and an admin API call (`None`: the API
/// has no such call, e.g. a repair, which runs on a stopped store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Equivalent {
    pub cli: String,
    pub curl: Option<String>,
}

/// `s` as one shell word.
pub fn sh(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_./:=@%+-,".contains(&b));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `head`, the positional `value` and the options `rest` (each with its
/// leading space): the value first as usual, or last behind `--` when it
/// starts with `-`, which the parser would take for an option (quoting does
/// not help: the shell strips the quotes before the parser sees it).
fn with_positional(head: &str, value: &str, rest: &str) -> String {
    if value.starts_with('-') {
        format!("{head}{rest} -- {}", sh(value))
    } else {
        format!("{head} {}{rest}", sh(value))
    }
}

/// ` FLAG VALUE`, or ` FLAG=VALUE` for a value that starts with `-`.
fn opt(flag: &str, value: &str) -> String {
    if value.starts_with('-') {
        format!(" {flag}={}", sh(value))
    } else {
        format!(" {flag} {}", sh(value))
    }
}

fn rfc3339(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

fn curl(store: &Path, method: &str, path: &str, body: Option<String>) -> String {
    let sock = store.join("admin.sock");
    let mut c = format!(
        "curl -s --unix-socket {} -X {method} {}",
        sh(&sock.display().to_string()),
        sh(&format!("http://localhost{path}"))
    );
    if let Some(b) = body {
        c.push_str(&format!(
            " -H 'content-type: application/json' -d {}",
            sh(&b)
        ));
    }
    c
}

fn json<T: serde::Serialize>(v: &T) -> Option<String> {
    serde_json::to_string(v).ok()
}

/// The command line and the API call that do what `scope` did, on the
/// store at `store`.
pub fn of(scope: &ActionScope, store: &Path) -> Option<Equivalent> {
    let dir = sh(&store.display().to_string());
    if let ActionScope::Repair = scope {
        return Some(Equivalent {
            cli: format!("ankusa store repair --store {dir}"),
            curl: None,
        });
    }
    let a = ask(scope).ok()?;
    Some(match a {
        Ask::Purge { tenant, kinds } => {
            let mut names = Vec::new();
            if kinds.pending {
                names.push("pending".to_owned());
            }
            if kinds.dead {
                names.push("dead".to_owned());
            }
            let which = names.join(",");
            Equivalent {
                cli: format!(
                    "ankusa tenants purge {} --store {dir} --kinds {which} --yes",
                    sh(&tenant)
                ),
                curl: Some(curl(
                    store,
                    "POST",
                    &routes::fill(routes::PURGE, &tenant),
                    json(&PurgeRequest {
                        kinds: names,
                        dry_run: false,
                    }),
                )),
            }
        }
        Ask::Replay(r) => {
            let mut cli = format!("ankusa dlq replay --store {dir}");
            for row in &r.rows {
                cli.push_str(&format!(" --row {}", sh(row)));
            }
            for id in &r.ids {
                cli.push_str(&format!(" --id {}", sh(id)));
            }
            if let Some(t) = &r.tenant {
                cli.push_str(&opt("--tenant", t));
            }
            if let Some(f) = r.from {
                cli.push_str(&format!(" --from {}", rfc3339(f)));
            }
            if let Some(t) = r.to {
                cli.push_str(&format!(" --until {}", rfc3339(t)));
            }
            cli.push_str(" --yes");
            Equivalent {
                cli,
                curl: Some(curl(store, "POST", routes::REPLAY, json(&r))),
            }
        }
        Ask::Pause(mut req) | Ask::Resume(mut req) => {
            // By its name, as operators read it everywhere: the command
            // line and the API take a name as they take a position.
            if let ActionScope::Pause(t) | ActionScope::Resume(t) = scope {
                if let Some((k, name)) = &t.sink {
                    req.sink = Some(format!("{}/{name}", k.source));
                }
            }
            let verb = if matches!(scope, ActionScope::Resume(_)) {
                "resume"
            } else {
                "pause"
            };
            let store_opt = format!(" --store {dir}");
            let cli = match (&req.tenant, &req.sink) {
                (Some(t), None) => {
                    with_positional(&format!("ankusa tenants {verb}"), t, &store_opt)
                }
                (Some(t), Some(k)) => with_positional(
                    &format!("ankusa tenants {verb}"),
                    t,
                    &format!("{}{store_opt}", opt("--sink", k)),
                ),
                (None, Some(k)) => with_positional(&format!("ankusa sinks {verb}"), k, &store_opt),
                (None, None) => return None,
            };
            let route = if verb == "resume" {
                routes::RESUME
            } else {
                routes::PAUSES
            };
            Equivalent {
                cli,
                curl: Some(curl(store, "POST", route, json(&req))),
            }
        }
        Ask::Drain(on) => {
            let (verb, route) = if on {
                ("drain", routes::DRAIN)
            } else {
                ("undrain", routes::UNDRAIN)
            };
            Equivalent {
                cli: format!("ankusa node {verb} --store {dir}"),
                curl: Some(curl(store, "POST", route, None)),
            }
        }
        Ask::Policy { tenant, set } => {
            let path = routes::fill(routes::TENANT_POLICY, &tenant);
            match set {
                None => Equivalent {
                    cli: with_positional(
                        "ankusa tenants policy clear",
                        &tenant,
                        &format!(" --store {dir}"),
                    ),
                    curl: Some(curl(store, "DELETE", &path, None)),
                },
                Some(p) => {
                    let mut rest = format!(" --store {dir}");
                    for (flag, v) in [
                        ("--weight", p.weight),
                        ("--share", p.share),
                        ("--cap", p.cap),
                    ] {
                        if let Some(v) = v {
                            rest.push_str(&format!(" {flag} {v}"));
                        }
                    }
                    if let Some(r) = p.rate {
                        rest.push_str(&format!(" --rate {}", sh(&r.to_string())));
                    }
                    let cli = with_positional("ankusa tenants policy set", &tenant, &rest);
                    Equivalent {
                        cli,
                        curl: Some(curl(
                            store,
                            "PUT",
                            &path,
                            json(&Via::<PolicyJson, _>::new(&p)),
                        )),
                    }
                }
            }
        }
        Ask::SinkLimits { sink, set } => {
            let path = routes::fill(routes::SINK_LIMITS, &sink);
            match set {
                None => Equivalent {
                    cli: with_positional(
                        "ankusa sinks limit clear",
                        &sink,
                        &format!(" --store {dir}"),
                    ),
                    curl: Some(curl(store, "DELETE", &path, None)),
                },
                Some(l) => {
                    let mut rest = format!(" --store {dir}");
                    if let Some(n) = l.max_in_flight {
                        rest.push_str(&format!(" --max-in-flight {n}"));
                    }
                    if let Some(r) = l.rate {
                        rest.push_str(&format!(" --rate {}", sh(&r.to_string())));
                    }
                    let cli = with_positional("ankusa sinks limit set", &sink, &rest);
                    Equivalent {
                        cli,
                        curl: Some(curl(
                            store,
                            "PUT",
                            &path,
                            json(&Via::<SinkLimitsJson, _>::new(&l)),
                        )),
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_the_shell_needs_it() {
        assert_eq!(sh("shop/audit"), "shop/audit");
        assert_eq!(sh("tenant one"), "'tenant one'");
        assert_eq!(sh("it's"), r"'it'\''s'");
        assert_eq!(sh(""), "''");
    }

    /// Issue 47: a tenant id may start with `-`, which the command line's
    /// parser takes for an option however it is quoted. Such a value goes
    /// last, behind `--`, or as `--flag=value`.
    #[test]
    fn a_value_that_starts_with_a_dash_is_not_read_as_an_option() {
        assert_eq!(
            with_positional("ankusa tenants pause", "-x", " --store s"),
            "ankusa tenants pause --store s -- -x"
        );
        assert_eq!(
            with_positional("ankusa tenants pause", "acme", " --store s"),
            "ankusa tenants pause acme --store s"
        );
        assert_eq!(opt("--tenant", "-x"), " --tenant=-x");
        assert_eq!(opt("--tenant", "a b"), " --tenant 'a b'");
    }
}
