//! The LLM layer every LLM stage uses: providers behind one trait (OpenAI-compatible
//! endpoints, an embedded llama.cpp model, a replayed transcript), versioned prompt
//! templates with output schemas, a content-addressed transcript that doubles as the resume
//! cache, rate limits, retries and batch splitting.

pub mod client;
pub mod embedded;
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
    pub max_tokens: u32,
    pub seed: u64,
}

impl LlmRequest {
    /// sha256 over the canonical JSON of everything that determines the answer.
    pub fn key(&self) -> String {
        let canonical = serde_json::json!({
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
