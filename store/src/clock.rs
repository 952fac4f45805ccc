//! The system clock, read in one place.
//!
//! Components take `now` as a parameter, so tests drive time; the binaries
//! read this clock and pass it down. Inside the store it is read only for
//! timestamps no decision depends on: a write fault's or a damaged file's
//! `since_ms`, and the time a quarantined row was set aside in a pass that
//! has no `now` (docs/architecture.md, "Time").

/// Milliseconds since the Unix epoch from the system clock.
pub fn system_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
