//! The daemon's notion of "now", as a parameter.
//!
//! Every component that stamps or compares a time (received-at, dedupe
//! expiry, signature tolerance, inflight recovery) reads it through a
//! [`Clock`], so tests can drive time by hand instead of sleeping.

use std::sync::Arc;

/// Milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        ankusa_store::system_now_ms()
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

/// A clock that only moves when told to.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct FakeClock(pub std::sync::atomic::AtomicU64);

#[cfg(test)]
impl FakeClock {
    pub fn at(ms: u64) -> Arc<Self> {
        Arc::new(Self(std::sync::atomic::AtomicU64::new(ms)))
    }
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}
