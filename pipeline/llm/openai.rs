//! OpenAI-compatible endpoints (vLLM, SGLang, llama.cpp server, hosted APIs) through
//! async-openai. The HTTP transport is our own tower service so that the status code and
//! `Retry-After` of a failed call reach the client's retry logic; async-openai's own
//! retries are therefore not in play.

use super::limits::{KeyLimits, Rotation};
use super::{Attempt, ChatMessage, Completion, LlmRequest, Provider, ProviderError};
use crate::config::Endpoint;
use anyhow::{bail, Result};
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, CreateChatCompletionRequest, FinishReason,
    ResponseFormat, ResponseFormatJsonSchema,
};
use async_openai::Client;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A non-2xx answer, carried out of the transport as a boxed error.
#[derive(Debug)]
struct HttpFailure {
    status: u16,
    retry_after: Option<Duration>,
    body: String,
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.body)
    }
}

impl std::error::Error for HttpFailure {}

fn parse_retry_after(v: &str) -> Option<Duration> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

struct EndpointClient {
    name: String,
    model: String,
    client: Client<OpenAIConfig>,
    limits: KeyLimits,
    /// Set once the endpoint refused `json_schema`; later calls go straight to JSON mode.
    schema_refused: AtomicBool,
    /// The key, kept only to scrub it from error text.
    secret: Option<String>,
}

pub struct OpenAiProvider {
    endpoints: Vec<EndpointClient>,
    rotation: Rotation,
}

fn transport(timeout: Duration) -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(timeout)
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()?)
}

impl OpenAiProvider {
    /// Endpoints from the config; keys are read from the named environment variables.
    pub fn new(endpoints: &[Endpoint], timeout: Duration) -> Result<Self> {
        if endpoints.is_empty() {
            bail!("live mode needs at least one [[llm.endpoints]] entry in the config");
        }
        let http = transport(timeout)?;
        let mut out = Vec::new();
        for e in endpoints {
            let secret = match &e.api_key_env {
                Some(var) => match std::env::var(var) {
                    Ok(v) if !v.is_empty() => Some(v),
                    _ => bail!("endpoint {}: environment variable {var} is not set", e.name),
                },
                None => None,
            };
            let cfg = OpenAIConfig::new()
                .with_api_base(e.base_url.trim_end_matches('/'))
                .with_api_key(secret.clone().unwrap_or_default());
            let http = http.clone();
            let service = tower::service_fn(move |factory: HttpRequestFactory| {
                let http = http.clone();
                async move {
                    let req = factory.build().await?;
                    let resp = http.execute(req).await.map_err(OpenAIError::Reqwest)?;
                    let status = resp.status();
                    if status.is_success() {
                        return Ok(resp);
                    }
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_retry_after);
                    let body = resp.text().await.unwrap_or_default();
                    Err(OpenAIError::Boxed(Box::new(HttpFailure {
                        status: status.as_u16(),
                        retry_after,
                        body,
                    })))
                }
            });
            out.push(EndpointClient {
                name: e.name.clone(),
                model: e.model.clone(),
                client: Client::with_config(cfg).with_http_service(service),
                limits: KeyLimits::new(e.requests_per_minute, e.tokens_per_minute),
                schema_refused: AtomicBool::new(false),
                secret,
            });
        }
        Ok(Self {
            endpoints: out,
            rotation: Rotation::default(),
        })
    }

    /// Names and models of the configured endpoints.
    pub fn endpoints(&self) -> Vec<(String, String)> {
        self.endpoints
            .iter()
            .map(|e| (e.name.clone(), e.model.clone()))
            .collect()
    }

    /// Whether an endpoint has fallen back to JSON mode.
    pub fn schema_refused(&self, name: &str) -> bool {
        self.endpoints
            .iter()
            .any(|e| e.name == name && e.schema_refused.load(Ordering::Relaxed))
    }

    fn scrub(&self, text: &str) -> String {
        let mut t = text.to_string();
        for e in &self.endpoints {
            if let Some(s) = &e.secret {
                if !s.is_empty() {
                    t = t.replace(s.as_str(), "[redacted]");
                }
            }
        }
        t
    }

    fn classify(&self, err: OpenAIError) -> ProviderError {
        match err {
            OpenAIError::Boxed(b) => match b.downcast::<HttpFailure>() {
                Ok(f) => {
                    let body = self.scrub(&f.body);
                    let body: String = body.chars().take(500).collect();
                    match f.status {
                        429 => ProviderError::RateLimited {
                            retry_after: f.retry_after,
                            message: body,
                        },
                        401 | 403 => ProviderError::Auth(format!("HTTP {}: {body}", f.status)),
                        400 | 422
                            if body.contains("response_format") || body.contains("json_schema") =>
                        {
                            ProviderError::SchemaUnsupported(body)
                        }
                        s if s >= 500 => ProviderError::Server {
                            status: s,
                            message: body,
                        },
                        s => ProviderError::Fatal(format!("HTTP {s}: {body}")),
                    }
                }
                Err(other) => ProviderError::Connection(self.scrub(&other.to_string())),
            },
            OpenAIError::Reqwest(e) if e.is_timeout() => {
                ProviderError::Timeout(self.scrub(&e.to_string()))
            }
            OpenAIError::Reqwest(e) => ProviderError::Connection(self.scrub(&e.to_string())),
            OpenAIError::JSONDeserialize(e, _) => ProviderError::Malformed(e.to_string()),
            OpenAIError::ApiError(e) => {
                let s = e.status_code.as_u16();
                let msg = self.scrub(&e.to_string());
                match s {
                    429 => ProviderError::RateLimited {
                        retry_after: None,
                        message: msg,
                    },
                    401 | 403 => ProviderError::Auth(msg),
                    s if s >= 500 => ProviderError::Server {
                        status: s,
                        message: msg,
                    },
                    _ => ProviderError::Fatal(msg),
                }
            }
            other => ProviderError::Fatal(self.scrub(&other.to_string())),
        }
    }
}

fn to_messages(req: &LlmRequest, extra_instruction: Option<String>) -> Vec<ChatMessage> {
    let mut msgs = req.messages.clone();
    if let Some(text) = extra_instruction {
        // The schema goes into the system message so the user turn stays the data.
        match msgs.iter_mut().find(|m| m.role == "system") {
            Some(m) => m.content = format!("{}\n\n{text}", m.content),
            None => msgs.insert(0, ChatMessage::new("system", text)),
        }
    }
    msgs
}

fn to_api(msgs: Vec<ChatMessage>) -> Vec<ChatCompletionRequestMessage> {
    msgs.into_iter()
        .map(|m| match m.role.as_str() {
            "system" => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
                content: ChatCompletionRequestSystemMessageContent::Text(m.content),
                name: None,
            }),
            "assistant" => {
                ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                    content: Some(ChatCompletionRequestAssistantMessageContent::Text(
                        m.content,
                    )),
                    ..Default::default()
                })
            }
            _ => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
                content: ChatCompletionRequestUserMessageContent::Text(m.content),
                name: None,
            }),
        })
        .collect()
}

/// Rough size of a request in tokens, for token-per-minute budgets.
fn estimate_tokens(req: &LlmRequest, max_tokens: u32) -> u32 {
    let chars: usize = req.messages.iter().map(|m| m.content.len()).sum();
    (chars / 4) as u32 + max_tokens
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    // `seed` and `max_tokens` are deprecated by OpenAI but are what most compatible servers
    // (vLLM, SGLang, llama.cpp) honour.
    #[allow(deprecated)]
    async fn complete(
        &self,
        req: &LlmRequest,
        attempt: &Attempt,
    ) -> Result<Completion, ProviderError> {
        let candidates: Vec<&EndpointClient> = self
            .endpoints
            .iter()
            .filter(|e| e.model == req.model)
            .collect();
        if candidates.is_empty() {
            return Err(ProviderError::Fatal(format!(
                "no endpoint serves model {:?} (stage {})",
                req.model, req.stage
            )));
        }
        let limits: Vec<&KeyLimits> = candidates.iter().map(|e| &e.limits).collect();
        let idx = self
            .rotation
            .admit(&limits, estimate_tokens(req, attempt.max_tokens))
            .await;
        let ep = candidates[idx];
        let fallback = attempt.json_object_fallback || ep.schema_refused.load(Ordering::Relaxed);
        let (format, extra) = if fallback {
            (
                ResponseFormat::JsonObject,
                Some(super::schema_instruction(&req.schema)),
            )
        } else {
            (
                ResponseFormat::JsonSchema {
                    json_schema: ResponseFormatJsonSchema {
                        description: None,
                        name: req.schema_name.clone(),
                        schema: req.schema.clone(),
                        strict: Some(true),
                    },
                },
                None,
            )
        };
        let body = CreateChatCompletionRequest {
            model: req.model.clone(),
            messages: to_api(to_messages(req, extra)),
            temperature: Some(req.temperature),
            top_p: req.top_p,
            max_tokens: Some(attempt.max_tokens),
            seed: Some(attempt.seed as i64),
            response_format: Some(format),
            ..Default::default()
        };
        let resp = match ep.client.chat().create(body).await {
            Ok(r) => r,
            Err(e) => {
                let err = self.classify(e);
                if let ProviderError::SchemaUnsupported(_) = &err {
                    ep.schema_refused.store(true, Ordering::Relaxed);
                }
                return Err(err);
            }
        };
        let choice = resp
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| ProviderError::Malformed("no choices".into()))?;
        let text = choice.message.content.unwrap_or_default();
        let finish_reason = match choice.finish_reason {
            Some(FinishReason::Length) => "length",
            Some(FinishReason::Stop) | None => "stop",
            Some(FinishReason::ContentFilter) => "content_filter",
            Some(_) => "other",
        }
        .to_string();
        let (p, c) = resp
            .usage
            .map(|u| (u.prompt_tokens, u.completion_tokens))
            .unwrap_or((0, 0));
        Ok(Completion {
            text,
            finish_reason,
            prompt_tokens: p,
            completion_tokens: c,
        })
    }
}
