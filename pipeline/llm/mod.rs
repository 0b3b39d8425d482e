//! The LLM layer every LLM stage uses: providers behind one trait (OpenAI-compatible
//! endpoints, an embedded llama.cpp model, a replayed transcript), versioned prompt
//! templates with output schemas, a content-addressed transcript that doubles as the resume
//! cache, rate limits, retries and batch splitting.

pub mod check;
pub mod client;
pub mod embedded;
pub mod embedded_provider;
pub mod limits;
pub mod openai;
pub mod prompts;
pub mod replay;
pub mod transcript;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A provider-independent request. Its [`LlmRequest::key`] addresses the transcript, so
/// two runs that ask the same thing of the same model share the stored answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LlmRequest {
    pub stage: String,
    pub template: String,
    pub template_version: String,
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub schema_name: String,
    pub schema: Value,
    pub temperature: f32,
    /// Nucleus truncation; `None` leaves the provider's default (no truncation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    pub max_tokens: u32,
    pub seed: u64,
}

impl LlmRequest {
    /// sha256 over the canonical JSON of everything that determines the answer.
    pub fn key(&self) -> String {
        let mut canonical = serde_json::json!({
            "v": 1,
            "stage": self.stage,
            "template": self.template,
            "template_version": self.template_version,
            "model": self.model,
            "messages": self.messages,
            "schema": self.schema,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        });
        // Added only when set, so requests without it keep their keys (and recorded answers).
        if let Some(p) = self.top_p {
            canonical["top_p"] = serde_json::json!(p);
        }
        crate::fsio::sha256_hex(&serde_json::to_vec(&canonical).expect("request serialises"))
    }
}

/// What a provider returned for one attempt.
#[derive(Debug, Clone)]
pub struct Completion {
    pub text: String,
    /// "stop", "length", or what the endpoint reported.
    pub finish_reason: String,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
}

/// Why an attempt failed, classified for the retry logic.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// 429; the endpoint may say when to come back.
    #[error("rate limited: {message}")]
    RateLimited {
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("server error {status}: {message}")]
    Server { status: u16, message: String },
    #[error("timeout: {0}")]
    Timeout(String),
    #[error("connection error: {0}")]
    Connection(String),
    /// A body that is not a chat completion (bad JSON, missing choices).
    #[error("malformed response: {0}")]
    Malformed(String),
    /// 401/403: retrying cannot help; the run stops.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The endpoint does not accept `response_format: json_schema`.
    #[error("structured output refused: {0}")]
    SchemaUnsupported(String),
    /// Any other 4xx or local failure.
    #[error("{0}")]
    Fatal(String),
    /// Replay has no answer for this request.
    #[error("{0}")]
    Miss(String),
}

impl ProviderError {
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            ProviderError::RateLimited { .. }
                | ProviderError::Server { .. }
                | ProviderError::Timeout(_)
                | ProviderError::Connection(_)
                | ProviderError::Malformed(_)
        )
    }
}

/// Per-attempt options the client may change between retries.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub max_tokens: u32,
    /// Varies with the attempt so a deterministic model gives a new answer after a rejection.
    pub seed: u64,
    /// Send the schema in the prompt with plain JSON mode instead of `json_schema`.
    pub json_object_fallback: bool,
}

#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Short name for logs and transcript records.
    fn name(&self) -> &str;
    async fn complete(
        &self,
        req: &LlmRequest,
        attempt: &Attempt,
    ) -> Result<Completion, ProviderError>;
}

/// The instruction appended when an endpoint cannot enforce the schema itself.
pub fn schema_instruction(schema: &Value) -> String {
    format!(
        "Reply with one JSON object only, no prose and no code fences. It must validate against this JSON Schema:\n{}",
        serde_json::to_string(schema).unwrap_or_default()
    )
}

/// What the manifest says about the LLM work behind a bundle. It depends only on the
/// answers used, so fresh, resumed and replayed builds of the same inputs agree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LlmSummary {
    /// sha256 of the used transcript records in canonical (key-sorted) form.
    pub transcript_sha256: String,
    pub responses: usize,
    pub prompts: std::collections::BTreeMap<String, PromptInfo>,
    pub stages: std::collections::BTreeMap<String, client::StageAccounting>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PromptInfo {
    pub version: String,
    pub sha256: std::collections::BTreeMap<String, String>,
}

pub fn summary(
    c: &client::LlmClient,
    templates: &[&prompts::Template],
) -> anyhow::Result<LlmSummary> {
    let records = c.used_records();
    let mut prompts_info = std::collections::BTreeMap::new();
    for t in templates {
        let mut files = std::collections::BTreeMap::new();
        for f in &t.files {
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.insert(name, crate::fsio::sha256_file(f)?);
        }
        prompts_info.insert(
            t.id.clone(),
            PromptInfo {
                version: t.version.clone(),
                sha256: files,
            },
        );
    }
    Ok(LlmSummary {
        transcript_sha256: crate::fsio::sha256_hex(&transcript::canonical_bytes(&records)?),
        responses: records.len(),
        prompts: prompts_info,
        stages: c.accounting(),
    })
}

/// Where live and embedded runs keep their transcript (the resume cache).
pub fn work_transcript(work: &std::path::Path) -> std::path::PathBuf {
    work.join("llm-transcript.jsonl")
}

/// The client for a build in the given mode.
pub fn connect(
    cfg: &crate::config::Config,
    mode: crate::config::LlmMode,
    work: &std::path::Path,
) -> anyhow::Result<client::LlmClient> {
    use crate::config::LlmMode;
    use std::sync::Arc;
    let l = &cfg.llm;
    let (provider, store, replay): (Arc<dyn Provider>, transcript::Transcript, bool) = match mode {
        LlmMode::Replay => {
            if !l.transcript.exists() {
                anyhow::bail!(
                    "replay needs the transcript {}; record it with `make record` (embedded model) or run with --llm live",
                    l.transcript.display()
                );
            }
            (
                Arc::new(replay::ReplayProvider {
                    transcript: l.transcript.display().to_string(),
                }),
                transcript::Transcript::read_only(&l.transcript)?,
                true,
            )
        }
        LlmMode::Live => (
            Arc::new(openai::OpenAiProvider::new(
                &l.endpoints,
                Duration::from_secs_f64(l.timeout_seconds),
            )?),
            transcript::Transcript::append(&work_transcript(work))?,
            false,
        ),
        LlmMode::Embedded => (
            Arc::new(embedded_provider::EmbeddedProvider::load(&l.embedded)?),
            transcript::Transcript::append(&work_transcript(work))?,
            false,
        ),
    };
    Ok(client::LlmClient::new(
        provider,
        Arc::new(store),
        l,
        cfg.seed,
        replay,
    ))
}

/// Where a stage records the transcript answers the last build used.
pub fn used_path(work: &std::path::Path, stage: &str) -> std::path::PathBuf {
    work.join(format!("llm-used-{stage}.jsonl"))
}

/// Merges the records every LLM stage of the last build used (`llm-used-*.jsonl` in the
/// work directory) into one canonical transcript: what `make record` commits.
pub fn export_used(work: &std::path::Path, out: &std::path::Path) -> anyhow::Result<usize> {
    let all = used_records(work)?;
    crate::fsio::write_atomic(out, &transcript::canonical_bytes(&all)?)?;
    Ok(all.len())
}

/// The records every LLM stage of the last build used, merged and sorted by key.
pub fn used_records(work: &std::path::Path) -> anyhow::Result<Vec<transcript::Record>> {
    let mut records: std::collections::BTreeMap<String, transcript::Record> =
        std::collections::BTreeMap::new();
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(work)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("llm-used-"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        anyhow::bail!(
            "{}: no llm-used-*.jsonl; run a build with --llm embedded or live first",
            work.display()
        );
    }
    for f in files {
        let t = transcript::Transcript::read_only(&f)?;
        for r in t.subset(t.keys().iter()) {
            records.insert(r.key.clone(), r);
        }
    }
    Ok(records.into_values().collect())
}

/// One summary for the bundle from the summaries of its LLM stages.
pub fn merge_summaries(
    work: &std::path::Path,
    parts: &[&LlmSummary],
) -> anyhow::Result<LlmSummary> {
    let records = used_records(work)?;
    let mut prompts = std::collections::BTreeMap::new();
    let mut stages = std::collections::BTreeMap::new();
    for p in parts {
        prompts.extend(p.prompts.clone());
        stages.extend(p.stages.clone());
    }
    Ok(LlmSummary {
        transcript_sha256: crate::fsio::sha256_hex(&transcript::canonical_bytes(&records)?),
        responses: records.len(),
        prompts,
        stages,
    })
}

/// Per-run figures (cache hits, requests sent, retries): printed and kept in the work
/// directory, not in the bundle, because they depend on what an earlier run had stored.
pub fn write_run_stats(c: &client::LlmClient, work: &std::path::Path) -> anyhow::Result<()> {
    let stats = c.run_stats();
    for (stage, s) in &stats {
        eprintln!(
            "llm {stage} ({}): {} sent, {} cache hits, {} stored, {} transport retries, {} rejected outputs, {} splits, {} prompt + {} completion tokens",
            c.provider_name(),
            s.sent,
            s.cache_hits,
            s.stored,
            s.transport_retries,
            s.rejected_outputs,
            s.splits,
            s.prompt_tokens,
            s.completion_tokens
        );
    }
    crate::fsio::write_atomic(
        &work.join("llm-run.json"),
        &crate::fsio::to_json_pretty(&stats)?,
    )
}

/// Like [`pin_batch_ids`], and each item's properties are further narrowed by `overrides`
/// (property name → schema), e.g. the layout of that person's phone number.
pub fn pin_batch_items(
    schema: &Value,
    ids: &[String],
    overrides: &[serde_json::Map<String, Value>],
) -> Value {
    let mut s = pin_batch_ids(schema, ids);
    if let Some(items) = s
        .pointer_mut("/properties/results/prefixItems")
        .and_then(|p| p.as_array_mut())
    {
        for (item, extra) in items.iter_mut().zip(overrides) {
            if let Some(props) = item.get_mut("properties").and_then(|p| p.as_object_mut()) {
                for (k, v) in extra {
                    props.insert(k.clone(), v.clone());
                }
            }
        }
    }
    s
}

/// Sets `properties.id` to a constant in an item schema and in each of its alternatives.
fn pin_id(item: &mut Value, id: &str) {
    if let Some(props) = item.get_mut("properties").and_then(|p| p.as_object_mut()) {
        props.insert("id".into(), serde_json::json!({"const": id}));
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(alts) = item.get_mut(k).and_then(|a| a.as_array_mut()) {
            for a in alts {
                pin_id(a, id);
            }
        }
    }
}

/// Narrows a batch schema `{"results": [item, ...]}` to exactly `ids`, in order: the array
/// gets one positional item per id with that id as a constant. Constrained decoders then
/// cannot drop, repeat or invent ids, and endpoints that honour schemas need no retry.
/// (`items: false` would say the same but llama.cpp's grammar converter rejects it; the
/// min/max item counts close the array instead.)
pub fn pin_batch_ids(schema: &Value, ids: &[String]) -> Value {
    let mut s = schema.clone();
    let item = s
        .pointer("/properties/results/items")
        .cloned()
        .unwrap_or(Value::Bool(true));
    let prefix: Vec<Value> = ids
        .iter()
        .map(|id| {
            let mut it = item.clone();
            pin_id(&mut it, id);
            it
        })
        .collect();
    if let Some(results) = s.pointer_mut("/properties/results") {
        *results = serde_json::json!({
            "type": "array",
            "minItems": ids.len(),
            "maxItems": ids.len(),
            "prefixItems": prefix
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_schema_accepts_only_the_batch_ids_in_order() {
        let schema = serde_json::json!({"type": "object", "properties": {"results": {"type": "array", "items": {
            "type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}}}});
        let pinned = pin_batch_ids(&schema, &["a".into(), "b".into()]);
        let v = jsonschema::validator_for(&pinned).unwrap();
        assert!(v.is_valid(&serde_json::json!({"results": [{"id": "a"}, {"id": "b"}]})));
        assert!(!v.is_valid(&serde_json::json!({"results": [{"id": "b"}, {"id": "a"}]})));
        assert!(!v.is_valid(&serde_json::json!({"results": [{"id": "a"}]})));
        assert!(
            !v.is_valid(&serde_json::json!({"results": [{"id": "a"}, {"id": "b"}, {"id": "a"}]}))
        );
    }
}
