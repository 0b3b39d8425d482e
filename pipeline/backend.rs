//! The reference backend: serves a bundle's payloads on loopback to the skill scripts, logs
//! every access as JSONL and checks execution arguments against the contract's success
//! criterion. Payloads are held in memory, keyed by payload key; no request path is ever
//! mapped to a file, so nothing outside the bundle can be served. The only state is the log.

use crate::data_planning::Payload;
use crate::run_matrix::RunSpec;
use crate::stages::read_jsonl;
use anyhow::{anyhow, Context, Result};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

struct Run {
    /// Skill name → payload key.
    payload_keys: BTreeMap<String, String>,
}

struct Log {
    out: Box<dyn Write + Send>,
    seq: u64,
}

pub struct Backend {
    payloads: HashMap<String, Payload>,
    runs: HashMap<String, Run>,
    /// Contract id → its execution skill's input schema, compiled.
    schemas: HashMap<String, jsonschema::Validator>,
    log: Mutex<Log>,
}

/// Case, spacing and punctuation ignored, as contracts with `match = "normalized"` specify.
pub fn normalize(s: &str) -> String {
    crate::policy_validation::words(s).join(" ")
}

/// Whether `given` satisfies an execution payload's criterion.
pub fn matches(given: &str, accepts: &str, mode: &str) -> bool {
    match mode {
        "exact" => given == accepts,
        _ => normalize(given) == normalize(accepts),
    }
}

impl Backend {
    /// Loads a bundle's payloads, runs and execution schemas; `log` receives one JSON line per
    /// request.
    pub fn load(bundle: &Path, log: Box<dyn Write + Send>) -> Result<Self> {
        let mut payloads = HashMap::new();
        for p in read_jsonl::<Payload>(&bundle.join("payloads.jsonl"))? {
            payloads.insert(p.key.clone(), p);
        }
        let runs: HashMap<String, Run> = read_jsonl::<RunSpec>(&bundle.join("runs.jsonl"))?
            .into_iter()
            .map(|r| {
                (
                    r.run_id,
                    Run {
                        payload_keys: r.payload_keys,
                    },
                )
            })
            .collect();
        let mut schemas = HashMap::new();
        for c in read_jsonl::<Value>(&bundle.join("contracts.jsonl"))? {
            let id = c["id"].as_str().unwrap_or_default().to_string();
            let v = jsonschema::validator_for(&c["execution_skill"]["input_schema"])
                .map_err(|e| anyhow!("contracts.jsonl: {id}: input schema: {e}"))?;
            schemas.insert(id, v);
        }
        Ok(Self {
            payloads,
            runs,
            schemas,
            log: Mutex::new(Log { out: log, seq: 0 }),
        })
    }

    fn record(
        &self,
        endpoint: &str,
        run: &str,
        skill: &str,
        key: &str,
        status: u16,
        outcome: &str,
    ) {
        let mut log = match self.log.lock() {
            Ok(l) => l,
            Err(p) => p.into_inner(),
        };
        log.seq += 1;
        let line = json!({
            "seq": log.seq, "endpoint": endpoint, "run": run, "skill": skill, "key": key,
            "status": status, "outcome": outcome,
        });
        let _ = writeln!(log.out, "{line}");
        let _ = log.out.flush();
    }

    /// Checks that `run` lists `skill` with `key` (or, with `key` None, returns its key).
    fn resolve(&self, run: &str, skill: &str, key: Option<&str>) -> Result<String, (u16, String)> {
        if run.is_empty() {
            return Err((400, "the run id is missing (set PRIVFORGE_RUN_ID)".into()));
        }
        let r = self
            .runs
            .get(run)
            .ok_or_else(|| (404, format!("unknown run {run:?}")))?;
        let k = r.payload_keys.get(skill).ok_or_else(|| {
            (
                404,
                format!("skill {skill:?} is not available in run {run:?}"),
            )
        })?;
        match key {
            Some(want) if want != k => Err((
                403,
                format!("payload {want:?} is not available to skill {skill:?} in run {run:?}"),
            )),
            _ => Ok(k.clone()),
        }
    }

    /// `GET /v1/payloads/<key>`: the record a public or confidential source shows.
    pub fn fetch(&self, key: &str, run: &str, skill: &str) -> (u16, Value) {
        let out = (|| {
            let (p, rec) = self
                .payloads
                .get(key)
                .filter(|p| p.role == "public" || p.role == "confidential")
                .and_then(|p| p.record.as_ref().map(|r| (p, r)))
                .ok_or_else(|| (404, format!("unknown payload key {key:?}")))?;
            self.resolve(run, skill, Some(key))?;
            let fields: Vec<Value> = rec
                .fields
                .iter()
                .map(|f| json!({"label": f.label, "value": f.value}))
                .collect();
            Ok::<_, (u16, String)>(json!({
                "source": p.skill, "title": rec.title, "fields": fields,
                "target": {"label": rec.target.label, "value": rec.target.value},
            }))
        })();
        self.finish("payloads", run, skill, key, out, "served")
    }

    /// `POST /v1/interact`: the user's reply in this run (or the fixed unavailability message).
    pub fn interact(&self, run: &str, skill: &str) -> (u16, Value) {
        let mut key = String::new();
        let out = (|| {
            key = self.resolve(run, skill, None)?;
            let p = self
                .payloads
                .get(&key)
                .filter(|p| p.role == "user" || p.role == "user_unavailable")
                .ok_or_else(|| {
                    (
                        404,
                        format!("skill {skill:?} is not a user-interaction skill"),
                    )
                })?;
            Ok(match (&p.reply, &p.message) {
                (Some(r), _) => json!({"modality": r.modality, "value": r.value}),
                (None, m) => json!({"message": m}),
            })
        })();
        let k = key.clone();
        self.finish("interact", run, skill, &k, out, "served")
    }

    /// `POST /v1/execute/<key>`: accepted when the criterion's argument holds the canonical
    /// value under the contract's match rule and the arguments fit the input schema.
    pub fn execute(&self, key: &str, run: &str, skill: &str, arguments: &Value) -> (u16, Value) {
        let mut outcome = "rejected";
        let out = (|| {
            let (p, ex) = self
                .payloads
                .get(key)
                .and_then(|p| p.execution.as_ref().map(|e| (p, e)))
                .ok_or_else(|| (404, format!("unknown payload key {key:?}")))?;
            self.resolve(run, skill, Some(key))?;
            if let Some(v) = self.schemas.get(&p.contract_id) {
                if let Some(e) = v.iter_errors(arguments).next() {
                    return Err((
                        422,
                        format!(
                            "arguments do not fit the input schema at {}: {e}",
                            e.instance_path
                        ),
                    ));
                }
            }
            let arg = ex.argument.as_str();
            let given = arguments
                .get(arg)
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            let ok = matches(given, &ex.accepts, &ex.r#match);
            Ok(if ok {
                outcome = "accepted";
                json!({"status": "accepted", "message": "The action was carried out."})
            } else {
                json!({"status": "rejected", "message": format!("The value given for {arg} was not accepted.")})
            })
        })();
        self.finish("execute", run, skill, key, out, outcome)
    }

    fn finish(
        &self,
        endpoint: &str,
        run: &str,
        skill: &str,
        key: &str,
        out: Result<Value, (u16, String)>,
        outcome: &str,
    ) -> (u16, Value) {
        match out {
            Ok(v) => {
                self.record(endpoint, run, skill, key, 200, outcome);
                (200, v)
            }
            Err((code, msg)) => {
                let what = match code {
                    404 => "not_found",
                    403 => "forbidden",
                    422 => "invalid_arguments",
                    _ => "bad_request",
                };
                self.record(endpoint, run, skill, key, code, what);
                (code, json!({"error": msg}))
            }
        }
    }
}

fn reply((code, body): (u16, Value)) -> Response {
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

fn field<'a>(body: &'a Value, k: &str) -> &'a str {
    body.get(k).and_then(|v| v.as_str()).unwrap_or_default()
}

/// The HTTP routes over a loaded backend.
pub fn router(b: Arc<Backend>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route(
            "/v1/payloads/{*key}",
            get(
                |State(b): State<Arc<Backend>>,
                 UrlPath(key): UrlPath<String>,
                 Query(q): Query<HashMap<String, String>>| async move {
                    let get = |k: &str| q.get(k).map(String::as_str).unwrap_or_default();
                    reply(b.fetch(&key, get("run"), get("skill")))
                },
            ),
        )
        .route(
            "/v1/interact",
            post(
                |State(b): State<Arc<Backend>>, Json(body): Json<Value>| async move {
                    reply(b.interact(field(&body, "run"), field(&body, "skill")))
                },
            ),
        )
        .route(
            "/v1/execute/{*key}",
            post(
                |State(b): State<Arc<Backend>>,
                 UrlPath(key): UrlPath<String>,
                 Json(body): Json<Value>| async move {
                    let args = body.get("arguments").cloned().unwrap_or(Value::Null);
                    reply(b.execute(&key, field(&body, "run"), field(&body, "skill"), &args))
                },
            ),
        )
        .fallback(|| async { reply((404, json!({"error": "no such endpoint"}))) })
        .with_state(b)
}

/// A backend listening on loopback; dropping the handle stops it.
pub struct Running {
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts `b` on `127.0.0.1:port` (0 picks a free port) in a background thread.
pub fn start(b: Backend, port: u16) -> Result<Running> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let app = router(Arc::new(b));
    let thread = std::thread::spawn(move || {
        rt.block_on(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
    });
    Ok(Running {
        addr,
        shutdown: Some(tx),
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_matching_ignores_case_spacing_and_punctuation() {
        assert!(matches(
            "Type 1  Diabetes.",
            "type 1 diabetes",
            "normalized"
        ));
        assert!(!matches("type 2 diabetes", "type 1 diabetes", "normalized"));
        assert!(!matches("Type 1 diabetes", "type 1 diabetes", "exact"));
        assert!(matches("MTG-731-4490", "MTG-731-4490", "exact"));
    }
}
