//! Per-key request and token budgets (GCRA via `governor`). Request limits admit evenly
//! spaced requests (burst 1), so a 600/min key sees 10 requests a second, not 600 at once.

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub struct KeyLimits {
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<DefaultDirectRateLimiter>,
    token_burst: u32,
}

impl KeyLimits {
    pub fn new(requests_per_minute: Option<u32>, tokens_per_minute: Option<u32>) -> Self {
        let requests = requests_per_minute.and_then(NonZeroU32::new).map(|rpm| {
            let period = Duration::from_secs_f64(60.0 / rpm.get() as f64);
            RateLimiter::direct(
                Quota::with_period(period)
                    .expect("positive period")
                    .allow_burst(NonZeroU32::MIN),
            )
        });
        let tokens = tokens_per_minute
            .and_then(NonZeroU32::new)
            .map(|tpm| RateLimiter::direct(Quota::per_minute(tpm)));
        Self {
            requests,
            tokens,
            token_burst: tokens_per_minute.unwrap_or(0),
        }
    }

    pub fn unlimited() -> Self {
        Self::new(None, None)
    }

    /// Admits one request of about `tokens` tokens now, or says how long to wait.
    pub fn try_admit(&self, tokens: u32) -> Result<(), Duration> {
        let clock = DefaultClock::default();
        if let Some(t) = &self.tokens {
            // A request larger than a whole minute's budget is admitted as a full minute's worth.
            let n = NonZeroU32::new(tokens.clamp(1, self.token_burst.max(1))).unwrap();
            match t.check_n(n) {
                Ok(Ok(())) => {}
                Ok(Err(not_until)) => return Err(not_until.wait_time_from(clock.now())),
                Err(_) => return Err(Duration::from_secs(1)),
            }
        }
        if let Some(r) = &self.requests {
            if let Err(not_until) = r.check() {
                return Err(not_until.wait_time_from(clock.now()));
            }
        }
        Ok(())
    }
}

/// Picks the key to use: keys are tried starting after the last one used, and the first
/// with room now wins, so load spreads over keys in proportion to their capacity.
pub struct Rotation {
    next: AtomicUsize,
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            next: AtomicUsize::new(0),
        }
    }
}

impl Rotation {
    pub async fn admit(&self, keys: &[&KeyLimits], tokens: u32) -> usize {
        assert!(!keys.is_empty());
        loop {
            let start = self.next.load(Ordering::Relaxed);
            let mut wait = Duration::from_secs(60);
            for k in 0..keys.len() {
                let i = (start + k) % keys.len();
                match keys[i].try_admit(tokens) {
                    Ok(()) => {
                        self.next.store(i + 1, Ordering::Relaxed);
                        return i;
                    }
                    Err(w) => wait = wait.min(w),
                }
            }
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_limit_spaces_requests() {
        let k = KeyLimits::new(Some(60), None);
        assert!(k.try_admit(1).is_ok());
        let wait = k.try_admit(1).unwrap_err();
        assert!(
            wait > Duration::from_millis(900) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
    }

    #[test]
    fn token_limit_holds_back_big_requests() {
        let k = KeyLimits::new(None, Some(1000));
        assert!(k.try_admit(900).is_ok());
        assert!(k.try_admit(900).is_err());
    }
}
