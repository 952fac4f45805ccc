//! One delivery attempt of one claimed row, and the transition it leads to.
//!
//! Owns: the HTTP client (one pooled `reqwest::Client` for every sink), the
//! request a sink receives (the stored body and headers, the delivery
//! headers, the optional Standard Webhooks signature), the classification of
//! the answer, the backoff, and the commit that moves the row out of
//! inflight.
//!
//! Invariants:
//! - A claimed row leaves inflight only through [`Deliverer::deliver`], by
//!   exactly one of `delivered`, `retry` or `dead_letter`, in one commit. If
//!   that commit fails (or the process dies first) the row stays inflight
//!   and boot recovery makes it due again: delivery is at least once.
//! - 2xx is delivered. 408, 425, 429, 5xx, timeouts and connection errors
//!   are retried with exponential backoff and full jitter, a `Retry-After`
//!   (seconds) stretching the wait up to the sink's `retry_after_max`. Other
//!   answers (3xx, which are never followed, and other 4xx unless the sink
//!   sets `retry_4xx`) dead-letter at once. A retryable failure on the last
//!   allowed attempt dead-letters; the delivery row keeps the last status
//!   and error either way. A replayed row starts a new round of
//!   `max_attempts` (attempts keep counting across rounds).
//! - Deliveries are not synced commits: losing one in a crash only means
//!   the row is delivered again, which the at-least-once contract allows.

use std::sync::Arc;
use std::time::Duration;

use ankusa_store::values::DeliveryRow;
use ankusa_store::{queries, transitions, Batch, HookId, InflightRow, Store, StoreError};
use base64::Engine as _;
use hmac::Mac as _;

use super::clock::SharedClock;
use super::config::{live, SinkConfig};
use super::metrics::Metrics;
use super::recorder::{RecordError, Recorder};
use super::reload::{Live, SinkHandle};

/// Headers from the stored request that are never forwarded: they describe
/// the original connection, not the hook.
const HOP_BY_HOP: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

/// Bytes of a failing answer's body kept in the error text.
const ERROR_BODY: usize = 120;

/// How long an answer's body is read after its status line: long enough
/// for a small body on a slow link, short against the sink timeout. The
/// outcome does not wait for more (see [`Deliverer::attempt`]).
pub const BODY_WAIT: Duration = Duration::from_millis(250);

/// What an attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Delivered {
        status: u16,
    },
    /// Worth another attempt; `retry_after` is the sink's own hint.
    Retry {
        status: u16,
        error: String,
        retry_after: Option<Duration>,
    },
    /// Will never succeed as is.
    Permanent {
        status: u16,
        error: String,
    },
}

/// Classifies an HTTP status. `retry_4xx` turns the permanent 4xx into
/// retryable ones.
pub fn classify_status(status: u16, retry_4xx: bool) -> Retryability {
    match status {
        200..=299 => Retryability::Success,
        408 | 425 | 429 | 500..=599 => Retryability::Retry,
        400..=499 if retry_4xx => Retryability::Retry,
        _ => Retryability::Permanent,
    }
}

/// The three classes of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retryability {
    Success,
    Retry,
    Permanent,
}

/// Full-jitter exponential backoff before attempt `attempts + 1`, given
/// that `attempts` attempts have been made (at least 1): uniform in
/// `0..=min(max, initial * 2^(attempts-1))`, then raised to the sink's
/// `Retry-After` (cut to `retry_after_max`) when it sent one.
pub fn backoff(
    sink: &SinkConfig,
    attempts: u16,
    retry_after: Option<Duration>,
    rng: &mut impl rand::Rng,
) -> Duration {
    let initial = sink.backoff_initial.0.as_millis() as u64;
    let max = sink.backoff_max.0.as_millis() as u64;
    let shift = u32::from(attempts.saturating_sub(1)).min(40);
    let cap = initial.saturating_mul(1u64 << shift).min(max);
    let jitter = rng.random_range(0..=cap);
    let hinted = retry_after
        .map(|d| d.min(sink.retry_after_max.0).as_millis() as u64)
        .unwrap_or(0);
    Duration::from_millis(jitter.max(hinted))
}

/// `Retry-After` in its delta-seconds form. The HTTP-date form is ignored
/// (the plain backoff applies): parsing it needs a dependency this crate
/// does not carry, and sinks overwhelmingly send seconds.
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// The Standard Webhooks `v1,` signature of `{id}.{ts}.{body}`.
pub fn sign(key: &[u8], id: &str, ts: u64, body: &[u8]) -> Option<String> {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(ts.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// How a delivery ended, for the dispatcher's bookkeeping and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Delivered,
    Retried,
    Dead,
    /// The outcome could not be recorded; the row stays inflight until the
    /// dispatcher's next tick returns it to due (it is delivered again).
    Unrecorded,
}

/// Delivers claimed rows.
pub struct Deliverer {
    client: reqwest::Client,
    store: Arc<Store>,
    clock: SharedClock,
    metrics: Arc<Metrics>,
    /// The sinks' breakers and health, which each attempt feeds.
    control: Arc<crate::sink_control::SinkControl>,
    /// The sinks in force; an attempt keeps the sink it looked up.
    live: Arc<Live>,
    /// Commits outcomes in groups, off the runtime's workers.
    recorder: Recorder,
}

impl Deliverer {
    pub fn new(
        store: Arc<Store>,
        clock: SharedClock,
        metrics: Arc<Metrics>,
        control: Arc<crate::sink_control::SinkControl>,
        live: Arc<Live>,
        per_sink: usize,
        recorder: Recorder,
    ) -> Result<Self, reqwest::Error> {
        // Redirects are not followed: a sink that moved must be
        // reconfigured, not silently chased to another host.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(per_sink)
            .pool_idle_timeout(Duration::from_secs(90))
            .user_agent(concat!("ankusa/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            client,
            store,
            clock,
            metrics,
            control,
            live,
            recorder,
        })
    }

    /// The sink a row is owed to, if the configuration still has it.
    pub fn sink_of(&self, source_id: &str, sink: u16) -> Option<SinkHandle> {
        self.live.current().sink(source_id, sink)
    }

    /// One attempt of `row`, and the transition it leads to.
    pub async fn deliver(&self, row: InflightRow) -> Ended {
        let recorded = match self.deliver_inner(row).await {
            Ok((ended, b)) => self.recorder.commit(b).await.map(|()| ended),
            Err(e) => Err(RecordError::Store(Arc::new(e))),
        };
        match recorded {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(
                    hook = %HookId(row.seq).public(self.store.node()), sink = row.sink, error = %e,
                    "cannot record a delivery outcome; the next tick returns the row to due"
                );
                Ended::Unrecorded
            }
        }
    }

    /// The attempt, and the batch that records how it ended.
    async fn deliver_inner(&self, row: InflightRow) -> Result<(Ended, Batch), StoreError> {
        let env = queries::hook(&self.store, row.seq)?;
        let mut drow = queries::delivery(&self.store, row.seq, row.sink)?
            .unwrap_or_else(|| DeliveryRow::new(row.ord, row.size));
        // One lookup for the attempt and its retry policy: a reload in
        // between does not mix two configurations in one attempt.
        let sink = env
            .as_ref()
            .and_then(|e| self.sink_of(&e.source_id, row.sink));
        let event_type = env.as_ref().and_then(|e| e.event_type.clone());
        let (verdict, source_id) = match &env {
            None => (
                Verdict::Permanent {
                    status: 0,
                    error: "the hook's envelope is missing".into(),
                },
                String::new(),
            ),
            Some(env) => match &sink {
                None => (
                    Verdict::Permanent {
                        status: 0,
                        error: format!(
                            "source `{}` has no sink {} in the configuration",
                            env.source_id, row.sink
                        ),
                    },
                    env.source_id.clone(),
                ),
                Some(sink) => {
                    let attempt = drow.attempts.saturating_add(1);
                    let started = std::time::Instant::now();
                    self.control.board.started(&env.source_id, row.sink);
                    let verdict = self.attempt(sink, env, row, attempt).await;
                    let took = started.elapsed();
                    self.metrics.dispatch.attempt_seconds.observe(took);
                    let (status, delivered, error) = match &verdict {
                        Verdict::Delivered { status } => (*status, true, None),
                        Verdict::Retry { status, error, .. }
                        | Verdict::Permanent { status, error } => {
                            (*status, false, Some(error.as_str()))
                        }
                    };
                    self.control.breakers.record(
                        &env.source_id,
                        row.sink,
                        row.seq,
                        match verdict {
                            Verdict::Retry { .. } => super::breaker::AttemptResult::Failed,
                            Verdict::Delivered { .. } | Verdict::Permanent { .. } => {
                                super::breaker::AttemptResult::Answered
                            }
                        },
                        self.clock.now_ms(),
                    );
                    self.control.board.ended(
                        &env.source_id,
                        row.sink,
                        &super::sink_health::Attempt {
                            tenant: &env.tenant,
                            now_ms: self.clock.now_ms(),
                            latency_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                            status,
                            delivered,
                            error,
                        },
                    );
                    (verdict, env.source_id.clone())
                }
            },
        };
        self.metrics
            .dispatch
            .attempts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = self.clock.now_ms();
        let mut b = Batch::new();
        let ended = match verdict {
            Verdict::Delivered { .. } => {
                transitions::delivered(&mut b, &row);
                Ended::Delivered
            }
            Verdict::Retry {
                status,
                error,
                retry_after,
            } => {
                drow.record(now, status, &error);
                match &sink {
                    // Attempts count across replays (the history stays
                    // honest); each replay grants a new round of
                    // `max_attempts`, so the budget is per round.
                    Some(sink) if u64::from(drow.attempts) % sink.max_attempts.0 != 0 => {
                        let wait = backoff(sink, drow.attempts, retry_after, &mut rand::rng());
                        let at = now.saturating_add(wait.as_millis() as u64);
                        transitions::retry(&mut b, &row, &drow, at);
                        Ended::Retried
                    }
                    _ => {
                        transitions::dead_letter(
                            &mut b,
                            &row,
                            &drow,
                            now,
                            &source_id,
                            event_type.as_deref(),
                        );
                        Ended::Dead
                    }
                }
            }
            Verdict::Permanent { status, error } => {
                drow.record(now, status, &error);
                transitions::dead_letter(
                    &mut b,
                    &row,
                    &drow,
                    now,
                    &source_id,
                    event_type.as_deref(),
                );
                Ended::Dead
            }
        };
        Ok((ended, b))
    }

    /// Sends the request and classifies the answer.
    async fn attempt(
        &self,
        sink: &SinkConfig,
        env: &ankusa_store::Envelope,
        row: InflightRow,
        attempt: u16,
    ) -> Verdict {
        // The id the client was given: a sink deduplicates on it, so it must
        // be unique across the fleet (docs/fleet.md).
        let id = HookId(row.seq).public(self.store.node());
        // One signature per unexpired secret, in the one header (Standard
        // Webhooks lets a receiver accept any): a receiver mid-rotation
        // verifies with whichever secret it has. A sink whose every secret
        // has expired is not called unsigned.
        let ts = self.clock.now_ms() / 1000;
        let signature = if sink.signing_keys.is_empty() {
            None
        } else {
            let sigs: Vec<String> = live(&sink.signing_keys, self.clock.now_ms())
                .filter_map(|key| sign(key, &id, ts, &env.body))
                .collect();
            if sigs.is_empty() {
                return Verdict::Retry {
                    status: 0,
                    error: "every signing secret of the sink has expired: add one \
                            (sources.sinks.signing_secrets) and reload"
                        .into(),
                    retry_after: None,
                };
            }
            Some(sigs.join(" "))
        };
        let mut req = self
            .client
            .post(&sink.url)
            .timeout(sink.timeout.0)
            .body(env.body.clone());
        for (name, value) in &env.headers {
            let lower = name.to_ascii_lowercase();
            if HOP_BY_HOP.contains(&lower.as_str()) {
                continue;
            }
            // A signed delivery carries our own Standard Webhooks headers.
            if signature.is_some() && lower.starts_with("webhook-") {
                continue;
            }
            req = req.header(name.as_str(), value.as_slice());
        }
        req = req
            .header("ankusa-hook-id", id.as_str())
            .header("ankusa-attempt", attempt.to_string())
            .header("ankusa-tenant", env.tenant.as_str());
        if let Some(sig) = signature {
            req = req
                .header("webhook-id", id.as_str())
                .header("webhook-timestamp", ts.to_string())
                .header("webhook-signature", sig);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                let kind = if e.is_timeout() {
                    "timeout"
                } else if e.is_connect() {
                    "connection failed"
                } else {
                    "request failed"
                };
                return Verdict::Retry {
                    status: 0,
                    error: format!("{kind}: {}", error_chain(&e)),
                    retry_after: None,
                };
            }
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let class = classify_status(status, sink.retry_4xx);
        // The status line decides: the body is read only for the error text
        // and so that a small answer leaves its connection reusable, and
        // never for longer than BODY_WAIT. Waiting for a 2xx's body would
        // keep the row in flight while a sink trickles it, up to the sink
        // timeout, and a crash in that window delivers the hook again.
        let snippet = read_snippet(resp).await;
        if class == Retryability::Success {
            return Verdict::Delivered { status };
        }
        let error = if snippet.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {snippet}")
        };
        match class {
            Retryability::Success => Verdict::Delivered { status },
            Retryability::Retry => Verdict::Retry {
                status,
                error,
                retry_after,
            },
            Retryability::Permanent => Verdict::Permanent { status, error },
        }
    }
}

/// Reads the start of a body (so a small answer's connection can be
/// reused) for at most [`BODY_WAIT`], and keeps at most [`ERROR_BODY`]
/// bytes of it as text. A body not read to its end closes the connection.
async fn read_snippet(mut resp: reqwest::Response) -> String {
    let mut buf = Vec::new();
    // Read at most 64 KiB: a sink answering with a huge body must not make
    // us buffer it; the connection is simply not reused then.
    let read = async {
        while buf.len() < 64 * 1024 {
            match resp.chunk().await {
                Ok(Some(c)) => buf.extend_from_slice(&c),
                _ => break,
            }
        }
    };
    // A slow body keeps what arrived in time.
    let _ = tokio::time::timeout(BODY_WAIT, read).await;
    let end = buf.len().min(ERROR_BODY);
    String::from_utf8_lossy(&buf[..end])
        .chars()
        .filter(|c| !c.is_control())
        .collect()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Dur, Int};

    fn sink() -> SinkConfig {
        SinkConfig {
            name: None,
            url: "http://127.0.0.1:9/".into(),
            timeout: Dur(Duration::from_secs(1)),
            max_attempts: Int(5),
            backoff_initial: Dur(Duration::from_millis(100)),
            backoff_max: Dur(Duration::from_millis(1000)),
            retry_after_max: Dur(Duration::from_millis(5000)),
            retry_4xx: false,
            signing_secret: None,
            signing_secrets: Vec::new(),
            signing_keys: Vec::new(),
            breaker: None,
            retired: false,
            max_in_flight: None,
            rate: None,
            events: None,
            patterns: None,
            dropped: false,
            retired_since: 0,
        }
    }

    #[test]
    fn statuses_are_classified_as_the_contract_says() {
        for s in [200, 204, 299] {
            assert_eq!(classify_status(s, false), Retryability::Success);
        }
        for s in [408, 425, 429, 500, 502, 503, 599] {
            assert_eq!(classify_status(s, false), Retryability::Retry, "{s}");
        }
        for s in [301, 400, 401, 404, 410, 422] {
            assert_eq!(classify_status(s, false), Retryability::Permanent, "{s}");
        }
        assert_eq!(classify_status(404, true), Retryability::Retry);
        assert_eq!(classify_status(301, true), Retryability::Permanent);
    }

    #[test]
    fn backoff_is_full_jitter_under_an_exponential_cap() {
        let s = sink();
        let mut rng = rand::rng();
        for attempts in 1..=8u16 {
            let cap = (100u64 << (attempts - 1)).min(1000);
            let mut most = 0;
            for _ in 0..500 {
                let d = backoff(&s, attempts, None, &mut rng).as_millis() as u64;
                assert!(d <= cap, "attempt {attempts}: {d} > {cap}");
                most = most.max(d);
            }
            // Jitter actually spreads over the window.
            assert!(most > cap / 2, "attempt {attempts}: max {most} of {cap}");
        }
    }

    #[test]
    fn retry_after_stretches_the_wait_within_its_bound() {
        let s = sink();
        let mut rng = rand::rng();
        let d = backoff(&s, 1, Some(Duration::from_secs(3)), &mut rng);
        assert_eq!(d, Duration::from_secs(3));
        let d = backoff(&s, 1, Some(Duration::from_secs(3600)), &mut rng);
        assert_eq!(d, Duration::from_secs(5), "cut to retry_after_max");
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn signatures_verify_with_the_ingest_verifier() {
        let key = b"0123456789abcdef0123".to_vec();
        let sig = sign(&key, "hk_0000000000000001", 1_700_000_000, b"{}").unwrap();
        let signed = crate::signature::Signed {
            id: "hk_0000000000000001",
            timestamp: "1700000000",
            signature: &sig,
        };
        assert!(crate::signature::verify(&key, signed, b"{}", 1_700_000_000_000, 300).is_ok());
    }
}
