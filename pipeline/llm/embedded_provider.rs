//! The embedded model as a [`Provider`]: generation runs on blocking threads, one request
//! at a time (the model saturates the CPU cores on its own).

use super::embedded::EmbeddedModel;
use super::{Attempt, Completion, LlmRequest, Provider, ProviderError};
use crate::config::Embedded;
use anyhow::{bail, Result};
use std::sync::Arc;

pub struct EmbeddedProvider {
    model: Arc<EmbeddedModel>,
    model_id: String,
    gate: tokio::sync::Mutex<()>,
}

impl EmbeddedProvider {
    pub fn load(cfg: &Embedded) -> Result<Self> {
        if !cfg.path.exists() {
            bail!(
                "embedded model {} not found; fetch it with `make model`",
                cfg.path.display()
            );
        }
        let model = EmbeddedModel::load(&cfg.path, cfg.threads, cfg.context)?;
        Ok(Self {
            model: Arc::new(model),
            model_id: cfg.model_id.clone(),
            gate: tokio::sync::Mutex::new(()),
        })
    }

    pub fn model(&self) -> Arc<EmbeddedModel> {
        self.model.clone()
    }
}

#[async_trait::async_trait]
impl Provider for EmbeddedProvider {
    fn name(&self) -> &str {
        "embedded"
    }

    async fn complete(
        &self,
        req: &LlmRequest,
        attempt: &Attempt,
    ) -> Result<Completion, ProviderError> {
        if req.model != self.model_id {
            return Err(ProviderError::Fatal(format!(
                "stage {} asks for model {:?}, the embedded model is {:?}",
                req.stage, req.model, self.model_id
            )));
        }
        let _one_at_a_time = self.gate.lock().await;
        let model = self.model.clone();
        let messages: Vec<(String, String)> = req
            .messages
            .iter()
            .map(|m| (m.role.clone(), m.content.clone()))
            .collect();
        let schema = req.schema.clone();
        let (temperature, top_p, max_tokens, seed) = (
            req.temperature,
            req.top_p,
            attempt.max_tokens,
            attempt.seed as u32,
        );
        let g = tokio::task::spawn_blocking(move || {
            model.generate(&messages, &schema, temperature, top_p, max_tokens, seed)
        })
        .await
        .map_err(|e| ProviderError::Fatal(format!("embedded generation panicked: {e}")))?
        .map_err(|e| ProviderError::Fatal(format!("embedded generation failed: {e:#}")))?;
        Ok(Completion {
            text: g.text,
            finish_reason: g.finish_reason,
            prompt_tokens: g.prompt_tokens,
            completion_tokens: g.completion_tokens,
        })
    }
}
