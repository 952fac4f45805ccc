//! Every way an ingest request can end, as one closed enum.
//!
//! Owns the stable `error` codes of `docs/delivery.md`, their HTTP statuses
//! and `Retry-After` values, and the outcome labels of the ingest metrics.
//! Clients and dashboards depend on these strings: never rename one, only
//! add. Because the enum is closed, the metrics label set is bounded.

use axum::http::StatusCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Committed and synced: `202 {"id"}`.
    Accepted,
    /// The idempotency key was seen within its TTL: `202` with the original id.
    Duplicate,
    SourceUnknown,
    TokenMissing,
    TokenInvalid,
    SignatureMissing,
    SignatureInvalid,
    SignatureStale,
    TenantMissing,
    TenantInvalid,
    IdempotencyKeyInvalid,
    HeaderInvalid,
    HeaderAmbiguous,
    BodyTooLarge,
    BodyTimeout,
    BodyUnreadable,
    TenantLimit,
    QueueFull,
    Overloaded,
    StoreUnavailable,
    ShuttingDown,
    /// The listener holds `http.max_connections`: answered before any
    /// request is read, then the connection is closed.
    ConnectionsFull,
    /// A batch entry that is not one JSON object of the documented fields.
    EntryInvalid,
    /// A batch request past its entry or byte limit.
    BatchTooLarge,
    /// The hook's event type, where its source reads one, cannot be read
    /// as one (`routing::EventTypeError`).
    EventTypeInvalid,
}

impl Outcome {
    pub const ALL: [Outcome; 25] = [
        Outcome::Accepted,
        Outcome::Duplicate,
        Outcome::SourceUnknown,
        Outcome::TokenMissing,
        Outcome::TokenInvalid,
        Outcome::SignatureMissing,
        Outcome::SignatureInvalid,
        Outcome::SignatureStale,
        Outcome::TenantMissing,
        Outcome::TenantInvalid,
        Outcome::IdempotencyKeyInvalid,
        Outcome::HeaderInvalid,
        Outcome::HeaderAmbiguous,
        Outcome::BodyTooLarge,
        Outcome::BodyTimeout,
        Outcome::BodyUnreadable,
        Outcome::TenantLimit,
        Outcome::QueueFull,
        Outcome::Overloaded,
        Outcome::StoreUnavailable,
        Outcome::ShuttingDown,
        Outcome::ConnectionsFull,
        Outcome::EntryInvalid,
        Outcome::BatchTooLarge,
        Outcome::EventTypeInvalid,
    ];

    /// The stable code: the `error` field of a refusal and the `outcome`
    /// label of `ankusa_ingest_requests_total`.
    pub fn code(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Duplicate => "duplicate",
            Outcome::SourceUnknown => "source_unknown",
            Outcome::TokenMissing => "token_missing",
            Outcome::TokenInvalid => "token_invalid",
            Outcome::SignatureMissing => "signature_missing",
            Outcome::SignatureInvalid => "signature_invalid",
            Outcome::SignatureStale => "signature_stale",
            Outcome::TenantMissing => "tenant_missing",
            Outcome::TenantInvalid => "tenant_invalid",
            Outcome::IdempotencyKeyInvalid => "idempotency_key_invalid",
            Outcome::HeaderInvalid => "header_invalid",
            Outcome::HeaderAmbiguous => "header_ambiguous",
            Outcome::BodyTooLarge => "body_too_large",
            Outcome::BodyTimeout => "body_timeout",
            Outcome::BodyUnreadable => "body_unreadable",
            Outcome::TenantLimit => "tenant_limit",
            Outcome::QueueFull => "queue_full",
            Outcome::Overloaded => "overloaded",
            Outcome::StoreUnavailable => "store_unavailable",
            Outcome::ShuttingDown => "shutting_down",
            Outcome::ConnectionsFull => "connections_full",
            Outcome::EntryInvalid => "entry_invalid",
            Outcome::BatchTooLarge => "batch_too_large",
            Outcome::EventTypeInvalid => "event_type_invalid",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Outcome::Accepted | Outcome::Duplicate => StatusCode::ACCEPTED,
            Outcome::SourceUnknown => StatusCode::NOT_FOUND,
            Outcome::TokenMissing
            | Outcome::TokenInvalid
            | Outcome::SignatureMissing
            | Outcome::SignatureInvalid
            | Outcome::SignatureStale => StatusCode::UNAUTHORIZED,
            Outcome::TenantMissing
            | Outcome::TenantInvalid
            | Outcome::IdempotencyKeyInvalid
            | Outcome::HeaderInvalid
            | Outcome::HeaderAmbiguous
            | Outcome::BodyUnreadable
            | Outcome::EntryInvalid
            | Outcome::EventTypeInvalid => StatusCode::BAD_REQUEST,
            Outcome::BodyTooLarge | Outcome::BatchTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Outcome::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Outcome::TenantLimit
            | Outcome::QueueFull
            | Outcome::Overloaded
            | Outcome::StoreUnavailable
            | Outcome::ShuttingDown
            | Outcome::ConnectionsFull => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Seconds for `Retry-After`, on the refusals worth retrying.
    pub fn retry_after(self) -> Option<u32> {
        match self {
            // A tenant slot frees only when an operator acts: back off long.
            Outcome::TenantLimit => Some(300),
            Outcome::QueueFull
            | Outcome::Overloaded
            | Outcome::ShuttingDown
            | Outcome::ConnectionsFull => Some(1),
            Outcome::StoreUnavailable => Some(5),
            _ => None,
        }
    }

    /// A sentence for humans; clients must branch on [`Outcome::code`].
    pub fn message(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Duplicate => "duplicate of an earlier hook with the same Idempotency-Key",
            Outcome::SourceUnknown => "no source with this id is configured",
            Outcome::TokenMissing => "this source needs `Authorization: Bearer <token>`",
            Outcome::TokenInvalid => "the ingest token is wrong",
            Outcome::SignatureMissing => {
                "this source needs webhook-id, webhook-timestamp and webhook-signature headers"
            }
            Outcome::SignatureInvalid => "no webhook-signature entry matches the body",
            Outcome::SignatureStale => "webhook-timestamp is outside the allowed tolerance",
            Outcome::TenantMissing => "this source needs the tenant header",
            Outcome::TenantInvalid => {
                "tenant ids are 1 to 128 bytes of UTF-8 in normal form C, without control, \
                 invisible, direction-changing or private-use characters (docs/delivery.md)"
            }
            Outcome::IdempotencyKeyInvalid => {
                "Idempotency-Key must be 1 to 255 printable ASCII characters"
            }
            Outcome::HeaderInvalid => "a kept header is not text or is longer than 8192 bytes",
            Outcome::HeaderAmbiguous => {
                "a header that must appear once appears more than once (Authorization, the \
                 tenant header, Idempotency-Key, webhook-id, webhook-timestamp, \
                 webhook-signature), or Content-Length comes with Transfer-Encoding"
            }
            Outcome::BodyTooLarge => "the body is larger than this source accepts",
            Outcome::BodyTimeout => "the body did not arrive in time",
            Outcome::BodyUnreadable => "the body could not be read",
            Outcome::TenantLimit => "the node holds tenants.max tenants and refuses new ones",
            Outcome::QueueFull => "the write queue is full; retry shortly",
            Outcome::Overloaded => "too many requests in progress; retry shortly",
            Outcome::StoreUnavailable => "the store could not commit the hook; nothing was stored",
            Outcome::ShuttingDown => {
                "the daemon is shutting down; retry on another node or shortly"
            }
            Outcome::ConnectionsFull => {
                "this listener holds http.max_connections connections; retry shortly"
            }
            Outcome::EntryInvalid => {
                "a batch entry must be one JSON object of the documented fields, with exactly \
                 one of body and body_base64 (docs/delivery.md)"
            }
            Outcome::BatchTooLarge => {
                "a batch request holds at most 1000 entries and 16 MiB (docs/delivery.md)"
            }
            Outcome::EventTypeInvalid => {
                "this source reads an event type from a header or the JSON body: the header \
                 appears more than once, the body is not JSON, the value is not a string, or \
                 it is not 1 to 128 printable ASCII characters"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_every_refusal_is_4xx_or_5xx() {
        let mut seen = std::collections::HashSet::new();
        for o in Outcome::ALL {
            assert!(seen.insert(o.code()), "{} twice", o.code());
            let accepted = matches!(o, Outcome::Accepted | Outcome::Duplicate);
            assert_eq!(o.status().is_success(), accepted, "{o:?}");
            if o.status() == StatusCode::SERVICE_UNAVAILABLE {
                assert!(o.retry_after().is_some(), "{o:?} needs Retry-After");
            }
        }
        assert_eq!(Outcome::TenantLimit.retry_after(), Some(300));
    }

    /// docs/delivery.md lists every code: a new one must be documented.
    #[test]
    fn every_code_is_documented() {
        let doc = include_str!("../../docs/delivery.md");
        for o in Outcome::ALL {
            assert!(
                doc.contains(&format!("`{}`", o.code())),
                "docs/delivery.md lacks `{}`",
                o.code()
            );
        }
    }
}
