//! Every random choice draws from a stream derived from the run's master seed and a stable
//! key, so results never depend on scheduling, iteration order of other stages or time.

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};

pub type StageRng = ChaCha20Rng;

/// A ChaCha20 stream for `(seed, stage, key)`; the same triple always yields the same stream.
pub fn rng(seed: u64, stage: &str, key: &str) -> StageRng {
    let mut h = Sha256::new();
    h.update(b"privforge-rng-v1\0");
    h.update(seed.to_le_bytes());
    h.update(stage.as_bytes());
    h.update([0u8]);
    h.update(key.as_bytes());
    let digest: [u8; 32] = h.finalize().into();
    ChaCha20Rng::from_seed(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_depend_on_every_part_of_the_key() {
        let a: u64 = rng(7, "candidates", "c1").random();
        assert_eq!(a, rng(7, "candidates", "c1").random::<u64>());
        assert_ne!(a, rng(8, "candidates", "c1").random::<u64>());
        assert_ne!(a, rng(7, "sampling", "c1").random::<u64>());
        assert_ne!(a, rng(7, "candidates", "c2").random::<u64>());
    }
}
