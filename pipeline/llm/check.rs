//! `privforge llm check`: one small schema-constrained request per configured endpoint.

use super::openai::OpenAiProvider;
use super::{Attempt, ChatMessage, LlmRequest, Provider, ProviderError};
use crate::config::Config;
use anyhow::Result;
use serde_json::json;
use std::time::{Duration, Instant};

pub struct CheckRow {
    pub endpoint: String,
    pub model: String,
    pub ok: bool,
    pub latency: Duration,
    /// Whether `response_format: json_schema` was accepted and its output validated.
    pub structured: String,
    pub detail: String,
}

impl std::fmt::Display for CheckRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<16} {:<32} {:<4} {:>8.0} ms  structured output: {:<28} {}",
            self.endpoint,
            self.model,
            if self.ok { "ok" } else { "FAIL" },
            self.latency.as_secs_f64() * 1000.0,
            self.structured,
            self.detail
        )
    }
}

pub fn run(cfg: &Config) -> Result<Vec<CheckRow>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let schema = json!({
        "type": "object", "required": ["capital"], "additionalProperties": false,
        "properties": {"capital": {"type": "string", "maxLength": 40}}
    });
    let validator = jsonschema::validator_for(&schema)?;
    let mut rows = Vec::new();
    for ep in &cfg.llm.endpoints {
        let provider = match OpenAiProvider::new(
            std::slice::from_ref(ep),
            Duration::from_secs_f64(cfg.llm.timeout_seconds),
        ) {
            Ok(p) => p,
            Err(e) => {
                rows.push(CheckRow {
                    endpoint: ep.name.clone(),
                    model: ep.model.clone(),
                    ok: false,
                    latency: Duration::ZERO,
                    structured: "-".into(),
                    detail: format!("{e:#}"),
                });
                continue;
            }
        };
        let req = LlmRequest {
            stage: "llm_check".into(),
            template: "llm_check".into(),
            template_version: "1".into(),
            model: ep.model.clone(),
            messages: vec![
                ChatMessage::new("system", "Answer in JSON."),
                ChatMessage::new("user", "What is the capital of France?"),
            ],
            schema_name: "llm_check".into(),
            schema: schema.clone(),
            temperature: 0.0,
            top_p: None,
            max_tokens: 64,
            seed: 1,
        };
        let mut attempt = Attempt {
            max_tokens: 64,
            seed: 1,
            json_object_fallback: false,
        };
        let t0 = Instant::now();
        let mut res = rt.block_on(provider.complete(&req, &attempt));
        let mut structured = "json_schema accepted";
        if let Err(ProviderError::SchemaUnsupported(_)) = &res {
            structured = "json_schema refused (JSON mode)";
            attempt.json_object_fallback = true;
            res = rt.block_on(provider.complete(&req, &attempt));
        }
        let latency = t0.elapsed();
        let row = match res {
            Ok(c) => {
                let valid = serde_json::from_str(&c.text)
                    .ok()
                    .is_some_and(|v| validator.is_valid(&v));
                CheckRow {
                    endpoint: ep.name.clone(),
                    model: ep.model.clone(),
                    ok: valid,
                    latency,
                    structured: if valid {
                        structured.to_string()
                    } else {
                        format!("{structured}, output invalid")
                    },
                    detail: format!(
                        "{} prompt + {} completion tokens",
                        c.prompt_tokens, c.completion_tokens
                    ),
                }
            }
            Err(e) => CheckRow {
                endpoint: ep.name.clone(),
                model: ep.model.clone(),
                ok: false,
                latency,
                structured: "-".into(),
                detail: e.to_string(),
            },
        };
        rows.push(row);
    }
    Ok(rows)
}
