//! Replay: answers only from the transcript. It has no transport at all, so a replayed build
//! cannot open a network connection; a request the transcript lacks is an error naming it.

use super::{Attempt, Completion, LlmRequest, Provider, ProviderError};

pub struct ReplayProvider {
    pub transcript: String,
}

#[async_trait::async_trait]
impl Provider for ReplayProvider {
    fn name(&self) -> &str {
        "replay"
    }

    async fn complete(
        &self,
        req: &LlmRequest,
        _attempt: &Attempt,
    ) -> Result<Completion, ProviderError> {
        Err(ProviderError::Miss(format!(
            "transcript miss: stage {}, request key {} (template {}@{}, model {}) is not in {}; re-record it with `make record`",
            req.stage,
            req.key(),
            req.template,
            req.template_version,
            req.model,
            self.transcript
        )))
    }
}
