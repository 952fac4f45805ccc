//! A bounded, redacted preview of a hook: headers with secret-looking values
//! replaced, and at most [`BODY_MAX`] bytes of body, shown as text when it
//! is UTF-8 text and as a hex dump otherwise; a JSON object or array shown
//! whole is re-indented ([`pretty_json`]) when that still fits [`BODY_MAX`].
//! The one redaction rule and the one layout: the admin API's DLQ entry
//! ([`crate::reads::dlq_detail`], which `ankusa dlq show` prints) and the
//! console's DLQ detail both build their view here, so neither can show what
//! the other hides, and both show a body the same way.

use ankusa_store::values::Envelope;

/// Body bytes shown at most.
pub const BODY_MAX: usize = 2048;
/// Bytes shown in a binary body's hex dump.
pub const HEX_MAX: usize = 256;
/// Header value characters shown at most.
pub const HEADER_MAX: usize = 120;

/// Header names (lowercase substrings) whose values are never shown.
const SECRET_WORDS: [&str; 9] = [
    "authorization",
    "signature",
    "token",
    "secret",
    "cookie",
    "api-key",
    "apikey",
    "password",
    "credential",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub source: String,
    pub idempotency_key: Option<String>,
    pub event_type: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    pub body_len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Empty,
    /// UTF-8 text, cut at [`BODY_MAX`] bytes on a character boundary
    /// (a whole JSON object or array re-indented, see [`pretty_json`]).
    Text {
        text: String,
        truncated: bool,
    },
    /// Not text: a hex dump of the first [`HEX_MAX`] bytes.
    Binary {
        hex: Vec<String>,
        truncated: bool,
    },
}

/// Whether a header's value must be hidden.
pub fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| n.contains(w))
}

pub fn build(env: &Envelope) -> Preview {
    let headers = env
        .headers
        .iter()
        .map(|(name, value)| {
            let shown = if is_secret(name) {
                format!("[redacted, {} bytes]", value.len())
            } else {
                match std::str::from_utf8(value) {
                    Ok(s) => printable(s, HEADER_MAX).0,
                    Err(_) => format!("[binary, {} bytes]", value.len()),
                }
            };
            (name.clone(), shown)
        })
        .collect();
    Preview {
        source: env.source_id.clone(),
        idempotency_key: env.idempotency_key.clone(),
        event_type: env.event_type.clone(),
        headers,
        body: body(&env.body),
        body_len: env.body.len(),
    }
}

pub fn body(b: &[u8]) -> Body {
    if b.is_empty() {
        return Body::Empty;
    }
    let head = &b[..b.len().min(BODY_MAX)];
    // A cut may split a character: accept a valid prefix up to 3 bytes short.
    let text = match std::str::from_utf8(head) {
        Ok(s) => Some(s),
        Err(e) if e.error_len().is_none() && head.len() == BODY_MAX => {
            std::str::from_utf8(&head[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    match text {
        Some(s) if looks_textual(s) => {
            let (text, cut) = printable(s, BODY_MAX);
            let truncated = cut || b.len() > head.len();
            // Re-indented from the printable text, so what the redaction
            // and the control-character rule removed stays removed.
            let text = match truncated {
                false => pretty_json(&text).unwrap_or(text),
                true => text,
            };
            Body::Text { text, truncated }
        }
        _ => {
            let shown = &b[..b.len().min(HEX_MAX)];
            let hex = shown
                .chunks(16)
                .enumerate()
                .map(|(i, c)| {
                    let bytes: Vec<String> = c.iter().map(|x| format!("{x:02x}")).collect();
                    let ascii: String = c
                        .iter()
                        .map(|&x| {
                            if x.is_ascii_graphic() || x == b' ' {
                                x as char
                            } else {
                                '.'
                            }
                        })
                        .collect();
                    format!("{:04x}  {:<47}  {ascii}", i * 16, bytes.join(" "))
                })
                .collect();
            Body::Binary {
                hex,
                truncated: b.len() > shown.len(),
            }
        }
    }
}

/// `text` re-indented by two spaces per level when it is one JSON object or
/// array and the result is at most [`BODY_MAX`] bytes; `None` otherwise
/// (a scalar, not JSON, or too long: shown as it came). Only whitespace
/// outside strings changes: key order, numbers and escapes stay as sent.
pub fn pretty_json(text: &str) -> Option<String> {
    let t = text.trim();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<serde::de::IgnoredAny>(t).ok()?;
    let mut out = String::with_capacity(t.len() * 2);
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    };
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            out.push(c);
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else {
            match c {
                '"' => {
                    in_str = true;
                    out.push(c);
                }
                '{' | '[' => {
                    while chars.next_if(|c| c.is_whitespace()).is_some() {}
                    out.push(c);
                    // `{}` and `[]` stay on one line.
                    match chars.next_if(|n| matches!(n, '}' | ']')) {
                        Some(close) => out.push(close),
                        None => {
                            depth += 1;
                            newline(&mut out, depth);
                        }
                    }
                }
                '}' | ']' => {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                    out.push(c);
                }
                ',' => {
                    out.push(',');
                    newline(&mut out, depth);
                }
                ':' => out.push_str(": "),
                c if c.is_whitespace() => {}
                c => out.push(c),
            }
        }
        if out.len() > BODY_MAX {
            return None;
        }
    }
    Some(out)
}

fn looks_textual(s: &str) -> bool {
    let ctrl = s
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        .count();
    ctrl * 20 <= s.chars().count().max(1)
}

/// Replaces control characters (which would drive the terminal) and cuts to
/// `max` bytes. Returns whether it cut.
fn printable(s: &str, max: usize) -> (String, bool) {
    let mut out = String::with_capacity(s.len().min(max));
    let mut cut = false;
    for c in s.chars() {
        if out.len() + c.len_utf8() > max {
            cut = true;
            break;
        }
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push_str("  "),
            c if c.is_control() => out.push('�'),
            c => out.push(c),
        }
    }
    (out, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(headers: &[(&str, &[u8])], body: &[u8]) -> Envelope {
        Envelope {
            received_at: 0,
            source_id: "src".into(),
            tenant: "t".into(),
            idempotency_key: None,
            event_type: None,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_vec()))
                .collect(),
            body: body.to_vec(),
        }
    }

    #[test]
    fn secret_looking_headers_are_redacted() {
        let p = build(&env(
            &[
                ("Authorization", b"Bearer sk_live_abc"),
                ("X-Webhook-Signature", b"v1,abc"),
                ("x-api-key", b"k"),
                ("Content-Type", b"application/json"),
            ],
            b"{}",
        ));
        let shown: Vec<&str> = p.headers.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(shown[0], "[redacted, 18 bytes]");
        assert_eq!(shown[1], "[redacted, 6 bytes]");
        assert_eq!(shown[2], "[redacted, 1 bytes]");
        assert_eq!(shown[3], "application/json");
        assert!(!format!("{p:?}").contains("sk_live"));
    }

    #[test]
    fn long_text_is_cut_and_binary_is_hex() {
        let long = "a".repeat(10_000);
        match body(long.as_bytes()) {
            Body::Text { text, truncated } => {
                assert_eq!(text.len(), BODY_MAX);
                assert!(truncated);
            }
            other => panic!("{other:?}"),
        }
        let bin: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        match body(&bin) {
            Body::Binary { hex, truncated } => {
                assert_eq!(hex.len(), HEX_MAX / 16);
                assert!(truncated);
                assert!(hex[0].starts_with("0000  00 01 02"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(body(b""), Body::Empty);
    }

    #[test]
    fn a_multibyte_character_cut_at_the_limit_stays_text() {
        let s = "é".repeat(BODY_MAX); // 2 bytes each
        assert!(matches!(
            body(s.as_bytes()),
            Body::Text {
                truncated: true,
                ..
            }
        ));
    }

    #[test]
    fn a_whole_json_body_is_re_indented_and_nothing_else_changes() {
        let sent = br#"{"event":"order.updated","n":1.50,"s":"a, b: {c} \"q\" [d]","e":{},"l":[1, [],{"x":null}]}"#;
        let Body::Text { text, truncated } = body(sent) else {
            panic!("text")
        };
        assert!(!truncated);
        let want = r#"{
  "event": "order.updated",
  "n": 1.50,
  "s": "a, b: {c} \"q\" [d]",
  "e": {},
  "l": [
    1,
    [],
    {
      "x": null
    }
  ]
}"#;
        assert_eq!(text, want);
        // The same value, only whitespace outside strings differs.
        let a: serde_json::Value = serde_json::from_slice(sent).expect("json");
        let b: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(a, b);
        // Not JSON, a scalar, or cut at the bound: shown as sent.
        for as_sent in [&b"{not json"[..], br#""just a string""#, b"42"] {
            let Body::Text { text, .. } = body(as_sent) else {
                panic!("text")
            };
            assert_eq!(text.as_bytes(), as_sent);
        }
        let big = format!("[{}]", vec!["1"; 800].join(","));
        assert!(big.len() < BODY_MAX, "compact it fits");
        assert_eq!(pretty_json(&big), None, "re-indented it would not");
        let Body::Text { text, .. } = body(big.as_bytes()) else {
            panic!("text")
        };
        assert_eq!(text, big);
        let cut = format!("{{\"pad\":\"{}\"}}", "x".repeat(BODY_MAX));
        let Body::Text { text, truncated } = body(cut.as_bytes()) else {
            panic!("text")
        };
        assert!(truncated && text.starts_with("{\"pad\":\"xxx"));
    }

    #[test]
    fn a_json_body_keeps_the_control_character_rule() {
        // A raw escape is replaced before the body is re-indented; an
        // escaped one (\u001b) stays the six characters it was.
        let Body::Text { text, .. } = body(b"{\"a\":\"x\x1b[2Jy and more text\"}") else {
            panic!("text")
        };
        assert!(!text.contains('\x1b'));
        let Body::Text { text, .. } = body(br#"{"a":"\u001b[2J"}"#) else {
            panic!("text")
        };
        assert_eq!(text, "{\n  \"a\": \"\\u001b[2J\"\n}");
    }

    #[test]
    fn escape_sequences_cannot_reach_the_terminal() {
        // Mostly text with an escape sequence: shown as text, escape replaced.
        match body(b"{\"event\": \"hello \x1b[2J world, a longer message\"}") {
            Body::Text { text, .. } => assert!(!text.contains('\x1b') && text.contains("[2J")),
            other => panic!("{other:?}"),
        }
        // Mostly control bytes: a hex dump, whose ASCII column is dotted.
        match body(b"\x1b[2J\x1b[H\x07\x07") {
            Body::Binary { hex, .. } => assert!(!hex.concat().contains('\x1b')),
            other => panic!("{other:?}"),
        }
    }
}
