//! The LLM layer against a real HTTP server on loopback with scripted faults.

mod support;

use privforge::config::{Endpoint, Llm};
use privforge::llm::client::LlmClient;
use privforge::llm::openai::OpenAiProvider;
use privforge::llm::replay::ReplayProvider;
use privforge::llm::transcript::Transcript;
use privforge::llm::{ChatMessage, LlmRequest};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::double::{verdict_for, Double, Fault};

fn schema() -> Value {
    json!({
        "type": "object", "required": ["results"], "additionalProperties": false,
        "properties": {"results": {"type": "array", "items": {
            "type": "object", "required": ["id", "decision", "reason_code"], "additionalProperties": false,
            "properties": {"id": {"type": "string"}, "decision": {"enum": ["accept", "reject"]}, "reason_code": {"type": "string"}}
        }}}
    })
}

fn settings(base_url: &str, key_env: Option<&str>) -> Llm {
    Llm {
        concurrency: 4,
        timeout_seconds: 0.5,
        max_attempts: 8,
        batch_attempts: 2,
        backoff_base_ms: 5,
        backoff_max_ms: 50,
        endpoints: vec![Endpoint {
            name: "double".into(),
            base_url: base_url.into(),
            model: "test-model".into(),
            api_key_env: key_env.map(String::from),
            requests_per_minute: None,
            tokens_per_minute: None,
        }],
        ..Llm::default()
    }
}

fn make(ids: &[String]) -> anyhow::Result<LlmRequest> {
    let items: Vec<Value> = ids.iter().map(|i| json!({"id": i})).collect();
    Ok(LlmRequest {
        stage: "test_audit".into(),
        template: "test_audit".into(),
        template_version: "1".into(),
        model: "test-model".into(),
        messages: vec![
            ChatMessage::new("system", "Judge each item."),
            ChatMessage::new(
                "user",
                serde_json::to_string(&json!({"items": items})).unwrap(),
            ),
        ],
        schema_name: "test_audit".into(),
        schema: schema(),
        temperature: 0.0,
        top_p: None,
        max_tokens: 256,
        seed: 1,
    })
}

fn ids(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("C{i:07}")).collect()
}

fn live_client(d: &Double, store: Arc<Transcript>, key_env: Option<&str>) -> LlmClient {
    let cfg = settings(&d.base_url(), key_env);
    let provider =
        OpenAiProvider::new(&cfg.endpoints, Duration::from_secs_f64(cfg.timeout_seconds)).unwrap();
    LlmClient::new(Arc::new(provider), store, &cfg, 7, false)
}

fn no_check() -> impl Fn(&Value) -> Result<(), String> + Send + Sync {
    |_| Ok(())
}

fn expected(ids: &[String]) -> Vec<Value> {
    ids.iter().map(|i| verdict_for(i)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_faults_leave_the_result_unchanged() {
    let all = ids(40);
    // Fault-free reference.
    let clean = Double::start(vec![]).await;
    let c = live_client(&clean, Arc::new(Transcript::memory()), None);
    let check = no_check();
    let reference = c.batches(&all, 10, &make, &check).await.unwrap();
    assert_eq!(reference, expected(&all));

    let faults = vec![
        Fault::RateLimited { retry_after: "1" },
        Fault::ServerError,
        Fault::Slow(Duration::from_millis(1500)),
        Fault::Reset,
        Fault::MalformedJson,
        Fault::SchemaInvalid,
        Fault::MissingId,
        Fault::DuplicateId,
        Fault::UnknownId,
        Fault::Truncated,
    ];
    let d = Double::start(faults).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Transcript::append(&dir.path().join("t.jsonl")).unwrap());
    let c = live_client(&d, store, None);
    let t0 = Instant::now();
    let got = c.batches(&all, 10, &make, &check).await.unwrap();
    assert_eq!(got, reference, "faults changed the stage result");
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "Retry-After was not honoured"
    );
    assert_eq!(d.faults_left(), 0, "not every scripted fault was exercised");

    // No result lost, and no prompt that already got a correct, stored answer was sent again.
    let log = d.log();
    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    for e in log.iter().filter(|e| e.answered) {
        *answered.entry(e.prompt.clone()).or_default() += 1;
    }
    assert!(
        answered.values().all(|&n| n == 1),
        "a stored request was repeated: {answered:?}"
    );
    let covered: std::collections::BTreeSet<&String> = log
        .iter()
        .filter(|e| e.answered)
        .flat_map(|e| e.ids.iter())
        .collect();
    assert_eq!(covered.len(), all.len());
    // The truncated answer was retried with a larger budget.
    let budgets: Vec<u64> = log.iter().filter_map(|e| e.max_tokens).collect();
    assert!(
        budgets.contains(&512),
        "no retry with a larger token budget: {budgets:?}"
    );
    let stats = c.run_stats();
    assert!(stats["test_audit"].transport_retries >= 5, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_keeps_failing_is_split_and_the_split_is_replayed() {
    let all = ids(8);
    let d = Double::start(vec![Fault::MissingId, Fault::UnknownId]).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let check = no_check();
    {
        let c = live_client(&d, Arc::new(Transcript::append(&path).unwrap()), None);
        let got = c.batches(&all, 8, &make, &check).await.unwrap();
        assert_eq!(got, expected(&all));
        assert_eq!(c.accounting()["test_audit"].split_batches, 1);
    }
    let halves: Vec<usize> = d
        .log()
        .iter()
        .filter(|e| e.answered)
        .map(|e| e.ids.len())
        .collect();
    assert_eq!(halves, vec![4, 4]);

    // Replay follows the recorded split without any provider.
    let store = Arc::new(Transcript::read_only(&path).unwrap());
    let cfg = settings("http://127.0.0.1:9/v1", None);
    let c = LlmClient::new(
        Arc::new(ReplayProvider {
            transcript: path.display().to_string(),
        }),
        store,
        &cfg,
        7,
        true,
    );
    assert_eq!(
        c.batches(&all, 8, &make, &check).await.unwrap(),
        expected(&all)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_run_sends_nothing_already_stored_and_replay_misses_name_the_key() {
    let all = ids(30);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let check = no_check();
    let d = Double::start(vec![]).await;
    {
        let c = live_client(&d, Arc::new(Transcript::append(&path).unwrap()), None);
        // Only the first half this time, as if the run had been killed.
        c.batches(&all[..15], 5, &make, &check).await.unwrap();
    }
    assert_eq!(d.log().len(), 3);
    let d2 = Double::start(vec![]).await;
    let c = live_client(&d2, Arc::new(Transcript::append(&path).unwrap()), None);
    let got = c.batches(&all, 5, &make, &check).await.unwrap();
    assert_eq!(got, expected(&all));
    assert_eq!(d2.log().len(), 3, "stored batches were requested again");
    assert_eq!(c.run_stats()["test_audit"].cache_hits, 3);

    // Replay: every stored answer is served; anything else is a miss naming stage and key.
    let store = Arc::new(Transcript::read_only(&path).unwrap());
    let cfg = settings(&d2.base_url(), None);
    let before = d2.connections();
    let c = LlmClient::new(
        Arc::new(ReplayProvider {
            transcript: path.display().to_string(),
        }),
        store,
        &cfg,
        7,
        true,
    );
    assert_eq!(
        c.batches(&all, 5, &make, &check).await.unwrap(),
        expected(&all)
    );
    let err = c
        .batches(&ids(31)[30..], 5, &make, &check)
        .await
        .unwrap_err()
        .to_string();
    let key = make(&ids(31)[30..]).unwrap().key();
    assert!(
        err.contains("transcript miss") && err.contains("test_audit") && err.contains(&key),
        "{err}"
    );
    assert_eq!(d2.connections(), before, "replay opened a connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_errors_stop_at_once_and_never_echo_the_key() {
    let var = "PRIVFORGE_TEST_KEY_AUTH";
    let secret = "sk-test-planted-9f8e7d6c5b4a";
    std::env::set_var(var, secret);
    let d = Double::start(vec![Fault::Unauthorized]).await;
    let c = live_client(&d, Arc::new(Transcript::memory()), Some(var));
    let check = no_check();
    let err = c.batches(&ids(5), 5, &make, &check).await.unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("authentication failed"), "{msg}");
    assert!(!msg.contains(secret));
    assert_eq!(d.log().len(), 1, "an authentication error was retried");
    assert_eq!(
        d.log()[0].authorization.as_deref(),
        Some(format!("Bearer {secret}").as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_refusing_json_schema_gets_json_mode_with_the_schema_in_the_prompt() {
    let d = Double::start(vec![Fault::RefuseJsonSchema]).await;
    let c = live_client(&d, Arc::new(Transcript::memory()), None);
    let check = no_check();
    let got = c.batches(&ids(3), 3, &make, &check).await.unwrap();
    assert_eq!(got, expected(&ids(3)));
    let formats: Vec<Option<String>> = d.log().iter().map(|e| e.response_format.clone()).collect();
    assert_eq!(
        formats,
        vec![Some("json_schema".into()), Some("json_object".into())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_checks_reject_answers_and_are_retried() {
    // A stage-level check that fails the first answer for an id is retried, not accepted.
    let d = Double::start(vec![]).await;
    let c = live_client(&d, Arc::new(Transcript::memory()), None);
    let seen = std::sync::Mutex::new(0);
    let check = |_: &Value| -> Result<(), String> {
        let mut n = seen.lock().unwrap();
        *n += 1;
        if *n == 1 {
            Err("first answer rejected by the stage".into())
        } else {
            Ok(())
        }
    };
    let got = c.batches(&ids(1), 1, &make, &check).await.unwrap();
    assert_eq!(got, expected(&ids(1)));
    assert_eq!(d.log().len(), 2);
    assert_eq!(c.accounting()["test_audit"].failures, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_model_answers_a_pinned_batch_schema_with_valid_json() {
    let Ok(path) = std::env::var("PRIVFORGE_MODEL") else {
        // `make test` always sets it (after `make model`); a bare `cargo test` may not.
        eprintln!("skipped: PRIVFORGE_MODEL not set");
        return;
    };
    let emb = privforge::config::Embedded {
        model_id: "smollm2".into(),
        path: path.into(),
        threads: 2,
        context: 2048,
    };
    let provider = privforge::llm::embedded_provider::EmbeddedProvider::load(&emb).unwrap();
    let cfg = Llm {
        concurrency: 1,
        ..Llm::default()
    };
    let client = LlmClient::new(
        Arc::new(provider),
        Arc::new(Transcript::memory()),
        &cfg,
        3,
        false,
    );
    let make_embedded = |ids: &[String]| -> anyhow::Result<LlmRequest> {
        let mut r = make(ids)?;
        r.model = "smollm2".into();
        r.schema = privforge::llm::pin_batch_ids(&schema(), ids);
        Ok(r)
    };
    let check = no_check();
    let ids = ids(3);
    let got = client
        .batches(&ids, 3, &make_embedded, &check)
        .await
        .unwrap();
    let validator = jsonschema::validator_for(&schema()).unwrap();
    assert!(validator.is_valid(&json!({ "results": got.clone() })));
    let got_ids: Vec<&str> = got.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(got_ids, ids.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    let acc = client.accounting();
    assert_eq!(acc["test_audit"].requests, 1);
    assert!(acc["test_audit"].completion_tokens > 0);
}
