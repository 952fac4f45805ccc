//! Event types, as the relay reads and matches them: what a type may be
//! and the patterns that select types (a sink's `events`, the DLQ's
//! `--event-type` filter and the console's `:dlq-type`), one definition
//! for all three.
//!
//! A type is 1 to [`MAX_EVENT_TYPE`] bytes of visible ASCII. A pattern is
//! an exact type or a prefix ending in one `*` (`invoice.*`); `*` alone is
//! any type. No pattern matches a hook without a type.

use std::fmt;

/// The longest event type kept, in bytes.
pub const MAX_EVENT_TYPE: usize = 128;

/// Whether `t` may be a type: 1 to [`MAX_EVENT_TYPE`] bytes of visible
/// ASCII (no space, no control character).
pub fn valid(t: &str) -> bool {
    !t.is_empty() && t.len() <= MAX_EVENT_TYPE && t.bytes().all(|b| b.is_ascii_graphic())
}

/// A pattern of event types: one entry of a sink's `events`, or a DLQ filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    Exact(String),
    /// `invoice.*`: any type starting with `invoice.` (`*` alone: any type,
    /// but not a hook without one).
    Prefix(String),
}

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, String> {
        let (body, wild) = match s.strip_suffix('*') {
            Some(b) => (b, true),
            None => (s, false),
        };
        if body.contains('*') {
            return Err(format!("`{s}`: `*` may only end a pattern (\"invoice.*\")"));
        }
        // `*` alone (any type) is the one pattern with nothing before it.
        let any = wild && body.is_empty();
        if !any && !valid(body) {
            return Err(format!(
                "`{s}` is not an event type: 1 to {MAX_EVENT_TYPE} printable ASCII characters without spaces"
            ));
        }
        Ok(if wild {
            Pattern::Prefix(body.to_owned())
        } else {
            Pattern::Exact(body.to_owned())
        })
    }

    pub fn matches(&self, t: &str) -> bool {
        match self {
            Pattern::Exact(e) => e == t,
            Pattern::Prefix(p) => t.starts_with(p.as_str()),
        }
    }

    /// Whether a hook of type `t` matches; a hook without a type never does.
    pub fn matches_hook(&self, t: Option<&str>) -> bool {
        t.is_some_and(|t| self.matches(t))
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Exact(e) => f.write_str(e),
            Pattern::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Pattern, String> {
        Pattern::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_an_exact_type_or_a_prefix_and_star() {
        let p: Pattern = "invoice.*".parse().unwrap();
        assert!(p.matches("invoice.paid") && !p.matches("invoices"));
        let e: Pattern = "push".parse().unwrap();
        assert!(e.matches("push") && !e.matches("push2"));
        assert!(Pattern::parse("*").unwrap().matches("anything"));
        for bad in ["in*voice", "**", "a b", "", "\u{e9}"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(p.to_string(), "invoice.*");
        assert!(valid("a.b") && !valid("") && !valid("a\tb"));
        assert!(!valid(&"x".repeat(MAX_EVENT_TYPE + 1)));
    }
}
