//! Run configuration (`configs/*.toml`). Paths are relative to the working directory.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Semver of the bundle format and content this config produces.
    pub bundle_version: String,
    /// Master seed: every random choice derives from it and a stable key.
    pub seed: u64,
    /// The only date that appears in outputs (ISO 8601, e.g. "2026-11-29").
    pub date: String,
    pub paths: Paths,
    pub population: Population,
    pub ipf: Ipf,
    pub sampling: Sampling,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Paths {
    pub taxonomy: PathBuf,
    pub margins: PathBuf,
    /// Final bundle directory; replaced atomically on success.
    pub output: PathBuf,
    /// Where stages keep their intermediate artifacts.
    pub work: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Population {
    /// N, the number of profiles in the bundle.
    pub profiles: usize,
    /// Size of the base candidate pool before backfill.
    pub candidates: usize,
    /// Share of candidates drawn from the target-informed proposal (the rest uniform).
    pub lambda: f64,
    /// Give up generating unique candidates after `candidates * attempts_factor` draws.
    pub attempts_factor: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ipf {
    /// Convergence when the max over margins of the L1 distance is at most this.
    pub tolerance: f64,
    pub max_sweeps: usize,
    /// Rounds of targeted backfill for cells short of ceil(N * target) candidates.
    pub backfill_rounds: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    /// Independent weighted draws; the best by total L1 seeds the refinement.
    pub trials: usize,
    /// Proposed swaps of the refinement that keeps the sample weighted but integer-balanced.
    pub swap_iterations: usize,
}

impl Config {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?;
        let cfg: Config = toml::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: invalid config: {}",
                path.display(),
                e.to_string().trim()
            )
        })?;
        cfg.validate()
            .with_context(|| format!("{}: invalid config", path.display()))?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<()> {
        let p = &self.population;
        if p.profiles == 0 {
            bail!("population.profiles must be positive");
        }
        if p.candidates < p.profiles {
            bail!(
                "population.candidates ({}) must be at least population.profiles ({})",
                p.candidates,
                p.profiles
            );
        }
        if !(0.0..=1.0).contains(&p.lambda) {
            bail!("population.lambda must be within [0, 1], got {}", p.lambda);
        }
        if p.attempts_factor == 0 {
            bail!("population.attempts_factor must be positive");
        }
        if self.ipf.tolerance.is_nan() || self.ipf.tolerance <= 0.0 {
            bail!("ipf.tolerance must be positive");
        }
        if self.ipf.max_sweeps == 0 {
            bail!("ipf.max_sweeps must be positive");
        }
        if self.sampling.trials == 0 {
            bail!("sampling.trials must be positive");
        }
        let d = &self.date;
        let ok = d.len() == 10
            && d.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        if !ok {
            bail!("date must be YYYY-MM-DD, got {d:?}");
        }
        let v: Vec<&str> = self.bundle_version.split('.').collect();
        if v.len() != 3 || v.iter().any(|x| x.parse::<u64>().is_err()) {
            bail!(
                "bundle_version must be semver MAJOR.MINOR.PATCH, got {:?}",
                self.bundle_version
            );
        }
        Ok(())
    }

    /// Hash of the resolved configuration (not of its file's formatting).
    pub fn hash(&self) -> String {
        crate::fsio::sha256_hex(&serde_json::to_vec(self).expect("config serialises"))
    }
}
