//! The client every LLM stage calls. It looks the request up in the transcript, otherwise
//! asks the provider under the concurrency bound, retries what can be retried (429 with
//! Retry-After, 5xx, timeouts, broken connections, truncated or invalid output), validates
//! every answer against the stage's schema and checks, stores it, and splits batches whose
//! answers keep missing, duplicating or inventing ids.

use super::transcript::{Outcome, Record, Transcript, Usage};
use super::{Attempt, LlmRequest, Provider, ProviderError};
use crate::config::Llm;
use crate::seeding::rng;
use anyhow::{anyhow, Result};
use futures::future::BoxFuture;
use futures::FutureExt;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Checks a stage applies to an answer beyond its schema.
pub type Check<'a> = &'a (dyn Fn(&Value) -> std::result::Result<(), String> + Send + Sync);

/// What happened in this run, per stage (depends on what was already stored).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunStats {
    pub sent: u64,
    pub cache_hits: u64,
    pub stored: u64,
    pub transport_retries: u64,
    pub rejected_outputs: u64,
    pub splits: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Accounting of the answers a build used, from their transcript records; identical for a
/// fresh, resumed or replayed build of the same inputs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageAccounting {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Extra attempts it took to obtain the stored answers.
    pub retries: u64,
    /// Attempts whose output was rejected (invalid JSON or schema, wrong ids, truncated).
    pub failures: u64,
    pub split_batches: u64,
    pub estimated_cost_usd: f64,
}

#[derive(Debug)]
enum CallError {
    /// Repeated invalid answers for a batch that can still be split.
    Split,
    Fatal(anyhow::Error),
}

pub struct LlmClient {
    provider: Arc<dyn Provider>,
    store: Arc<Transcript>,
    cfg: Llm,
    seed: u64,
    replay: bool,
    sem: Semaphore,
    run: Mutex<BTreeMap<String, RunStats>>,
    used: Mutex<BTreeSet<String>>,
}

fn strip_fences(text: &str) -> &str {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .unwrap_or(t);
    t.strip_suffix("```").unwrap_or(t).trim()
}

impl LlmClient {
    pub fn new(
        provider: Arc<dyn Provider>,
        store: Arc<Transcript>,
        cfg: &Llm,
        seed: u64,
        replay: bool,
    ) -> Self {
        Self {
            provider,
            store,
            cfg: cfg.clone(),
            seed,
            replay,
            sem: Semaphore::new(cfg.concurrency),
            run: Mutex::new(BTreeMap::new()),
            used: Mutex::new(BTreeSet::new()),
        }
    }

    pub fn provider_name(&self) -> &str {
        self.provider.name()
    }

    fn bump(&self, stage: &str, f: impl FnOnce(&mut RunStats)) {
        f(self
            .run
            .lock()
            .unwrap()
            .entry(stage.to_string())
            .or_default());
    }

    fn backoff(&self, key: &str, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .cfg
            .backoff_base_ms
            .saturating_mul(1u64 << attempt.min(20).saturating_sub(1));
        let capped = exp.min(self.cfg.backoff_max_ms) as f64;
        let jitter: f64 =
            rng(self.seed, "llm-backoff", &format!("{key}/{attempt}")).random_range(0.5..1.0);
        let d = Duration::from_secs_f64(capped * jitter / 1000.0);
        match retry_after {
            Some(r) => d.max(r),
            None => d,
        }
    }

    /// One request: answer from the transcript, or obtained, validated and stored.
    async fn call(
        &self,
        req: &LlmRequest,
        check: Check<'_>,
        splittable: bool,
    ) -> std::result::Result<Value, CallError> {
        let key = req.key();
        self.used.lock().unwrap().insert(key.clone());
        let validator = jsonschema::validator_for(&req.schema).map_err(|e| {
            CallError::Fatal(anyhow!("stage {}: invalid output schema: {e}", req.stage))
        })?;
        let verdict = |v: &Value| -> std::result::Result<(), String> {
            if let Some(e) = validator.iter_errors(v).next() {
                return Err(format!("schema violation at {}: {e}", e.instance_path));
            }
            check(v)
        };
        if let Some(rec) = self.store.get(&key) {
            match rec.outcome {
                Outcome::Split if splittable => {
                    self.bump(&req.stage, |s| s.cache_hits += 1);
                    return Err(CallError::Split);
                }
                Outcome::Response => {
                    let v = rec.response.clone().unwrap_or(Value::Null);
                    match verdict(&v) {
                        Ok(()) => {
                            self.bump(&req.stage, |s| s.cache_hits += 1);
                            return Ok(v);
                        }
                        Err(e) if self.replay => {
                            return Err(CallError::Fatal(anyhow!(
                                "stage {}: the stored answer for request key {key} no longer passes validation ({e}); re-record the transcript",
                                req.stage
                            )))
                        }
                        Err(_) => {}
                    }
                }
                Outcome::Split => {}
            }
        }
        let mut max_tokens = req.max_tokens;
        let mut fallback = false;
        let mut rejected = 0u32;
        // Rejections that a smaller batch may cure (truncation is cured by a bigger budget).
        let mut invalid = 0u32;
        let mut last_error = String::new();
        for attempt in 1..=self.cfg.max_attempts {
            let seed = if attempt == 1 {
                req.seed
            } else {
                rng(req.seed, "llm-attempt", &format!("{key}/{attempt}")).random::<u32>() as u64
            };
            let a = Attempt {
                max_tokens,
                seed,
                json_object_fallback: fallback,
            };
            let result = {
                let _permit = self.sem.acquire().await.expect("semaphore open");
                self.bump(&req.stage, |s| s.sent += 1);
                self.provider.complete(req, &a).await
            };
            let c = match result {
                Ok(c) => c,
                Err(ProviderError::Auth(m)) => {
                    return Err(CallError::Fatal(anyhow!("authentication failed at the LLM endpoint (stage {}): {m}; check the key's environment variable", req.stage)))
                }
                Err(e @ ProviderError::Miss(_)) | Err(e @ ProviderError::Fatal(_)) => {
                    return Err(CallError::Fatal(anyhow!("stage {}: {e}", req.stage)))
                }
                Err(ProviderError::SchemaUnsupported(m)) => {
                    fallback = true;
                    last_error = format!("structured output refused: {m}");
                    continue;
                }
                Err(e) => {
                    let retry_after = match &e {
                        ProviderError::RateLimited { retry_after, .. } => *retry_after,
                        _ => None,
                    };
                    last_error = e.to_string();
                    self.bump(&req.stage, |s| s.transport_retries += 1);
                    if attempt < self.cfg.max_attempts {
                        tokio::time::sleep(self.backoff(&key, attempt, retry_after)).await;
                    }
                    continue;
                }
            };
            self.bump(&req.stage, |s| {
                s.prompt_tokens += c.prompt_tokens as u64;
                s.completion_tokens += c.completion_tokens as u64;
            });
            let truncated = c.finish_reason == "length";
            let problem = if truncated {
                let grown = ((max_tokens as f64) * self.cfg.length_growth).ceil() as u32;
                max_tokens = grown.min(self.cfg.max_tokens_cap).max(max_tokens);
                Some(format!("answer truncated at {} tokens", a.max_tokens))
            } else {
                match serde_json::from_str::<Value>(strip_fences(&c.text)) {
                    Err(e) => Some(format!("answer is not JSON: {e}")),
                    Ok(v) => match verdict(&v) {
                        Err(e) => Some(e),
                        Ok(()) => {
                            let rec = Record {
                                key: key.clone(),
                                stage: req.stage.clone(),
                                template: format!("{}@{}", req.template, req.template_version),
                                model: req.model.clone(),
                                outcome: Outcome::Response,
                                response: Some(v.clone()),
                                finish_reason: Some(c.finish_reason.clone()),
                                usage: Usage {
                                    prompt_tokens: c.prompt_tokens as u64,
                                    completion_tokens: c.completion_tokens as u64,
                                },
                                attempts: attempt,
                                rejected,
                                provider: self.provider.name().to_string(),
                                messages: req.messages.clone(),
                            };
                            self.store.put(rec).map_err(CallError::Fatal)?;
                            self.bump(&req.stage, |s| s.stored += 1);
                            return Ok(v);
                        }
                    },
                }
            };
            let p = problem.unwrap_or_default();
            rejected += 1;
            last_error = p;
            self.bump(&req.stage, |s| s.rejected_outputs += 1);
            if !truncated {
                invalid += 1;
            }
            if splittable && invalid >= self.cfg.batch_attempts {
                return Err(CallError::Split);
            }
        }
        Err(CallError::Fatal(anyhow!(
            "stage {}: no valid answer after {} attempts for request key {key}: {last_error}",
            req.stage,
            self.cfg.max_attempts
        )))
    }

    /// A single request with its checks.
    pub async fn request(&self, req: &LlmRequest, check: Check<'_>) -> Result<Value> {
        match self.call(req, check, false).await {
            Ok(v) => Ok(v),
            Err(CallError::Fatal(e)) => Err(e),
            Err(CallError::Split) => Err(anyhow!(
                "stage {}: unsplittable request kept failing",
                req.stage
            )),
        }
    }

    /// A batch whose answer must be `{"results": [{"id": ...}, ...]}` covering exactly `ids`
    /// in order. Returns one result object per id. A batch that keeps failing that check is
    /// answered in two halves (recursively), and the split is recorded so a replay takes
    /// the same path.
    pub fn batch<'a>(
        &'a self,
        ids: Vec<String>,
        make: &'a (dyn Fn(&[String]) -> Result<LlmRequest> + Send + Sync),
        item_check: Check<'a>,
    ) -> BoxFuture<'a, Result<Vec<Value>>> {
        async move {
            let req = make(&ids)?;
            let want = ids.clone();
            let check = move |v: &Value| -> std::result::Result<(), String> {
                let results = v.get("results").and_then(|r| r.as_array()).ok_or("no results array")?;
                let got: Vec<&str> = results.iter().map(|r| r.get("id").and_then(|x| x.as_str()).unwrap_or("")).collect();
                if got.len() != want.len() || got.iter().zip(&want).any(|(a, b)| a != b) {
                    let missing: Vec<&String> = want.iter().filter(|w| !got.contains(&w.as_str())).collect();
                    let extra: Vec<&&str> = got.iter().filter(|g| !want.iter().any(|w| w == *g)).collect();
                    return Err(format!(
                        "ids do not match the batch (missing {missing:?}, unknown {extra:?}, {} answers for {} ids)",
                        got.len(),
                        want.len()
                    ));
                }
                for r in results {
                    item_check(r)?;
                }
                Ok(())
            };
            match self.call(&req, &check, ids.len() > 1).await {
                Ok(v) => Ok(v["results"].as_array().cloned().unwrap_or_default()),
                Err(CallError::Fatal(e)) => Err(e),
                Err(CallError::Split) => {
                    let key = req.key();
                    if self.store.get(&key).is_none_or(|r| r.outcome != Outcome::Split) {
                        if self.replay {
                            return Err(anyhow!(
                                "stage {}: the transcript has no usable answer for batch key {key}; re-record it",
                                req.stage
                            ));
                        }
                        self.store
                            .put(Record {
                                key: key.clone(),
                                stage: req.stage.clone(),
                                template: format!("{}@{}", req.template, req.template_version),
                                model: req.model.clone(),
                                outcome: Outcome::Split,
                                response: None,
                                finish_reason: None,
                                usage: Usage::default(),
                                attempts: 0,
                                rejected: self.cfg.batch_attempts,
                                provider: self.provider.name().to_string(),
                                messages: Vec::new(),
                            })?;
                    }
                    self.bump(&req.stage, |s| s.splits += 1);
                    let mid = ids.len() / 2;
                    let (l, r) = (ids[..mid].to_vec(), ids[mid..].to_vec());
                    let (a, b) = futures::future::join(self.batch(l, make, item_check), self.batch(r, make, item_check)).await;
                    let mut out = a?;
                    out.extend(b?);
                    Ok(out)
                }
            }
        }
        .boxed()
    }

    /// All `ids` in batches of `size`, concurrently; results in input order. The first
    /// fatal error (e.g. authentication) cancels the rest.
    pub async fn batches(
        &self,
        ids: &[String],
        size: usize,
        make: &(dyn Fn(&[String]) -> Result<LlmRequest> + Send + Sync),
        item_check: Check<'_>,
    ) -> Result<Vec<Value>> {
        let futs = ids
            .chunks(size.max(1))
            .map(|c| self.batch(c.to_vec(), make, item_check));
        let parts = futures::future::try_join_all(futs).await?;
        Ok(parts.into_iter().flatten().collect())
    }

    pub fn run_stats(&self) -> BTreeMap<String, RunStats> {
        self.run.lock().unwrap().clone()
    }

    /// Keys of every request this build used.
    pub fn used_keys(&self) -> BTreeSet<String> {
        self.used.lock().unwrap().clone()
    }

    /// Accounting per stage over the answers this build used.
    pub fn accounting(&self) -> BTreeMap<String, StageAccounting> {
        let keys = self.used_keys();
        let mut out: BTreeMap<String, StageAccounting> = BTreeMap::new();
        for r in self.store.subset(keys.iter()) {
            let a = out.entry(r.stage.clone()).or_default();
            match r.outcome {
                Outcome::Split => a.split_batches += 1,
                Outcome::Response => {
                    a.requests += 1;
                    a.prompt_tokens += r.usage.prompt_tokens;
                    a.completion_tokens += r.usage.completion_tokens;
                    a.retries += r.attempts.saturating_sub(1) as u64;
                    a.failures += r.rejected as u64;
                    if let Some(p) = self.cfg.prices.get(&r.model) {
                        a.estimated_cost_usd += (r.usage.prompt_tokens as f64
                            * p.prompt_per_million
                            + r.usage.completion_tokens as f64 * p.completion_per_million)
                            / 1e6;
                    }
                }
            }
        }
        out
    }

    /// The records this build used, in canonical form (what `make record` commits).
    pub fn used_records(&self) -> Vec<Record> {
        let keys = self.used_keys();
        self.store.subset(keys.iter())
    }

    pub fn sync(&self) -> Result<()> {
        self.store.sync()
    }
}
