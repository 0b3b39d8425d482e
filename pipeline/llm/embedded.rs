//! In-process text generation with llama.cpp (through the `llama-cpp-2` bindings).
//!
//! A GGUF model is loaded once and shared; every [`EmbeddedModel::generate`] call builds its own
//! short-lived llama.cpp context, so the model can be shared between threads. Concurrent calls run
//! side by side only while their inference threads fit the machine's cores; the rest wait (see
//! `ThreadBudget`). Output is constrained by a GBNF grammar derived from the caller's JSON Schema,
//! which makes the generated text parseable JSON that follows the schema's shape.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{json_schema_to_grammar, send_logs_to_tracing, LogOptions};

/// Largest number of prompt tokens handed to a single `decode` call.
const PROMPT_CHUNK: usize = 512;

/// Name of the start rule in grammars produced by `json_schema_to_grammar`.
const GRAMMAR_ROOT: &str = "root";

/// The llama.cpp backend may only be initialised once per process; every model shares it.
static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();

fn shared_backend() -> Result<&'static LlamaBackend> {
    let slot = BACKEND.get_or_init(|| {
        // Drop llama.cpp / ggml log lines instead of letting them reach stderr: the pipeline
        // reports its own progress. Installed before initialisation so that the backend's own
        // start-up messages are silenced as well.
        send_logs_to_tracing(LogOptions::default().with_logs_enabled(false));
        LlamaBackend::init().map_err(|e| e.to_string())
    });
    slot.as_ref()
        .map_err(|e| anyhow!("could not initialise the llama.cpp backend: {e}"))
}

/// A GGUF model loaded in-process with llama.cpp; generation is constrained by a grammar
/// converted from the request's JSON Schema.
pub struct EmbeddedModel {
    backend: &'static LlamaBackend,
    model: LlamaModel,
    /// The template stored in the GGUF metadata, if the file carries one.
    template: Option<LlamaChatTemplate>,
    path: PathBuf,
    threads: i32,
    n_ctx: u32,
    /// Creating contexts concurrently from one model is not safe in llama.cpp (context creation
    /// may touch model fields), so creation is serialised. Decoding itself runs unlocked.
    context_guard: Mutex<()>,
}

/// Process-wide budget of inference threads, one unit per CPU core.
///
/// ggml worker threads spin while they wait for each other, so running more inference threads
/// than cores makes every generation dramatically slower (on a 2-core machine, two concurrent
/// 2-thread generations ran ~30x slower than the same two run one after the other). Each
/// generation therefore reserves its thread count from this budget for as long as it decodes;
/// calls that do not fit wait for a running one to finish.
struct ThreadBudget {
    capacity: usize,
    free: Mutex<usize>,
    released: Condvar,
}

struct BudgetPermit {
    units: usize,
}

static THREAD_BUDGET: OnceLock<ThreadBudget> = OnceLock::new();

impl ThreadBudget {
    fn global() -> &'static ThreadBudget {
        THREAD_BUDGET.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            ThreadBudget {
                capacity: cores,
                free: Mutex::new(cores),
                released: Condvar::new(),
            }
        })
    }

    fn lock(&self) -> MutexGuard<'_, usize> {
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Blocks until `threads` units (at most the whole budget) are available and takes them.
    fn acquire(threads: i32) -> BudgetPermit {
        let budget = Self::global();
        let units = usize::try_from(threads)
            .unwrap_or(1)
            .clamp(1, budget.capacity);
        let mut free = budget.lock();
        while *free < units {
            free = budget
                .released
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *free -= units;
        BudgetPermit { units }
    }
}

impl Drop for BudgetPermit {
    fn drop(&mut self) {
        let budget = ThreadBudget::global();
        *budget.lock() += self.units;
        budget.released.notify_all();
    }
}

/// Result of one [`EmbeddedModel::generate`] call.
#[derive(Debug, Clone)]
pub struct Generation {
    /// The generated text (JSON when constrained).
    pub text: String,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// "stop" (end of generation / grammar complete) or "length" (max_tokens reached).
    pub finish_reason: String,
    /// Time spent evaluating the prompt.
    pub prompt_seconds: f64,
    /// Time spent generating.
    pub generation_seconds: f64,
}

/// How the next token is picked from the (grammar-filtered) distribution.
struct Picker {
    /// Nucleus truncation applied to the raw distribution before anything else.
    truncate: Option<LlamaSampler>,
    /// Greedy, or temperature followed by a seeded random draw.
    draw: LlamaSampler,
}

impl Picker {
    fn new(temperature: f32, top_p: Option<f32>, seed: u32) -> Self {
        if temperature.is_nan() || temperature <= 0.0 {
            return Picker {
                truncate: None,
                draw: LlamaSampler::greedy(),
            };
        }
        Picker {
            truncate: top_p
                .filter(|p| *p > 0.0 && *p < 1.0)
                .map(|p| LlamaSampler::top_p(p, 1)),
            draw: LlamaSampler::chain_simple([
                LlamaSampler::temp(temperature),
                LlamaSampler::dist(seed),
            ]),
        }
    }
}

impl EmbeddedModel {
    /// Loads the model; `threads` = CPU threads for inference, `n_ctx` = context length.
    pub fn load(path: &Path, threads: i32, n_ctx: u32) -> Result<Self> {
        if threads < 1 {
            bail!("thread count must be at least 1 (got {threads})");
        }
        if n_ctx < 16 {
            bail!("context length must be at least 16 tokens (got {n_ctx})");
        }
        let meta = std::fs::metadata(path)
            .with_context(|| format!("model file {} is not readable", path.display()))?;
        if !meta.is_file() {
            bail!("model path {} is not a regular file", path.display());
        }
        if path.to_str().is_none() {
            bail!("model path {} is not valid UTF-8", path.display());
        }

        let backend = shared_backend()?;
        let params = LlamaModelParams::default();
        let model = LlamaModel::load_from_file(backend, path, &params).map_err(|e| {
            anyhow!(
                "llama.cpp could not load {} as a GGUF model ({e}); is it a valid, complete GGUF file?",
                path.display()
            )
        })?;
        let template = model.chat_template(None).ok();

        Ok(Self {
            backend,
            model,
            template,
            path: path.to_path_buf(),
            threads,
            n_ctx,
            context_guard: Mutex::new(()),
        })
    }

    /// The model's own chat template applied to (role, content) messages, with the assistant turn opened.
    pub fn render_chat(&self, messages: &[(String, String)]) -> Result<String> {
        let template = self.template.as_ref().ok_or_else(|| {
            anyhow!(
                "{} has no chat template in its metadata (tokenizer.chat_template)",
                self.file_name()
            )
        })?;
        if messages.is_empty() {
            bail!("cannot render a chat without messages");
        }
        let chat = messages
            .iter()
            .enumerate()
            .map(|(i, (role, content))| {
                LlamaChatMessage::new(role.clone(), content.clone())
                    .with_context(|| format!("chat message {i} ({role}) contains a NUL byte"))
            })
            .collect::<Result<Vec<_>>>()?;
        self.model
            .apply_chat_template(template, &chat, true)
            .map_err(|e| {
                anyhow!(
                    "the chat template of {} could not be applied ({e}); llama.cpp only supports \
                     a fixed set of well-known templates",
                    self.file_name()
                )
            })
    }

    /// Blocking generation. `schema` = JSON Schema the output must satisfy (converted with
    /// `llama_cpp_2::json_schema_to_grammar` and enforced with a grammar sampler).
    /// `temperature <= 0` gives greedy decoding; otherwise tokens are drawn from the
    /// temperature-scaled distribution with a generator seeded by `seed`, so a given seed always
    /// reproduces the same text. Stops at an end-of-generation token, when the grammar is
    /// complete, or after `max_tokens` tokens.
    pub fn generate(
        &self,
        messages: &[(String, String)],
        schema: &serde_json::Value,
        temperature: f32,
        top_p: Option<f32>,
        max_tokens: u32,
        seed: u32,
    ) -> Result<Generation> {
        // Grammar first: a schema problem should be reported before any heavy work.
        let schema_text = serde_json::to_string(schema).context("serialising the JSON Schema")?;
        let grammar_text = json_schema_to_grammar(&schema_text).map_err(|e| {
            anyhow!(
                "the JSON Schema could not be converted to a llama.cpp grammar ({e}); it is invalid \
                 or uses an unsupported construct (e.g. an unresolvable $ref or unknown type): {}",
                abbreviate(&schema_text, 300)
            )
        })?;
        let mut grammar =
            LlamaSampler::grammar(&self.model, &grammar_text, GRAMMAR_ROOT).map_err(|e| {
                anyhow!("llama.cpp rejected the grammar derived from the JSON Schema ({e})")
            })?;
        let mut picker = Picker::new(temperature, top_p, seed);

        let prompt = self.render_chat(messages)?;
        let prompt_tokens = self.tokenize_prompt(&prompt);
        if prompt_tokens.is_empty() {
            bail!("the rendered prompt produced no tokens");
        }
        let n_prompt = prompt_tokens.len();
        if n_prompt >= self.n_ctx as usize {
            bail!(
                "prompt is {n_prompt} tokens long but the context holds only {} tokens",
                self.n_ctx
            );
        }

        let _permit = ThreadBudget::acquire(self.threads);
        let mut ctx = self.new_context()?;
        let vocab = self.model.vocab();
        let n_vocab = usize::try_from(self.model.n_vocab()).unwrap_or(0);
        let eog_probe = [vocab.eos(), vocab.eot()]
            .into_iter()
            .find(|t| usize::try_from(t.0).is_ok_and(|i| i < n_vocab) && vocab.is_eog(*t));

        // Prompt evaluation, in chunks; logits are requested for the final prompt token only.
        let prompt_start = Instant::now();
        let mut batch = LlamaBatch::new(PROMPT_CHUNK, 1);
        let mut last_logits = 0i32;
        for (chunk_no, chunk) in prompt_tokens.chunks(PROMPT_CHUNK).enumerate() {
            batch.clear();
            let base = chunk_no * PROMPT_CHUNK;
            for (j, token) in chunk.iter().enumerate() {
                let pos = base + j;
                let is_last = pos + 1 == n_prompt;
                batch
                    .add(*token, pos_i32(pos)?, &[0], is_last)
                    .map_err(|e| anyhow!("building the prompt batch failed: {e}"))?;
            }
            ctx.decode(&mut batch).map_err(|e| {
                anyhow!(
                    "llama.cpp failed to evaluate prompt tokens {base}..{}: {e}",
                    base + chunk.len()
                )
            })?;
            last_logits = batch.n_tokens() - 1;
        }
        let prompt_seconds = prompt_start.elapsed().as_secs_f64();

        // Token-by-token generation.
        let gen_start = Instant::now();
        let mut text_bytes: Vec<u8> = Vec::new();
        let mut produced: u32 = 0;
        let mut pos = n_prompt;
        let mut scratch: Vec<LlamaTokenData> = Vec::with_capacity(n_vocab);
        let finish_reason;
        loop {
            if produced >= max_tokens {
                finish_reason = "length";
                break;
            }
            let token = pick_token(&ctx, last_logits, &mut grammar, &mut picker, &mut scratch)?;
            if vocab.is_eog(token) {
                finish_reason = "stop";
                break;
            }
            grammar
                .try_accept(token)
                .map_err(|e| anyhow!("grammar rejected sampled token {}: {e}", token.0))?;
            picker.draw.accept(token);
            vocab.token_to_piece_into(token, &mut text_bytes, false, None);
            produced += 1;

            if ends_closed_value(&text_bytes) && grammar_allows_end(&mut grammar, eog_probe) {
                // Only optional trailing whitespace could follow; nothing more to generate.
                finish_reason = "stop";
                break;
            }
            if produced >= max_tokens || pos >= self.n_ctx as usize {
                finish_reason = "length";
                break;
            }

            batch.clear();
            batch
                .add(token, pos_i32(pos)?, &[0], true)
                .map_err(|e| anyhow!("building the generation batch failed: {e}"))?;
            ctx.decode(&mut batch)
                .map_err(|e| anyhow!("llama.cpp failed to decode at position {pos}: {e}"))?;
            last_logits = 0;
            pos += 1;
        }
        let generation_seconds = gen_start.elapsed().as_secs_f64();

        let text = match String::from_utf8(text_bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        Ok(Generation {
            text: text.trim().to_string(),
            prompt_tokens: u32::try_from(n_prompt).unwrap_or(u32::MAX),
            completion_tokens: produced,
            finish_reason: finish_reason.to_string(),
            prompt_seconds,
            generation_seconds,
        })
    }

    /// Short human-readable description for logs, e.g. file name and parameter count.
    pub fn model_description(&self) -> String {
        let params = self.model.n_params() as f64;
        let size_mib = self.model.size() as f64 / (1024.0 * 1024.0);
        let params_text = if params >= 1e9 {
            format!("{:.2}B", params / 1e9)
        } else {
            format!("{:.0}M", params / 1e6)
        };
        format!(
            "{} ({} params, {:.0} MiB, {} layers, ctx {}, {} threads{})",
            self.file_name(),
            params_text,
            size_mib,
            self.model.n_layer(),
            self.n_ctx,
            self.threads,
            if self.template.is_some() {
                ""
            } else {
                ", no chat template"
            }
        )
    }

    fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }

    fn tokenize_prompt(&self, prompt: &str) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        // The rendered template already spells out the role markers, so special tokens are parsed;
        // a BOS is added only when the model asks for one.
        let mut tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        if tokens.len() >= 2 && tokens[0] == tokens[1] && tokens[0] == vocab.bos() {
            tokens.remove(0);
        }
        tokens
    }

    fn new_context(&self) -> Result<LlamaContext<'_>> {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(self.n_ctx))
            .with_n_batch(PROMPT_CHUNK as u32)
            .with_n_ubatch(PROMPT_CHUNK as u32)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads);
        let _guard = self
            .context_guard
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.model.new_context(self.backend, params).map_err(|e| {
            anyhow!(
                "llama.cpp could not create a {}-token context for {} ({e})",
                self.n_ctx,
                self.file_name()
            )
        })
    }
}

// The model is shared between threads (behind an `Arc`, from blocking tasks).
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<EmbeddedModel>();
};

/// At most `limit` characters of `text`, with an ellipsis when something was cut.
fn abbreviate(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

fn pos_i32(pos: usize) -> Result<i32> {
    i32::try_from(pos).map_err(|_| anyhow!("token position {pos} out of range"))
}

/// Chooses the next token from the logits at batch index `idx`.
///
/// The nucleus (when configured) is cut from the raw distribution first. The picker then draws
/// from it unconstrained and the grammar checks only the one token drawn; if that token is not
/// allowed, the grammar filters the nucleus and the picker draws again, and only if no nucleus
/// token is allowed is the grammar run over the whole vocabulary. Drawing unconstrained and
/// redrawing from the allowed set on rejection gives exactly the grammar-filtered distribution
/// (for greedy decoding, exactly the best allowed token), while the common cases avoid a
/// full-vocabulary grammar pass, which dominates generation time with pattern-heavy schemas.
fn pick_token(
    ctx: &LlamaContext<'_>,
    idx: i32,
    grammar: &mut LlamaSampler,
    picker: &mut Picker,
    scratch: &mut Vec<LlamaTokenData>,
) -> Result<LlamaToken> {
    let logits = ctx.get_logits_ith(idx);
    let fill = |buf: &mut Vec<LlamaTokenData>| {
        buf.clear();
        buf.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| LlamaTokenData::new(LlamaToken::new(i as i32), l, 0.0)),
        );
    };
    let allowed = |data: &[LlamaTokenData]| data.iter().any(|d| d.logit().is_finite());

    fill(scratch);
    let mut candidates = LlamaTokenDataArray::new(std::mem::take(scratch), false);
    let nucleus = match picker.truncate.as_mut() {
        Some(truncate) => {
            candidates.apply_sampler(truncate);
            Some(candidates.data.clone())
        }
        None => None,
    };
    candidates.apply_sampler(&mut picker.draw);
    let first = candidates.selected_token();
    *scratch = std::mem::take(&mut candidates.data);

    if let Some(token) = first {
        let mut single =
            LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
        single.apply_sampler(grammar);
        if allowed(&single.data) {
            return Ok(token);
        }
    }

    if let Some(data) = nucleus {
        // Marked unsorted: the grammar masks tokens without reordering, and a "sorted" array
        // whose first entry is masked would make the softmax normalise by -inf.
        let mut within = LlamaTokenDataArray::new(data, false);
        within.apply_sampler(grammar);
        if allowed(&within.data) {
            within.apply_sampler(&mut picker.draw);
            if let Some(token) = within.selected_token() {
                return Ok(token);
            }
        }
    }

    fill(scratch);
    let mut candidates = LlamaTokenDataArray::new(std::mem::take(scratch), false);
    candidates.apply_sampler(grammar);
    if !allowed(&candidates.data) {
        *scratch = std::mem::take(&mut candidates.data);
        bail!("the grammar allows no token at this point (the model cannot continue the JSON)");
    }
    candidates.apply_sampler(&mut picker.draw);
    let token = candidates
        .selected_token()
        .ok_or_else(|| anyhow!("the sampler did not select a token"));
    *scratch = std::mem::take(&mut candidates.data);
    token
}

/// True when the text (ignoring trailing whitespace) ends with a character that closes a JSON
/// value, i.e. a complete value could only be followed by whitespace.
fn ends_closed_value(text: &[u8]) -> bool {
    matches!(
        text.iter().rev().find(|b| !b.is_ascii_whitespace()),
        Some(b'}' | b']' | b'"')
    )
}

/// True when the grammar has reached an accepting state (it would allow end-of-generation now).
fn grammar_allows_end(grammar: &mut LlamaSampler, eog: Option<LlamaToken>) -> bool {
    let Some(eog) = eog else { return false };
    let mut probe = LlamaTokenDataArray::new(vec![LlamaTokenData::new(eog, 0.0, 0.0)], false);
    probe.apply_sampler(grammar);
    probe.data.first().is_some_and(|d| d.logit().is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model_path() -> Option<PathBuf> {
        match std::env::var_os("PRIVFORGE_MODEL") {
            Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
            _ => {
                println!("skipped: PRIVFORGE_MODEL not set");
                None
            }
        }
    }

    fn messages() -> Vec<(String, String)> {
        vec![
            (
                "system".to_string(),
                "You answer questions with a JSON object containing \"answer\" (yes or no) \
                 and a short \"reason\"."
                    .to_string(),
            ),
            (
                "user".to_string(),
                "Is the sky blue on a clear day?".to_string(),
            ),
        ]
    }

    fn schema() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "answer": {"type": "string", "enum": ["yes", "no"]},
                "reason": {"type": "string", "maxLength": 40}
            },
            "required": ["answer", "reason"],
            "additionalProperties": false
        })
    }

    fn check_object(text: &str) {
        let value: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        let obj = value.as_object().expect("top-level object");
        assert_eq!(obj.len(), 2, "unexpected keys in {text}");
        let answer = obj["answer"].as_str().expect("answer is a string");
        assert!(
            answer == "yes" || answer == "no",
            "answer outside enum: {answer}"
        );
        let reason = obj["reason"].as_str().expect("reason is a string");
        assert!(reason.chars().count() <= 40, "reason too long: {reason}");
    }

    #[test]
    fn schema_constrained_generation_is_valid_and_deterministic() {
        let Some(path) = model_path() else { return };
        let model = EmbeddedModel::load(&path, 2, 1024).expect("model loads");
        println!("{}", model.model_description());

        let greedy = model
            .generate(&messages(), &schema(), 0.0, None, 128, 0)
            .expect("greedy generation");
        println!("greedy: {greedy:?}");
        assert_eq!(greedy.finish_reason, "stop");
        check_object(&greedy.text);

        let first = model
            .generate(&messages(), &schema(), 0.7, Some(0.9), 128, 1234)
            .expect("sampled generation");
        let second = model
            .generate(&messages(), &schema(), 0.7, Some(0.9), 128, 1234)
            .expect("sampled generation, repeated");
        println!("sampled: {first:?}");
        check_object(&first.text);
        assert_eq!(first.text, second.text, "same seed must give the same text");
        assert_eq!(first.completion_tokens, second.completion_tokens);
        assert_eq!(first.prompt_tokens, second.prompt_tokens);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let Some(path) = model_path() else { return };
        let missing = EmbeddedModel::load(Path::new("/nonexistent/model.gguf"), 2, 512);
        assert!(missing.is_err());

        let model = EmbeddedModel::load(&path, 2, 256).expect("model loads");
        let long = vec![("user".to_string(), "word ".repeat(400))];
        let err = model
            .generate(&long, &schema(), 0.0, None, 8, 0)
            .expect_err("prompt longer than the context");
        assert!(err.to_string().contains("context"), "{err}");

        let bad_schema = json!({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}});
        assert!(model
            .generate(&messages(), &bad_schema, 0.0, None, 8, 0)
            .is_err());

        let short = model
            .generate(&messages(), &schema(), 0.0, None, 3, 0)
            .expect("short generation");
        assert_eq!(short.finish_reason, "length");
        assert_eq!(short.completion_tokens, 3);
    }
}
