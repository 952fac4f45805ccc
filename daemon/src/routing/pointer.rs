//! The value at an RFC 6901 JSON pointer, found by walking the document
//! without building it.
//!
//! Why: a hook's type (`event_type = { json = "/type" }`) and, later, its
//! tenant are read from bodies of up to `max_body` bytes. Parsed into a
//! `serde_json::Value`, a body took several times its size in memory that
//! the buffering permits did not count, and the whole tree was built to
//! read one string. The walk descends only along the pointer and skips
//! every other value (`IgnoredAny`), so it holds the path and the string
//! found, whatever the body's size. It still reads the whole body, so a
//! body that is not JSON, or has anything after the document, is refused
//! as before.
//!
//! Invariant: for every document and pointer it finds what
//! `serde_json::Value::pointer` finds (a duplicated key: its last value),
//! which `tests` checks over random documents.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize as _;

/// What a pointer names in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Nothing: a key or an index the document does not have.
    Missing,
    Null,
    Str(String),
    /// A number, a boolean, an object or an array.
    Other,
}

/// The value at `pointer` in the JSON document `body`; `Err` when `body`
/// is not one JSON document.
pub fn find(body: &[u8], pointer: &str) -> Result<Found, serde_json::Error> {
    let tokens: Option<Vec<String>> = match pointer {
        "" => Some(Vec::new()),
        p if p.starts_with('/') => Some(
            p[1..]
                .split('/')
                .map(|t| t.replace("~1", "/").replace("~0", "~"))
                .collect(),
        ),
        _ => None,
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let found = match &tokens {
        Some(path) => At { path }.deserialize(&mut de)?,
        // Not a pointer: nothing is at it, but the body must still parse.
        None => {
            IgnoredAny::deserialize(&mut de)?;
            Found::Missing
        }
    };
    de.end()?;
    Ok(found)
}

/// RFC 6901's array index, as `serde_json` reads it: digits, no leading
/// zero (but `0`), no sign.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// Whether an object's key is the one looked for, compared where the
/// parser holds it: no key is copied.
struct KeyIs<'w>(Option<&'w str>);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(self.0 == Some(v))
    }
}

/// Looks for `path` below the value it is given.
struct At<'p> {
    path: &'p [String],
}

impl<'de> DeserializeSeed<'de> for At<'_> {
    type Value = Found;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Found, D::Error> {
        d.deserialize_any(self)
    }
}

impl At<'_> {
    /// A scalar: the value looked for if the path ends here.
    fn leaf(&self, f: Found) -> Found {
        if self.path.is_empty() {
            f
        } else {
            Found::Missing
        }
    }
}

impl<'de> Visitor<'de> for At<'_> {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Found, E> {
        Ok(self.leaf(Found::Other))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Found, E> {
        Ok(self.leaf(Found::Other))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Found, E> {
        Ok(self.leaf(Found::Other))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Found, E> {
        Ok(self.leaf(Found::Other))
    }

    fn visit_str<E>(self, v: &str) -> Result<Found, E> {
        Ok(self.leaf(Found::Str(v.to_owned())))
    }

    fn visit_unit<E>(self) -> Result<Found, E> {
        Ok(self.leaf(Found::Null))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        let (want, rest) = match self.path.split_first() {
            Some((w, r)) => (Some(w.as_str()), r),
            None => (None, self.path),
        };
        let mut found = if want.is_some() {
            Found::Missing
        } else {
            Found::Other
        };
        while let Some(is_wanted) = map.next_key_seed(KeyIs(want))? {
            if is_wanted {
                // The last of a duplicated key wins, as in a parsed object.
                found = map.next_value_seed(At { path: rest })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
        let Some((want, rest)) = self.path.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Found::Other);
        };
        let want = index(want);
        let mut found = Found::Missing;
        let mut i = 0usize;
        loop {
            if Some(i) == want {
                match seq.next_element_seed(At { path: rest })? {
                    Some(f) => found = f,
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            i += 1;
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value_pointer(body: &[u8], pointer: &str) -> Option<Found> {
        let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
        Some(match doc.pointer(pointer) {
            None => Found::Missing,
            Some(serde_json::Value::Null) => Found::Null,
            Some(serde_json::Value::String(s)) => Found::Str(s.clone()),
            Some(_) => Found::Other,
        })
    }

    #[test]
    fn the_walk_finds_what_a_parsed_document_finds() {
        let body = br#"{"a":{"b":[1,{"c":"x"}],"a/b":"slash","m~n":"tilde"},"d":null,"a":{"b":[0,{"c":"last"}]}}"#;
        for p in [
            "", "/a", "/a/b", "/a/b/1/c", "/a/b/01", "/a/b/-", "/a/b/9", "/d", "/d/x", "/z",
            "/a~1b", "/m~0n", "a", "/a/b/+1",
        ] {
            assert_eq!(Some(find(body, p).unwrap()), value_pointer(body, p), "{p}");
        }
        assert!(find(b"{\"a\":1} trailing", "/a").is_err());
        assert!(find(b"not json", "/a").is_err());
        assert!(find(b"{\"a\":1}", "no slash").is_ok());
    }

    fn json() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(Value::from),
            "[ab/~]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(("[ab/~]{0,2}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_document_and_pointer_agree_with_serde_json(
            doc in json(),
            tokens in proptest::collection::vec(prop_oneof!["[ab]{0,2}", "[0-3]", Just("~1".to_owned()), Just("~0".to_owned())], 0..4),
        ) {
            let body = serde_json::to_vec(&doc).unwrap();
            let pointer: String = tokens.iter().map(|t| format!("/{t}")).collect();
            prop_assert_eq!(Some(find(&body, &pointer).unwrap()), value_pointer(&body, &pointer));
        }
    }
}
