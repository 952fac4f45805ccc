//! Routing by event type: where a source finds a hook's type, which types
//! a sink subscribes to, and so which sinks a hook owes delivery rows to.
//!
//! A source names the type's place, a request header
//! (`event_type = { header = "x-github-event" }`) or a JSON pointer into
//! the body (`event_type = { json = "/type" }`). A sink lists the types it
//! takes (`events = ["invoice.*", "customer.created"]`: exact names, or a
//! prefix ending in one `*`); a sink without `events` takes every hook.
//!
//! Invariants:
//! - A hook without a type (the header absent, or nothing at the pointer)
//!   goes to the sinks without `events` only: a subscription never matches
//!   what it cannot see.
//! - What the relay cannot read as a type is refused, never guessed: a
//!   header given twice, a value that is not printable ASCII or longer than
//!   [`MAX_EVENT_TYPE`], a body that is not JSON, a value at the pointer
//!   that is not a string.
//! - Routing only ever removes sinks from what a hook owes: a retired sink
//!   takes no new hook whatever its `events`.

use std::fmt;

use axum::http::{HeaderMap, HeaderName};

pub mod pointer;
use serde::Deserialize;

pub use ankusa_ops::event_type::Pattern;
use ankusa_ops::event_type::{valid as valid_type, MAX_EVENT_TYPE};
use ankusa_store::transitions::SinkSet;

/// Patterns one sink may list at most.
pub const MAX_PATTERNS: usize = 64;

/// `event_type = { header = "..." }` or `{ json = "/..." }` as written.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum EventTypeConfig {
    Header(String),
    Json(String),
}

/// Where a source reads a hook's type, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventTypeFrom {
    Header(HeaderName),
    /// An RFC 6901 JSON pointer (`/type`, `/data/kind`).
    Json(String),
}

impl EventTypeFrom {
    pub fn check(c: &EventTypeConfig) -> Result<EventTypeFrom, String> {
        match c {
            EventTypeConfig::Header(h) => HeaderName::from_bytes(h.trim().as_bytes())
                .map(EventTypeFrom::Header)
                .map_err(|_| format!("event_type.header `{h}` is not a valid HTTP header name")),
            EventTypeConfig::Json(p) if p.starts_with('/') && p.len() <= 256 => {
                Ok(EventTypeFrom::Json(p.clone()))
            }
            EventTypeConfig::Json(p) => Err(format!(
                "event_type.json `{p}` is not a JSON pointer: write one starting with `/`, e.g. \"/type\" (at most 256 bytes)"
            )),
        }
    }
}

impl fmt::Display for EventTypeFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventTypeFrom::Header(h) => write!(f, "header {h}"),
            EventTypeFrom::Json(p) => write!(f, "json {p}"),
        }
    }
}

/// Why a request's type was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventTypeError {
    #[error("the event type header {0} is given more than once")]
    Ambiguous(String),
    #[error("the event type is not 1 to {MAX_EVENT_TYPE} printable ASCII characters")]
    Invalid,
    #[error("the body is not JSON, so its event type cannot be read")]
    NotJson,
    #[error("the value at the event type pointer is not a string")]
    NotString,
}

/// The hook's type, read where the source says: `None` when the request
/// has none there.
pub fn extract(
    from: &EventTypeFrom,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Option<String>, EventTypeError> {
    match from {
        EventTypeFrom::Header(name) => {
            let mut values = headers.get_all(name).iter();
            let Some(v) = values.next() else {
                return Ok(None);
            };
            if values.next().is_some() {
                return Err(EventTypeError::Ambiguous(name.to_string()));
            }
            let t = v.to_str().map_err(|_| EventTypeError::Invalid)?;
            valid_type(t)
                .then(|| Some(t.to_owned()))
                .ok_or(EventTypeError::Invalid)
        }
        EventTypeFrom::Json(pointer) => {
            match pointer::find(body, pointer).map_err(|_| EventTypeError::NotJson)? {
                pointer::Found::Missing | pointer::Found::Null => Ok(None),
                pointer::Found::Str(t) if valid_type(&t) => Ok(Some(t)),
                pointer::Found::Str(_) => Err(EventTypeError::Invalid),
                pointer::Found::Other => Err(EventTypeError::NotString),
            }
        }
    }
}

/// A sink's `events`, checked: `None` takes every hook.
pub fn check_events(events: Option<&[String]>) -> Result<Option<Vec<Pattern>>, String> {
    let Some(list) = events else {
        return Ok(None);
    };
    if list.is_empty() {
        return Err(
            "events = [] would take no hook: list the types it takes, or mark the sink retired = true"
                .into(),
        );
    }
    if list.len() > MAX_PATTERNS {
        return Err(format!(
            "events lists {} patterns, the limit is {MAX_PATTERNS}",
            list.len()
        ));
    }
    list.iter()
        .map(|p| Pattern::parse(p).map_err(|m| format!("events: {m}")))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Whether a sink with `events` takes a hook of type `t`.
pub fn subscribed(events: Option<&[Pattern]>, t: Option<&str>) -> bool {
    events.is_none_or(|ps| ps.iter().any(|p| p.matches_hook(t)))
}

/// The positions of `set` whose sink takes a hook of type `t`;
/// `events(i)` is sink `i`'s subscription.
pub fn route<'a>(
    set: SinkSet,
    t: Option<&str>,
    events: impl Fn(u16) -> Option<&'a [Pattern]>,
) -> SinkSet {
    set.iter()
        .filter(|&i| !subscribed(events(i), t))
        .fold(set, SinkSet::without)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pats(list: &[&str]) -> Vec<Pattern> {
        list.iter().map(|p| Pattern::parse(p).unwrap()).collect()
    }

    #[test]
    fn patterns_are_exact_names_or_one_trailing_star() {
        let p = pats(&["invoice.*", "customer.created"]);
        let s = Some(p.as_slice());
        assert!(subscribed(s, Some("invoice.paid")));
        assert!(subscribed(s, Some("invoice.")));
        assert!(subscribed(s, Some("customer.created")));
        assert!(!subscribed(s, Some("customer.created.v2")));
        assert!(!subscribed(s, Some("invoice")));
        assert!(!subscribed(s, None), "no type, no subscription matches");
        assert!(subscribed(None, None), "no events: everything");
        let any = pats(&["*"]);
        assert!(subscribed(Some(&any), Some("x")));
        assert!(!subscribed(Some(&any), None));
        for bad in ["in*voice", "**", "a b", "", "é"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
        assert!(check_events(Some(&[])).is_err());
        assert_eq!(check_events(None), Ok(None));
    }

    #[test]
    fn a_type_is_read_from_one_header_or_a_json_string() {
        let h = EventTypeFrom::Header(HeaderName::from_static("x-event"));
        let mut m = HeaderMap::new();
        assert_eq!(extract(&h, &m, b""), Ok(None));
        m.insert("x-event", "push".parse().unwrap());
        assert_eq!(extract(&h, &m, b""), Ok(Some("push".into())));
        m.append("x-event", "pull".parse().unwrap());
        assert!(matches!(
            extract(&h, &m, b""),
            Err(EventTypeError::Ambiguous(_))
        ));
        let mut m = HeaderMap::new();
        m.insert("x-event", "a b".parse().unwrap());
        assert_eq!(extract(&h, &m, b""), Err(EventTypeError::Invalid));

        let j = EventTypeFrom::Json("/data/type".into());
        let none = HeaderMap::new();
        let got = extract(&j, &none, br#"{"data":{"type":"invoice.paid"}}"#);
        assert_eq!(got, Ok(Some("invoice.paid".into())));
        assert_eq!(extract(&j, &none, br#"{"data":{}}"#), Ok(None));
        assert_eq!(extract(&j, &none, br#"{"data":{"type":null}}"#), Ok(None));
        assert_eq!(
            extract(&j, &none, br#"{"data":{"type":5}}"#),
            Err(EventTypeError::NotString)
        );
        assert_eq!(
            extract(&j, &none, b"not json"),
            Err(EventTypeError::NotJson)
        );
        let long = format!(
            r#"{{"data":{{"type":"{}"}}}}"#,
            "x".repeat(MAX_EVENT_TYPE + 1)
        );
        assert_eq!(
            extract(&j, &none, long.as_bytes()),
            Err(EventTypeError::Invalid)
        );
        assert!(EventTypeFrom::check(&EventTypeConfig::Json("type".into())).is_err());
    }

    proptest! {
        /// Routing keeps exactly the positions of the set whose sink takes
        /// the type, and never adds one (a retired sink stays out).
        #[test]
        fn routing_keeps_the_subscribed_positions_of_the_set(
            set in any::<u64>(),
            subs in proptest::collection::vec(
                proptest::option::of(proptest::collection::vec("[ab]{0,2}\\*?", 1..4)),
                64,
            ),
            t in proptest::option::of("[ab]{0,3}"),
        ) {
            let parsed: Vec<Option<Vec<Pattern>>> = subs
                .iter()
                .map(|s| s.as_ref().map(|l| {
                    l.iter().filter_map(|p| Pattern::parse(p).ok()).collect()
                }))
                .collect();
            let set = SinkSet::of((0..64u16).filter(|i| set & (1 << i) != 0));
            let got = route(set, t.as_deref(), |i| parsed[usize::from(i)].as_deref());
            for i in 0..64u16 {
                let want = set.contains(i)
                    && match (&parsed[usize::from(i)], &t) {
                        (None, _) => true,
                        (Some(_), None) => false,
                        (Some(ps), Some(t)) => ps.iter().any(|p| match p {
                            Pattern::Exact(e) => e == t,
                            Pattern::Prefix(x) => t.starts_with(x.as_str()),
                        }),
                    };
                prop_assert_eq!(got.contains(i), want, "position {}", i);
            }
        }
    }
}
