//! Standard Webhooks signatures (<https://www.standardwebhooks.com/>) and
//! ingest-token digests.
//!
//! A signed request carries `webhook-id`, `webhook-timestamp` (Unix seconds)
//! and `webhook-signature`: space-separated `v1,<base64>` entries, each an
//! HMAC-SHA256 of `{id}.{timestamp}.{body}` under the source's key (the
//! base64 after `whsec_` in the secret). Any one matching entry is enough, so
//! senders can rotate keys.
//!
//! Invariants:
//! - Comparisons are constant time: HMAC tags through `Mac::verify_slice`,
//!   tokens through SHA-256 digests compared with `subtle`.
//! - The timestamp is checked against the caller's clock *before* the MAC,
//!   and both must pass: a replayed old request with a valid MAC is stale.
//! - Nothing here allocates in proportion to attacker input beyond the body
//!   the caller already holds: at most [`MAX_SIGNATURES`] entries are tried.

use ankusa_ops::access::digest;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// Signature entries tried per request (a sender rotating keys sends two).
pub(crate) const MAX_SIGNATURES: usize = 8;
const SECRET_PREFIX: &str = "whsec_";

/// Why a signature was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureError {
    /// The timestamp is outside the tolerance of our clock.
    Stale,
    /// Malformed, or no entry matches.
    Invalid,
}

/// The three Standard Webhooks headers of a request.
#[derive(Debug, Clone, Copy)]
pub struct Signed<'a> {
    pub id: &'a str,
    pub timestamp: &'a str,
    pub signature: &'a str,
}

/// Decodes a `whsec_<base64>` signing secret into its key.
pub(crate) fn decode_secret(secret: &str) -> Result<Vec<u8>, String> {
    let b64 = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    let key = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| {
            "must be `whsec_` followed by base64 (the Standard Webhooks form)".to_owned()
        })?;
    if !(16..=128).contains(&key.len()) {
        return Err(format!(
            "the key must be 16 to 128 bytes once decoded, it is {}",
            key.len()
        ));
    }
    Ok(key)
}

/// The `v1,<base64>` signature of a message, as a sender computes it.
#[cfg(test)]
pub(crate) fn sign(key: &[u8], id: &str, timestamp_s: u64, body: &[u8]) -> String {
    let Some(mut mac) = mac_for(key, id, &timestamp_s.to_string()) else {
        return String::new();
    };
    mac.update(body);
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

/// The MAC over `{id}.{timestamp}.`, ready for the body. HMAC takes keys
/// of any length, so `None` never happens in practice; it is handled as a
/// mismatch rather than a panic.
fn mac_for(key: &[u8], id: &str, timestamp: &str) -> Option<HmacSha256> {
    let mut mac = HmacSha256::new_from_slice(key).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    Some(mac)
}

/// Verifies a request's signature at `now_ms` with a tolerance of
/// `tolerance_s` seconds either way.
pub fn verify(
    key: &[u8],
    signed: Signed<'_>,
    body: &[u8],
    now_ms: u64,
    tolerance_s: u64,
) -> Result<(), SignatureError> {
    verify_any([key], signed, body, now_ms, tolerance_s)
}

/// [`verify`] against several keys (a rotation): an entry made with any one
/// of them is enough. No key at all verifies nothing.
pub fn verify_any<'k>(
    keys: impl IntoIterator<Item = &'k [u8]>,
    signed: Signed<'_>,
    body: &[u8],
    now_ms: u64,
    tolerance_s: u64,
) -> Result<(), SignatureError> {
    let ts: u64 = signed
        .timestamp
        .trim()
        .parse()
        .map_err(|_| SignatureError::Invalid)?;
    let now_s = now_ms / 1000;
    if now_s.abs_diff(ts) > tolerance_s {
        return Err(SignatureError::Stale);
    }
    let tags: Vec<Vec<u8>> = signed
        .signature
        .split_ascii_whitespace()
        .take(MAX_SIGNATURES)
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .collect();
    for key in keys {
        let Some(mut mac) = mac_for(key, signed.id, signed.timestamp.trim()) else {
            continue;
        };
        mac.update(body);
        // `verify_slice` consumes the MAC; clone so every entry is tried.
        if tags.iter().any(|tag| mac.clone().verify_slice(tag).is_ok()) {
            return Ok(());
        }
    }
    Err(SignatureError::Invalid)
}

/// Whether a presented token matches a configured digest, in constant time.
pub(crate) fn token_matches(presented: &[u8], expected: &[u8; 32]) -> bool {
    digest(presented).ct_eq(expected).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a signing key of decent length";

    fn signed<'a>(id: &'a str, ts: &'a str, sig: &'a str) -> Signed<'a> {
        Signed {
            id,
            timestamp: ts,
            signature: sig,
        }
    }

    #[test]
    fn a_valid_signature_passes_and_any_change_fails() {
        let now_ms = 1_700_000_000_000;
        let sig = sign(KEY, "msg_1", 1_700_000_000, b"{}");
        assert_eq!(
            verify(KEY, signed("msg_1", "1700000000", &sig), b"{}", now_ms, 300),
            Ok(())
        );
        assert_eq!(
            verify(
                KEY,
                signed("msg_1", "1700000000", &sig),
                b"{ }",
                now_ms,
                300
            ),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify(KEY, signed("msg_2", "1700000000", &sig), b"{}", now_ms, 300),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify(
                b"another key entirely!",
                signed("msg_1", "1700000000", &sig),
                b"{}",
                now_ms,
                300
            ),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn any_listed_entry_may_match() {
        let good = sign(KEY, "m", 100, b"x");
        let other = sign(b"old key old key old", "m", 100, b"x");
        let header = format!("v1a,zzz {other} {good}");
        assert_eq!(
            verify(KEY, signed("m", "100", &header), b"x", 100_000, 5),
            Ok(())
        );
    }

    #[test]
    fn the_timestamp_must_be_within_tolerance_either_way() {
        let sig = sign(KEY, "m", 1000, b"x");
        let h = signed("m", "1000", &sig);
        assert_eq!(verify(KEY, h, b"x", 1_300_000, 300), Ok(()));
        assert_eq!(
            verify(KEY, h, b"x", 1_301_000, 300),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(KEY, h, b"x", 699_000, 300),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(KEY, signed("m", "soon", &sig), b"x", 1_000_000, 300),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn secrets_decode_from_the_whsec_form() {
        let key = decode_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(key.len(), 24);
        assert!(decode_secret("whsec_***").is_err());
        assert!(decode_secret("whsec_AAAA").is_err());
    }

    #[test]
    fn tokens_compare_by_digest() {
        let d = digest(b"token-123456");
        assert!(token_matches(b"token-123456", &d));
        assert!(!token_matches(b"token-12345", &d));
        assert!(!token_matches(b"", &d));
    }

    #[test]
    fn any_of_several_keys_verifies_and_none_verifies_nothing() {
        let other: &[u8] = b"another key of decent length";
        let now_ms = 1_700_000_000_000;
        let ts = (now_ms / 1000).to_string();
        let sig = crate::delivery::sign(other, "msg_1", now_ms / 1000, b"body").unwrap();
        let s = signed("msg_1", &ts, &sig);
        assert_eq!(verify_any([KEY, other], s, b"body", now_ms, 300), Ok(()));
        assert_eq!(
            verify_any([KEY], signed("msg_1", &ts, &sig), b"body", now_ms, 300),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify_any(
                std::iter::empty(),
                signed("msg_1", &ts, &sig),
                b"body",
                now_ms,
                300
            ),
            Err(SignatureError::Invalid),
            "every key expired: nothing is accepted"
        );
    }
}
