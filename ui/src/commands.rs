//! The `:` commands: one table ([`COMMANDS`]) that the prompt's parser, the
//! help overlay and the docs test (`docs/console.md` must name every
//! command) all read, so a command cannot exist in one and be missing from
//! another.
//!
//! Parsing only says which command a line is and checks its argument's
//! presence; what the argument means (a tenant name, a duration, a counter)
//! is the command's own business in [`crate::app`].

use crate::keymap::Tab;

/// Whether a command takes an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    None,
    Optional,
    Required,
}

/// One `:` command as the help and the docs show it.
#[derive(Debug, PartialEq, Eq)]
pub struct Spec {
    pub name: &'static str,
    /// Shorter spellings.
    pub aliases: &'static [&'static str],
    pub arg: Arg,
    /// How the help writes its argument (`NAME`, `2h`); empty for none.
    pub arg_label: &'static str,
    pub help: &'static str,
    pub what: What,
}

/// What a command does, once parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Goto(Tab),
    /// `:tenants` alone goes to the list; with a name, to that tenant.
    Tenants,
    Tenant,
    /// `:dlq` alone is the node's DLQ; with a name, that tenant's.
    Dlq,
    /// `:dlq-type PATTERN` narrows the DLQ to an event type; alone, clears.
    DlqType,
    Sort,
    ReplaySince,
    Repair,
    Drain,
    Undrain,
    PauseFor,
    ResumeFor,
    Policy,
    Limit,
    Actions,
    Quit,
}

use Arg::{None as NoArg, Optional, Required};

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "tenants",
        aliases: &["t"],
        arg: Optional,
        arg_label: "[NAME]",
        help: "the tenants list; with a name, that tenant",
        what: What::Tenants,
    },
    Spec {
        name: "tenant",
        aliases: &[],
        arg: Required,
        arg_label: "NAME",
        help: "open the tenant named NAME",
        what: What::Tenant,
    },
    Spec {
        name: "dlq",
        aliases: &["d"],
        arg: Optional,
        arg_label: "[NAME]",
        help: "the DLQ of every tenant, or of NAME",
        what: What::Dlq,
    },
    Spec {
        name: "dlq-type",
        aliases: &[],
        arg: Optional,
        arg_label: "[invoice.*]",
        help: "the DLQ's rows of hooks of that event type (a type, or a prefix and *); alone, every row",
        what: What::DlqType,
    },
    Spec {
        name: "overview",
        aliases: &["o"],
        arg: NoArg,
        arg_label: "",
        help: "the overview",
        what: What::Goto(Tab::Overview),
    },
    Spec {
        name: "heatmap",
        aliases: &["h"],
        arg: NoArg,
        arg_label: "",
        help: "the heatmap",
        what: What::Goto(Tab::Heatmap),
    },
    Spec {
        name: "migration",
        aliases: &["m"],
        arg: NoArg,
        arg_label: "",
        help: "the migration screen",
        what: What::Goto(Tab::Migration),
    },
    Spec {
        name: "log",
        aliases: &["l"],
        arg: NoArg,
        arg_label: "",
        help: "the log",
        what: What::Goto(Tab::Log),
    },
    Spec {
        name: "sinks",
        aliases: &[],
        arg: NoArg,
        arg_label: "",
        help: "the sinks screen",
        what: What::Goto(Tab::Sinks),
    },
    Spec {
        name: "actions",
        aliases: &[],
        arg: NoArg,
        arg_label: "",
        help: "this console's actions, each with its ankusa command line and curl",
        what: What::Actions,
    },
    Spec {
        name: "sort",
        aliases: &[],
        arg: Optional,
        arg_label: "FIELD",
        help: "sort the tenants by a counter or a rate (delivered/s); alone, by ordinal",
        what: What::Sort,
    },
    Spec {
        name: "replay-since",
        aliases: &[],
        arg: Required,
        arg_label: "2h",
        help: "replay what was dead-lettered in that span (this tenant's, from its DLQ or detail)",
        what: What::ReplaySince,
    },
    Spec {
        name: "repair",
        aliases: &[],
        arg: NoArg,
        arg_label: "",
        help: "store repair, guarded (WRITE mode)",
        what: What::Repair,
    },
    Spec {
        name: "pause-for",
        aliases: &[],
        arg: Required,
        arg_label: "TENANT",
        help: "pause the selected sink for that tenant alone",
        what: What::PauseFor,
    },
    Spec {
        name: "resume-for",
        aliases: &[],
        arg: Required,
        arg_label: "TENANT",
        help: "resume the selected sink for that tenant",
        what: What::ResumeFor,
    },
    Spec {
        name: "policy",
        aliases: &[],
        arg: Required,
        arg_label: "weight=4 cap=20",
        help: "set fields of this tenant's policy (weight, share, cap, rate), or clear it; guarded",
        what: What::Policy,
    },
    Spec {
        name: "limit",
        aliases: &[],
        arg: Required,
        arg_label: "max_in_flight=4 rate=20/s",
        help: "set the selected sink's limits (max_in_flight, rate), or clear them; guarded",
        what: What::Limit,
    },
    Spec {
        name: "drain",
        aliases: &[],
        arg: NoArg,
        arg_label: "",
        help: "drain this node, guarded",
        what: What::Drain,
    },
    Spec {
        name: "undrain",
        aliases: &[],
        arg: NoArg,
        arg_label: "",
        help: "undo a drain, guarded",
        what: What::Undrain,
    },
    Spec {
        name: "q",
        aliases: &["quit"],
        arg: NoArg,
        arg_label: "",
        help: "quit",
        what: What::Quit,
    },
];

/// A parsed `:` line: the command and its argument (empty when none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub what: What,
    pub arg: String,
    pub spec: &'a Spec,
}

/// Why a line is not a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Unknown(String),
    NeedsArgument(&'static Spec),
    TakesNone(&'static Spec),
}

/// The command `line` names, or why it names none.
pub fn parse(line: &str) -> Result<Parsed<'static>, Refused> {
    let mut words = line.split_whitespace();
    let cmd = words.next().unwrap_or("");
    let arg = words.collect::<Vec<_>>().join(" ");
    let spec = COMMANDS
        .iter()
        .find(|s| s.name == cmd || s.aliases.contains(&cmd))
        .ok_or_else(|| Refused::Unknown(line.trim().to_owned()))?;
    match (spec.arg, arg.is_empty()) {
        (Required, true) => Err(Refused::NeedsArgument(spec)),
        // Quitting with words after it still quits.
        (NoArg, false) if spec.what != What::Quit => Err(Refused::TakesNone(spec)),
        _ => Ok(Parsed {
            what: spec.what,
            arg,
            spec,
        }),
    }
}

impl Spec {
    /// `:name ARG` as the help writes it.
    pub fn usage(&self) -> String {
        if self.arg_label.is_empty() {
            format!(":{}", self.name)
        } else {
            format!(":{} {}", self.name, self.arg_label)
        }
    }
}

/// The help overlay's lines for the commands.
pub fn help_lines() -> Vec<String> {
    COMMANDS
        .iter()
        .map(|s| format!("  {:<20} {}", s.usage(), s.help))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_and_alias_parses_to_itself() {
        for s in COMMANDS {
            let line = match s.arg {
                Required => format!("{} x", s.name),
                _ => s.name.to_owned(),
            };
            assert_eq!(parse(&line).map(|p| p.what), Ok(s.what), "{line}");
            for a in s.aliases {
                let line = line.replacen(s.name, a, 1);
                assert_eq!(parse(&line).map(|p| p.what), Ok(s.what), "{line}");
            }
        }
    }

    #[test]
    fn a_missing_or_extra_argument_is_refused_by_name() {
        assert!(matches!(parse("tenant"), Err(Refused::NeedsArgument(s)) if s.name == "tenant"));
        assert!(matches!(
            parse("replay-since  "),
            Err(Refused::NeedsArgument(_))
        ));
        assert!(matches!(parse("drain now"), Err(Refused::TakesNone(s)) if s.name == "drain"));
        assert!(matches!(parse("frobnicate"), Err(Refused::Unknown(l)) if l == "frobnicate"));
        assert_eq!(parse("q now").map(|p| p.what), Ok(What::Quit));
        let p = parse("dlq  acme  corp").unwrap();
        assert_eq!((p.what, p.arg.as_str()), (What::Dlq, "acme corp"));
    }

    /// docs/console.md names every command in its table of `:` commands.
    #[test]
    fn the_console_docs_name_every_command() {
        let doc = include_str!("../../docs/console.md");
        let missing: Vec<String> = COMMANDS
            .iter()
            .filter(|s| {
                !doc.contains(&format!("`:{}`", s.name)) && !doc.contains(&format!("`:{} ", s.name))
            })
            .map(Spec::usage)
            .collect();
        assert!(
            missing.is_empty(),
            "docs/console.md does not name {missing:?}"
        );
    }

    #[test]
    fn the_help_lists_every_command() {
        let help = help_lines().join("\n");
        for s in COMMANDS {
            assert!(help.contains(&s.usage()), "{}", s.name);
        }
    }
}
