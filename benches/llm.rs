//! LLM layer benchmarks (`make bench-llm`); each prints its figures and the target.
//!
//! 1. Requests per second through the whole client stack (transcript writes included)
//!    against the loopback double answering at once. Target: at least 2,000/s.
//! 2. Achieved rate under a 600 requests/minute key limit over 60 s. Target: within 5 %.
//! 3. Embedded model prompt and generation tokens/s (needs PRIVFORGE_MODEL).

#[path = "../tests/support/double.rs"]
mod double;

use double::Double;
use privforge::config::{Endpoint, Llm};
use privforge::llm::client::LlmClient;
use privforge::llm::openai::OpenAiProvider;
use privforge::llm::transcript::Transcript;
use privforge::llm::{ChatMessage, LlmRequest};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn schema() -> Value {
    json!({"type": "object", "required": ["results"], "properties": {"results": {"type": "array", "items": {
        "type": "object", "required": ["id", "decision"], "properties": {"id": {"type": "string"}, "decision": {"enum": ["accept", "reject"]}}}}}})
}

fn make(ids: &[String]) -> anyhow::Result<LlmRequest> {
    let items: Vec<Value> = ids.iter().map(|i| json!({"id": i})).collect();
    Ok(LlmRequest {
        stage: "bench".into(),
        template: "bench".into(),
        template_version: "1".into(),
        model: "bench-model".into(),
        messages: vec![
            ChatMessage::new("system", "Judge."),
            ChatMessage::new("user", json!({"items": items}).to_string()),
        ],
        schema_name: "bench".into(),
        schema: schema(),
        temperature: 0.0,
        top_p: None,
        max_tokens: 64,
        seed: 1,
    })
}

fn settings(base: &str, concurrency: usize, rpm: Option<u32>) -> Llm {
    Llm {
        concurrency,
        timeout_seconds: 30.0,
        endpoints: vec![Endpoint {
            name: "double".into(),
            base_url: base.into(),
            model: "bench-model".into(),
            api_key_env: None,
            requests_per_minute: rpm,
            tokens_per_minute: None,
        }],
        ..Llm::default()
    }
}

async fn throughput() {
    let d = Double::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = settings(&d.base_url(), 64, None);
    let provider = OpenAiProvider::new(&cfg.endpoints, Duration::from_secs(30)).unwrap();
    let store = Arc::new(Transcript::append(&dir.path().join("t.jsonl")).unwrap());
    let client = LlmClient::new(Arc::new(provider), store.clone(), &cfg, 1, false);
    let check = |_: &Value| -> Result<(), String> { Ok(()) };
    // Warm-up: connections and allocator.
    let warm: Vec<String> = (0..500).map(|i| format!("W{i}")).collect();
    client.batches(&warm, 1, &make, &check).await.unwrap();
    let n = 20_000;
    let ids: Vec<String> = (0..n).map(|i| format!("B{i:06}")).collect();
    let t0 = Instant::now();
    client.batches(&ids, 1, &make, &check).await.unwrap();
    let secs = t0.elapsed().as_secs_f64();
    client.sync().unwrap();
    let rate = n as f64 / secs;
    println!(
        "throughput: {n} requests in {secs:.2} s = {rate:.0} requests/s through the full stack ({} transcript records written); target >= 2000/s: {}",
        store.len(),
        if rate >= 2000.0 { "met" } else { "NOT met" }
    );
}

async fn rate_limited() {
    let d = Double::start(vec![]).await;
    let cfg = settings(&d.base_url(), 32, Some(600));
    let provider = OpenAiProvider::new(&cfg.endpoints, Duration::from_secs(30)).unwrap();
    let client = Arc::new(LlmClient::new(
        Arc::new(provider),
        Arc::new(Transcript::memory()),
        &cfg,
        1,
        false,
    ));
    let ids: Vec<String> = (0..2_000).map(|i| format!("R{i:06}")).collect();
    let window = Duration::from_secs(60);
    let c = client.clone();
    let check = |_: &Value| -> Result<(), String> { Ok(()) };
    let t0 = Instant::now();
    let _ = tokio::time::timeout(
        window,
        async move { c.batches(&ids, 1, &make, &check).await },
    )
    .await;
    let elapsed = t0.elapsed().as_secs_f64();
    let served = d.log().len() as f64;
    let per_minute = served / elapsed * 60.0;
    let dev = (per_minute - 600.0) / 600.0 * 100.0;
    println!(
        "rate limit: {served:.0} requests in {elapsed:.1} s = {per_minute:.1}/min under a 600/min limit ({dev:+.2} %); target within 5 %: {}",
        if dev.abs() <= 5.0 { "met" } else { "NOT met" }
    );
}

fn embedded() {
    let Ok(path) = std::env::var("PRIVFORGE_MODEL") else {
        println!("embedded: skipped (PRIVFORGE_MODEL not set; `make bench-llm` sets it)");
        return;
    };
    let profile = "A 34-year-old nurse living in Lyon, France, born in Dakar, holds a master's degree, is married, and has asthma. ";
    let messages = |repeat: usize| {
        vec![
            (
                "system".to_string(),
                "You review fictional profiles and answer in JSON.".to_string(),
            ),
            (
                "user".to_string(),
                format!(
                    "{}Is this profile plausible? Explain briefly.",
                    profile.repeat(repeat)
                ),
            ),
        ]
    };
    let schema = json!({"type": "object", "required": ["plausible", "explanation"], "additionalProperties": false,
        "properties": {"plausible": {"type": "boolean"}, "explanation": {"type": "string", "minLength": 300, "maxLength": 600}}});
    // A batch-shaped answer with patterned fields, like the identity stages ask for.
    let item = json!({"type": "object", "required": ["id", "phone_number", "government_id"], "additionalProperties": false,
        "properties": {"id": {"type": "string", "maxLength": 12},
            "phone_number": {"type": "string", "pattern": "^\\+33[67][0-9]{8}$"},
            "government_id": {"type": "string", "pattern": "^[12][0-9]{12}[0-9]{2}$"}}});
    let batch = json!({"type": "object", "required": ["results"], "additionalProperties": false,
        "properties": {"results": {"type": "array", "items": item, "minItems": 40, "maxItems": 40}}});
    // (threads, prompt repeats, schema, max tokens, temperature, top_p, label)
    type Run<'a> = (i32, usize, &'a Value, u32, f32, Option<f32>, &'a str);
    let runs: [Run; 5] = [
        (2, 12, &schema, 100, 0.0, None, "short prompt, free text"),
        (1, 12, &schema, 100, 0.0, None, "short prompt, free text"),
        (
            2,
            110,
            &schema,
            400,
            0.0,
            None,
            "2.4k-token prompt, free text",
        ),
        (
            1,
            110,
            &schema,
            400,
            0.0,
            None,
            "2.4k-token prompt, free text",
        ),
        (
            1,
            110,
            &batch,
            1200,
            1.0,
            Some(0.9),
            "2.4k-token prompt, patterned batch, T=1 top_p=0.9",
        ),
    ];
    for (threads, repeat, schema, max_tokens, temp, top_p, label) in runs {
        let t0 = Instant::now();
        let model = privforge::llm::embedded::EmbeddedModel::load(
            std::path::Path::new(&path),
            threads,
            8192,
        )
        .unwrap();
        let load = t0.elapsed().as_secs_f64();
        let mut best: Option<privforge::llm::embedded::Generation> = None;
        for _ in 0..2 {
            let g = model
                .generate(&messages(repeat), schema, temp, top_p, max_tokens, 1)
                .unwrap();
            if best
                .as_ref()
                .is_none_or(|b| g.generation_seconds < b.generation_seconds)
            {
                best = Some(g);
            }
        }
        let g = best.unwrap();
        println!(
            "embedded ({}; {label}; {threads} thread(s)): load {load:.2} s; prompt {} tokens at {:.0} tokens/s; generation {} tokens at {:.0} tokens/s (best of 2)",
            model.model_description(),
            g.prompt_tokens,
            g.prompt_tokens as f64 / g.prompt_seconds,
            g.completion_tokens,
            g.completion_tokens as f64 / g.generation_seconds
        );
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(throughput());
    rt.block_on(rate_limited());
    embedded();
}
