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
    #[serde(default)]
    pub seed_audit: SeedAudit,
    #[serde(default)]
    pub identity: IdentityStage,
    #[serde(default)]
    pub contracts: ContractsStage,
    #[serde(default)]
    pub planning: PlanningStage,
    #[serde(default)]
    pub llm: Llm,
}

/// How the reviewer personas' votes are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    Unanimous,
    Majority,
}

/// Whether votes decide the fate of curated contracts (`gate`) or are recorded beside them
/// (`advisory`). Generated contracts are always gated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CuratedReview {
    Gate,
    Advisory,
}

/// New contracts to author for one (category, subtype, domain) slot.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateSpec {
    pub category: String,
    pub subtype: String,
    pub domain: String,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractsStage {
    /// Run the authoring and review stages (the curated contracts ship either way).
    pub enabled: bool,
    pub aggregation: Aggregation,
    /// Vote rounds, each but the last followed by a rewrite of what was not accepted.
    pub max_review_rounds: usize,
    pub curated_review: CuratedReview,
    #[serde(default)]
    pub generate: Vec<GenerateSpec>,
}

impl Default for ContractsStage {
    fn default() -> Self {
        Self {
            enabled: false,
            aggregation: Aggregation::Majority,
            max_review_rounds: 3,
            curated_review: CuratedReview::Advisory,
            generate: Vec::new(),
        }
    }
}

/// What to do when no profile meets a contract's persona requirements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unsatisfiable {
    /// Stop the build, naming the contract and its requirements.
    Fail,
    /// Bind the persona that meets the most requirements and list the rest as relaxed in the
    /// manifest; for small trial populations that lack rare combinations.
    Relax,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanningStage {
    /// Tasks one persona may carry; binding fills every persona once before any twice.
    pub max_tasks_per_persona: usize,
    pub on_unsatisfiable: Unsatisfiable,
}

impl Default for PlanningStage {
    fn default() -> Self {
        Self {
            max_tasks_per_persona: 1,
            on_unsatisfiable: Unsatisfiable::Fail,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityStage {
    pub enabled: bool,
    /// Regenerations of a failing field before the fallback value is used.
    pub max_repair_rounds: usize,
    /// Narrow each answer's JSON Schema to the layout of a valid value (email domain, the
    /// phone's country code and length, the identifier's pattern), so constrained decoders
    /// stay on plausible syntax.
    #[serde(default = "yes")]
    pub syntax_hints: bool,
}

fn yes() -> bool {
    true
}

impl Default for IdentityStage {
    fn default() -> Self {
        Self {
            enabled: false,
            max_repair_rounds: 3,
            syntax_hints: true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedAudit {
    pub enabled: bool,
    /// `lazy` audits the sample and replaces rejections; `whole_pool` audits every candidate
    /// and refits the calibration on the accepted ones before sampling.
    #[serde(default)]
    pub mode: crate::seed_audit::AuditMode,
    /// Audit-and-replace rounds before the build gives up.
    pub max_rounds: usize,
}

impl Default for SeedAudit {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: crate::seed_audit::AuditMode::Lazy,
            max_rounds: 10,
        }
    }
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

/// Where LLM answers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LlmMode {
    /// Answers only from the committed transcript; no network, no model.
    Replay,
    /// OpenAI-compatible endpoints.
    Live,
    /// The llama.cpp model in-process.
    Embedded,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Llm {
    pub mode: LlmMode,
    /// The transcript replay reads (and `make record` writes).
    pub transcript: PathBuf,
    pub prompts: PathBuf,
    /// Requests in flight at once.
    pub concurrency: usize,
    pub timeout_seconds: f64,
    /// Attempts per request before the stage fails (transport errors and invalid output).
    pub max_attempts: u32,
    /// Invalid-output attempts on a batch before it is split in half.
    pub batch_attempts: u32,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// After a truncated answer the token budget is multiplied by this, up to `max_tokens_cap`.
    pub length_growth: f64,
    pub max_tokens_cap: u32,
    pub embedded: Embedded,
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    #[serde(default)]
    pub stages: std::collections::BTreeMap<String, StageLlm>,
    /// USD per million tokens, by model id.
    #[serde(default)]
    pub prices: std::collections::BTreeMap<String, Price>,
}

impl Default for Llm {
    fn default() -> Self {
        Self {
            mode: LlmMode::Replay,
            transcript: PathBuf::from("outputs/transcripts/reference.jsonl"),
            prompts: PathBuf::from("prompts"),
            concurrency: 8,
            timeout_seconds: 120.0,
            max_attempts: 6,
            batch_attempts: 2,
            backoff_base_ms: 500,
            backoff_max_ms: 30_000,
            length_growth: 2.0,
            max_tokens_cap: 16_384,
            embedded: Embedded::default(),
            endpoints: Vec::new(),
            stages: Default::default(),
            prices: Default::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Embedded {
    /// The model id requests carry (part of every transcript key).
    pub model_id: String,
    pub path: PathBuf,
    pub threads: i32,
    pub context: u32,
}

impl Default for Embedded {
    fn default() -> Self {
        Self {
            model_id: "smollm2-135m-instruct-q4_1".into(),
            path: PathBuf::from(".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
            threads: 2,
            context: 8192,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub name: String,
    /// e.g. `http://127.0.0.1:8000/v1`
    pub base_url: String,
    /// The model id this endpoint serves.
    pub model: String,
    /// Name of the environment variable holding the API key (the key itself never appears
    /// in a config, log or bundle).
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub requests_per_minute: Option<u32>,
    #[serde(default)]
    pub tokens_per_minute: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageLlm {
    pub template: String,
    pub model: String,
    pub temperature: f32,
    /// Nucleus sampling bound (0 < p <= 1); unset means the whole distribution.
    #[serde(default)]
    pub top_p: Option<f32>,
    pub max_tokens: u32,
    pub batch_size: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub prompt_per_million: f64,
    pub completion_per_million: f64,
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
        use crate::identity::govid::{Date, RULES_AS_OF};
        let Some(date) = Date::parse(&self.date) else {
            bail!("date {:?} is not a calendar date (YYYY-MM-DD)", self.date);
        };
        if self.identity.enabled && date > RULES_AS_OF {
            bail!(
                "date {date} is after {RULES_AS_OF}, the day the identifier rules are valid as of; \
                 their two-digit-year and future-date checks would misread births after it"
            );
        }
        if self.planning.max_tasks_per_persona == 0 {
            bail!("planning.max_tasks_per_persona must be positive");
        }
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
        let l = &self.llm;
        if self.identity.enabled {
            for st in ["identity_completion", "identity_repair", "govid_audit"] {
                if !l.stages.contains_key(st) {
                    bail!("identity.enabled needs an [llm.stages.{st}] section");
                }
            }
        }
        if self.contracts.enabled {
            for st in ["contract_review", "contract_rewrite", "contract_authoring"] {
                if !l.stages.contains_key(st) {
                    bail!("contracts.enabled needs an [llm.stages.{st}] section");
                }
            }
            if self.contracts.max_review_rounds == 0 {
                bail!("contracts.max_review_rounds must be at least 1");
            }
        }
        if self.seed_audit.enabled && !l.stages.contains_key("seed_audit") {
            bail!("seed_audit.enabled needs an [llm.stages.seed_audit] section");
        }
        if l.concurrency == 0 || l.max_attempts == 0 || l.batch_attempts == 0 {
            bail!("llm.concurrency, llm.max_attempts and llm.batch_attempts must be positive");
        }
        if l.timeout_seconds.is_nan() || l.timeout_seconds <= 0.0 {
            bail!("llm.timeout_seconds must be positive");
        }
        for (name, st) in &l.stages {
            if st.batch_size == 0 || st.max_tokens == 0 {
                bail!("llm.stages.{name}: batch_size and max_tokens must be positive");
            }
            if !(st.temperature.is_finite() && st.temperature >= 0.0) {
                bail!("llm.stages.{name}: temperature must be a finite number >= 0");
            }
            if let Some(p) = st.top_p {
                if !(p > 0.0 && p <= 1.0) {
                    bail!("llm.stages.{name}: top_p must be in (0, 1], got {p}");
                }
            }
        }
        for e in &l.endpoints {
            if !(e.base_url.starts_with("http://") || e.base_url.starts_with("https://")) {
                bail!(
                    "llm.endpoints {}: base_url must start with http:// or https://",
                    e.name
                );
            }
            if let Some(var) = &e.api_key_env {
                if var.is_empty() || var.starts_with("sk-") || var.contains(char::is_whitespace) {
                    bail!("llm.endpoints {}: api_key_env must name an environment variable, not hold a key", e.name);
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_with(from: &str, to: &str) -> Result<Config> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/reference.toml");
        let text = std::fs::read_to_string(path)?;
        assert!(
            text.contains(from),
            "{from:?} is not in the reference config"
        );
        let cfg: Config = toml::from_str(&text.replacen(from, to, 1))?;
        cfg.validate()?;
        Ok(cfg)
    }

    #[test]
    fn audit_mode_and_nucleus_bound_are_parsed_and_checked() {
        let lazy = reference_with("max_rounds = 12", "max_rounds = 12").unwrap();
        assert_eq!(lazy.seed_audit.mode, crate::seed_audit::AuditMode::Lazy);
        let whole =
            reference_with("max_rounds = 12", "max_rounds = 12\nmode = \"whole_pool\"").unwrap();
        assert_eq!(
            whole.seed_audit.mode,
            crate::seed_audit::AuditMode::WholePool
        );
        assert!(reference_with("max_rounds = 12", "max_rounds = 12\nmode = \"eager\"").is_err());
        for bad in ["0.0", "1.5", "-0.2"] {
            let err = reference_with("top_p = 0.9", &format!("top_p = {bad}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("top_p"), "{err}");
        }
        let ok = reference_with("top_p = 0.9", "top_p = 1.0").unwrap();
        assert!(reference_with("date = \"2026-11-29\"", "date = \"2026-02-30\"").is_err());
        let late = reference_with("date = \"2026-11-29\"", "date = \"2027-03-01\"")
            .unwrap_err()
            .to_string();
        assert!(late.contains("2026-12-31"), "{late}");
        assert_eq!(ok.llm.stages["identity_completion"].top_p, Some(1.0));
    }
}
