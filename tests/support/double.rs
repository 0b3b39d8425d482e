//! An OpenAI-compatible chat-completions server on loopback for tests and benchmarks, with
//! scripted faults. Plain HTTP/1.1 over tokio so every fault (resets, slow answers, broken
//! bodies) is under the test's control. Batch prompts are a JSON object `{"items": [{"id":
//! ...}, ...]}` in the last user message; the answer for each id depends on the id alone.

#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    RateLimited { retry_after: &'static str },
    ServerError,
    Slow(Duration),
    Reset,
    MalformedJson,
    SchemaInvalid,
    MissingId,
    DuplicateId,
    UnknownId,
    Truncated,
    Unauthorized,
    RefuseJsonSchema,
}

#[derive(Debug, Clone)]
pub struct Logged {
    /// sha256-free fingerprint of the prompt: the last user message.
    pub prompt: String,
    pub ids: Vec<String>,
    pub fault: Option<Fault>,
    /// True when the double sent a well-formed, correct answer.
    pub answered: bool,
    pub max_tokens: Option<u64>,
    pub response_format: Option<String>,
    pub authorization: Option<String>,
}

pub type Responder = Arc<dyn Fn(&str) -> Value + Send + Sync>;

pub struct Double {
    pub addr: SocketAddr,
    delay_ms: Arc<AtomicU64>,
    script: Arc<Mutex<VecDeque<Fault>>>,
    log: Arc<Mutex<Vec<Logged>>>,
    connections: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

/// The default answer for an id: reject ids whose digit sum is a multiple of 4.
pub fn verdict_for(id: &str) -> Value {
    let sum: u32 = id.chars().filter_map(|c| c.to_digit(10)).sum();
    let accept = sum % 4 != 0;
    json!({"id": id, "decision": if accept { "accept" } else { "reject" }, "reason_code": if accept { "none" } else { "other_contradiction" }})
}

fn completion(content: &str, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-double",
        "object": "chat.completion",
        "created": 0,
        "model": "double-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    })
}

impl Double {
    pub async fn start(faults: Vec<Fault>) -> Self {
        Self::start_with(faults, Arc::new(|_| Value::Null)).await
    }

    /// `respond` gives the content for prompts that are not batches (returns Null for batches).
    pub async fn start_with(faults: Vec<Fault>, respond: Responder) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let script = Arc::new(Mutex::new(VecDeque::from(faults)));
        let log = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicU64::new(0));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let (s, l, c, dl) = (
            script.clone(),
            log.clone(),
            connections.clone(),
            delay_ms.clone(),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    break;
                };
                c.fetch_add(1, Ordering::Relaxed);
                let (s, l, r, dl) = (s.clone(), l.clone(), respond.clone(), dl.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, s, l, r, dl).await;
                });
            }
        });
        Double {
            addr,
            delay_ms,
            script,
            log,
            connections,
            task,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn log(&self) -> Vec<Logged> {
        self.log.lock().unwrap().clone()
    }

    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Every answer is held back this long (to give a test time to interrupt a run).
    pub fn set_delay(&self, d: Duration) {
        self.delay_ms.store(d.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn faults_left(&self) -> usize {
        self.script.lock().unwrap().len()
    }

    pub fn push_faults(&self, faults: Vec<Fault>) {
        self.script.lock().unwrap().extend(faults);
    }
}

impl Drop for Double {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(Vec<(String, String)>, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let headers: Vec<(String, String)> = head
                .lines()
                .skip(1)
                .filter_map(|l| {
                    l.split_once(':')
                        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                })
                .collect();
            let len: usize = headers
                .iter()
                .find(|h| h.0 == "content-length")
                .and_then(|h| h.1.parse().ok())
                .unwrap_or(0);
            let start = end + 4;
            while buf.len() < start + len {
                let mut chunk = [0u8; 65536];
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[start..start + len].to_vec();
            buf.drain(..start + len);
            return Some((headers, body));
        }
        let mut chunk = [0u8; 65536];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn write_response(
    stream: &mut TcpStream,
    status: &str,
    extra: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: keep-alive\r\n\r\n",
        body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out).await
}

async fn serve(
    mut stream: TcpStream,
    script: Arc<Mutex<VecDeque<Fault>>>,
    log: Arc<Mutex<Vec<Logged>>>,
    respond: Responder,
    delay_ms: Arc<AtomicU64>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = Vec::new();
    while let Some((headers, body)) = read_request(&mut stream, &mut buf).await {
        let delay = delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let prompt = req["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|x| x["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_string();
        let items: Vec<String> = serde_json::from_str::<Value>(&prompt)
            .ok()
            .and_then(|v| v["items"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|i| i["id"].as_str().map(String::from))
            .collect();
        let fault = script.lock().unwrap().pop_front();
        let mut entry = Logged {
            prompt: prompt.clone(),
            ids: items.clone(),
            fault: fault.clone(),
            answered: false,
            max_tokens: req["max_tokens"]
                .as_u64()
                .or(req["max_completion_tokens"].as_u64()),
            response_format: req["response_format"]["type"].as_str().map(String::from),
            authorization: headers
                .iter()
                .find(|h| h.0 == "authorization")
                .map(|h| h.1.clone()),
        };
        let results: Vec<Value> = items.iter().map(|i| verdict_for(i)).collect();
        // The responder may answer any prompt; Null keeps the default batch verdicts.
        let custom = respond(&prompt);
        let good = if !custom.is_null() || items.is_empty() {
            custom
        } else {
            json!({"results": results})
        };
        let content = |v: &Value| serde_json::to_string(v).unwrap();
        let ok = |v: Value| serde_json::to_vec(&completion(&content(&v), "stop")).unwrap();
        match fault {
            None => {
                entry.answered = true;
                log.lock().unwrap().push(entry);
                write_response(&mut stream, "200 OK", "", &ok(good)).await?;
            }
            Some(f) => {
                log.lock().unwrap().push(entry);
                match f {
                    Fault::RateLimited { retry_after } => {
                        let b = br#"{"error":{"message":"rate limit reached","type":"rate_limit_error","param":null,"code":null}}"#;
                        write_response(
                            &mut stream,
                            "429 Too Many Requests",
                            &format!("retry-after: {retry_after}\r\n"),
                            b,
                        )
                        .await?
                    }
                    Fault::ServerError => {
                        let b = br#"{"error":{"message":"internal error","type":"server_error","param":null,"code":null}}"#;
                        write_response(&mut stream, "500 Internal Server Error", "", b).await?
                    }
                    Fault::Unauthorized => {
                        let b = br#"{"error":{"message":"invalid api key","type":"invalid_request_error","param":null,"code":null}}"#;
                        write_response(&mut stream, "401 Unauthorized", "", b).await?
                    }
                    Fault::RefuseJsonSchema => {
                        if req["response_format"]["type"] == "json_schema" {
                            let b = br#"{"error":{"message":"response_format json_schema is not supported","type":"invalid_request_error","param":null,"code":null}}"#;
                            write_response(&mut stream, "400 Bad Request", "", b).await?
                        } else {
                            write_response(&mut stream, "200 OK", "", &ok(good)).await?
                        }
                    }
                    Fault::Slow(d) => {
                        tokio::time::sleep(d).await;
                        write_response(&mut stream, "200 OK", "", &ok(good)).await?
                    }
                    Fault::Reset => {
                        #[allow(deprecated)]
                        stream.set_linger(Some(Duration::ZERO))?;
                        return Ok(());
                    }
                    Fault::MalformedJson => {
                        write_response(&mut stream, "200 OK", "", b"{\"id\": \"x\", \"choices\": [")
                            .await?
                    }
                    Fault::SchemaInvalid => {
                        let mut bad = good.clone();
                        if let Some(r) = bad["results"].as_array_mut() {
                            if let Some(first) = r.first_mut() {
                                first["decision"] = json!("maybe");
                            }
                        } else {
                            bad = json!({"unexpected": true});
                        }
                        write_response(&mut stream, "200 OK", "", &ok(bad)).await?
                    }
                    Fault::MissingId => {
                        let mut r = results.clone();
                        r.pop();
                        write_response(&mut stream, "200 OK", "", &ok(json!({"results": r})))
                            .await?
                    }
                    Fault::DuplicateId => {
                        let mut r = results.clone();
                        if let Some(f) = r.first().cloned() {
                            let n = r.len();
                            r[n - 1] = f;
                        }
                        write_response(&mut stream, "200 OK", "", &ok(json!({"results": r})))
                            .await?
                    }
                    Fault::UnknownId => {
                        let mut r = results.clone();
                        if let Some(last) = r.last_mut() {
                            last["id"] = json!("INVENTED");
                        }
                        write_response(&mut stream, "200 OK", "", &ok(json!({"results": r})))
                            .await?
                    }
                    Fault::Truncated => {
                        let text = content(&good);
                        let cut = &text[..text.len() / 2];
                        let body = serde_json::to_vec(&completion(cut, "length")).unwrap();
                        write_response(&mut stream, "200 OK", "", &body).await?
                    }
                }
            }
        }
    }
    Ok(())
}
