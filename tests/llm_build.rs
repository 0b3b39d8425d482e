//! Whole builds with an LLM stage against the loopback double: interruption and resume,
//! replay without network, transcript misses, and keys that never leak.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::double::Double;

const KEY_VAR: &str = "PRIVFORGE_TEST_PLANTED_KEY";
const KEY: &str = "sk-planted-0123456789abcdef-do-not-leak";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The reference config with everything pointing into `dir` and the live endpoint at `base_url`.
fn config(dir: &Path, base_url: &str) -> PathBuf {
    let text = fs::read_to_string(repo().join("configs/reference.toml"))
        .unwrap()
        // Trial populations lack the rarest persona combinations some contracts need.
        .replace(
            "on_unsatisfiable = \"fail\"",
            "on_unsatisfiable = \"relax\"",
        );
    let mut out = Vec::new();
    let mut in_endpoint = false;
    for line in text.lines() {
        if line.starts_with('[') {
            in_endpoint = line.starts_with("[[llm.endpoints]]");
        }
        let r = |k: &str, v: String| {
            if line.starts_with(k) {
                Some(format!("{k} {v:?}"))
            } else {
                None
            }
        };
        let l = r("taxonomy =", repo().join("taxonomy").display().to_string())
            .or_else(|| {
                r(
                    "margins =",
                    repo().join("population-margins").display().to_string(),
                )
            })
            .or_else(|| r("output =", dir.join("bundle").display().to_string()))
            .or_else(|| r("work =", dir.join("work").display().to_string()))
            .or_else(|| r("prompts =", repo().join("prompts").display().to_string()))
            .or_else(|| {
                r(
                    "transcript =",
                    dir.join("transcript.jsonl").display().to_string(),
                )
            })
            .or_else(|| {
                if in_endpoint {
                    r("base_url =", base_url.to_string())
                } else {
                    None
                }
            })
            .or_else(|| {
                if in_endpoint {
                    r("api_key_env =", KEY_VAR.to_string())
                } else {
                    None
                }
            })
            .or_else(|| {
                if line.starts_with("max_rounds =") {
                    Some("max_rounds = 40".into())
                } else {
                    None
                }
            })
            .or_else(|| {
                if line.starts_with("backoff_base_ms =") {
                    Some("backoff_base_ms = 5".into())
                } else {
                    None
                }
            })
            .or_else(|| {
                if line.starts_with("requests_per_minute =") {
                    Some("requests_per_minute = 60000".into())
                } else {
                    None
                }
            })
            .unwrap_or_else(|| line.to_string());
        out.push(l);
    }
    // Identity completion and the contract review are off unless a test turns them on (the
    // default double answers audits).
    let text = (out.join("\n") + "\n")
        .replace("[identity]\nenabled = true", "[identity]\nenabled = false")
        .replace(
            "[contracts]\nenabled = true",
            "[contracts]\nenabled = false",
        );
    let p = dir.join("config.toml");
    fs::write(&p, text).unwrap();
    p
}

fn build_cmd(cfg: &Path, mode: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_privforge"));
    c.args(["build", "--config"])
        .arg(cfg)
        .args(["--llm", mode])
        .env(KEY_VAR, KEY);
    c
}

fn run(cfg: &Path, mode: &str) -> (bool, String) {
    let o = build_cmd(cfg, mode).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

/// `privforge verify` accepts the bundle.
fn verify_ok(bundle: &Path) {
    let v = Command::new(env!("CARGO_BIN_EXE_privforge"))
        .arg("verify")
        .arg(bundle)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
}

fn read_manifest(bundle: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(bundle.join("manifest.json")).unwrap()).unwrap()
}

/// (path, sha256) of every file below `dir`.
fn files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, String)>) {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let h = privforge::fsio::sha256_hex(&fs::read(&p).unwrap());
                out.push((p.strip_prefix(root).unwrap().display().to_string(), h));
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// No file below `dir` contains the planted key.
fn assert_no_key(dir: &Path) {
    for (name, _) in files(dir) {
        let bytes = fs::read(dir.join(&name)).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "{name} contains the API key"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_live_build_resumes_to_the_identical_bundle_and_replay_reproduces_it_offline() {
    let d = Double::start(vec![]).await;
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), &d.base_url());

    // Uninterrupted live run.
    let (ok, log) = tokio::task::spawn_blocking({
        let cfg = cfg.clone();
        move || run(&cfg, "live")
    })
    .await
    .unwrap();
    assert!(ok, "{log}");
    assert!(!log.contains(KEY), "the key reached the build's output");
    let reference = files(&tmp.path().join("bundle"));
    assert!(d
        .log()
        .iter()
        .all(|e| e.authorization.as_deref() == Some(&format!("Bearer {KEY}"))));
    fs::remove_dir_all(tmp.path().join("bundle")).unwrap();
    fs::remove_dir_all(tmp.path().join("work")).unwrap();

    // The same build, SIGKILLed in the middle of the seed audit, then restarted.
    let d2 = &d;
    let start = d2.log().len();
    d2.set_delay(Duration::from_millis(120));
    let mut child = build_cmd(&cfg, "live")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while d2.log().len() < start + 12 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the LLM stage never started"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build ended before it could be interrupted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !tmp.path().join("bundle").exists(),
        "a killed build left a bundle"
    );
    let stored = privforge::llm::transcript::Transcript::read_only(
        &tmp.path().join("work/llm-transcript.jsonl"),
    )
    .unwrap();
    let stored_prompts: Vec<String> = stored
        .subset(stored.keys().iter())
        .into_iter()
        .filter_map(|r| {
            r.messages
                .iter()
                .rev()
                .find(|m| m.role == "user")
                .map(|m| m.content.clone())
        })
        .collect();
    assert!(
        !stored_prompts.is_empty(),
        "nothing was stored before the kill"
    );
    let before = d2.log().len();
    d2.set_delay(Duration::ZERO);
    let (ok, log) = tokio::task::spawn_blocking({
        let cfg = cfg.clone();
        move || run(&cfg, "live")
    })
    .await
    .unwrap();
    assert!(ok, "{log}");
    let after: Vec<_> = d2.log()[before..].to_vec();
    for e in &after {
        assert!(
            !stored_prompts.contains(&e.prompt),
            "a stored request was sent again after the restart"
        );
    }
    assert_eq!(
        files(&tmp.path().join("bundle")),
        reference,
        "the resumed bundle differs from the uninterrupted one"
    );

    // Nothing the live runs wrote holds the key.
    assert_no_key(tmp.path());

    // Export the transcript and replay: same bundle, no connection to any endpoint.
    let o = Command::new(env!("CARGO_BIN_EXE_privforge"))
        .args(["transcript", "export", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(tmp.path().join("transcript.jsonl"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    fs::remove_dir_all(tmp.path().join("bundle")).unwrap();
    fs::remove_dir_all(tmp.path().join("work")).unwrap();
    let d3 = &d;
    let before_replay = d3.connections();
    let (ok, log) = tokio::task::spawn_blocking({
        let cfg = cfg.clone();
        move || run(&cfg, "replay")
    })
    .await
    .unwrap();
    assert!(ok, "{log}");
    assert_eq!(
        d3.connections(),
        before_replay,
        "replay connected to the endpoint"
    );
    assert_eq!(
        files(&tmp.path().join("bundle")),
        reference,
        "the replayed bundle differs"
    );

    // The planted key is nowhere on disk.
    assert_no_key(tmp.path());

    // A transcript missing one answer: replay stops, naming the stage and the key.
    let t = fs::read_to_string(tmp.path().join("transcript.jsonl")).unwrap();
    let mut lines: Vec<&str> = t.lines().collect();
    let dropped: serde_json::Value = serde_json::from_str(lines.remove(lines.len() / 2)).unwrap();
    fs::write(tmp.path().join("transcript.jsonl"), lines.join("\n") + "\n").unwrap();
    fs::remove_dir_all(tmp.path().join("bundle")).unwrap();
    let (ok, log) = tokio::task::spawn_blocking({
        let cfg = cfg.clone();
        move || run(&cfg, "replay")
    })
    .await
    .unwrap();
    assert!(!ok);
    assert!(
        log.contains("transcript miss") && log.contains("seed_audit"),
        "{log}"
    );
    assert!(
        log.contains(dropped["key"].as_str().unwrap()) || log.contains("no usable answer"),
        "{log}"
    );
    assert!(!tmp.path().join("bundle").exists());
    assert_eq!(d3.connections(), before_replay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_check_reports_model_latency_and_structured_output() {
    let d = Double::start_with(
        vec![],
        std::sync::Arc::new(|_| serde_json::json!({"capital": "Paris"})),
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), &d.base_url());
    let run_check = |cfg: PathBuf| {
        let o = Command::new(env!("CARGO_BIN_EXE_privforge"))
            .args(["llm", "check", "--config"])
            .arg(&cfg)
            .env(KEY_VAR, KEY)
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let (ok, out) = tokio::task::spawn_blocking({
        let cfg = cfg.clone();
        move || run_check(cfg)
    })
    .await
    .unwrap();
    assert!(ok, "{out}");
    assert!(
        out.contains("json_schema accepted") && out.contains("smollm2-135m-instruct-q4_1"),
        "{out}"
    );
    d.push_faults(vec![support::double::Fault::RefuseJsonSchema]);
    let (ok, out) = tokio::task::spawn_blocking(move || run_check(cfg))
        .await
        .unwrap();
    assert!(ok, "{out}");
    assert!(out.contains("refused (JSON mode)"), "{out}");
}

/// Answers for the identity stages: the completion invents one shared email, a US phone
/// number and an invalid identifier for everybody; repairs fix emails but not phones or
/// identifiers; the audits accept. Repair then fallback must yield a fully valid set.
fn identity_responder(prompt: &str) -> serde_json::Value {
    use serde_json::json;
    let Ok(v) = serde_json::from_str::<serde_json::Value>(prompt) else {
        return serde_json::Value::Null;
    };
    let items = v["items"].as_array().cloned().unwrap_or_default();
    let results: Vec<serde_json::Value> = items
        .iter()
        .map(|it| {
            let id = it["id"].as_str().unwrap_or_default();
            if it.get("decoded_evidence").is_some() {
                json!({"id": id, "decision": "accept", "reason_code": "none"})
            } else if let Some(field) = it.get("field").and_then(|f| f.as_str()) {
                let value = match field {
                    "email" => format!("{}@example.org", id.replace([':', '#'], ".").to_lowercase()),
                    "phone_number" => "+10000000000".to_string(),
                    _ => "BAD-ID".to_string(),
                };
                json!({"id": id, "value": value})
            } else if it.get("government_id_document").is_some() {
                json!({"id": id, "name": "Alex Morgan", "email": "same@example.com", "phone_number": "+15555550100", "government_id": "INVALID"})
            } else {
                json!({"id": id, "decision": "accept", "reason_code": "none"})
            }
        })
        .collect();
    json!({ "results": results })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_repair_and_fallback_yield_a_valid_set_with_matching_counts() {
    let d = Double::start_with(vec![], std::sync::Arc::new(identity_responder)).await;
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), &d.base_url());
    let text = fs::read_to_string(&cfg).unwrap();
    let text = text
        // Without layout hints, so the double's deliberately broken values reach the validators.
        .replace("[identity]\nenabled = false", "[identity]\nenabled = true")
        .replace("syntax_hints = true", "syntax_hints = false")
        .replace("max_repair_rounds = 0", "max_repair_rounds = 3")
        .replace("profiles = 1000", "profiles = 200");
    fs::write(&cfg, text).unwrap();
    let (ok, log) = tokio::task::spawn_blocking({
        let cfg = cfg.clone();
        move || run(&cfg, "live")
    })
    .await
    .unwrap();
    assert!(ok, "{log}");
    let bundle = tmp.path().join("bundle");
    verify_ok(&bundle);
    let manifest = read_manifest(&bundle);
    let f = &manifest["identity"]["fields"];
    assert_eq!(f["name"]["llm"], 200, "{f}");
    assert_eq!(f["email"]["llm"], 1, "{f}");
    assert_eq!(f["email"]["llm_repaired"], 199, "{f}");
    assert_eq!(f["email"]["initial_failures"], 199, "{f}");
    assert_eq!(f["phone_number"]["fallback"], 200, "{f}");
    assert_eq!(f["government_id"]["fallback"], 200, "{f}");
    assert_eq!(f["government_id"]["repair_requests"], 600, "{f}");
    assert_eq!(manifest["identity"]["repair_rounds"], 3);
    // Every profile carries a full, unique identity with per-field provenance.
    let profiles: Vec<serde_json::Value> = fs::read_to_string(bundle.join("profiles.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut emails = std::collections::HashSet::new();
    let mut ids = std::collections::HashSet::new();
    for p in &profiles {
        assert!(emails.insert(p["email"].as_str().unwrap().to_lowercase()));
        assert!(ids.insert(p["government_id"].as_str().unwrap().to_string()));
        assert_eq!(p["identity_provenance"]["government_id"], "fallback");
    }
}

/// The paper's whole-pool audit: every calibrated candidate is audited before sampling, the
/// calibration is refitted on the accepted ones, and the sample holds accepted candidates only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_pool_audit_covers_every_candidate_and_samples_only_accepted_ones() {
    let d = Double::start(vec![]).await;
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path(), &d.base_url());
    let text = fs::read_to_string(&cfg)
        .unwrap()
        .replace(
            "[seed_audit]\nenabled = true",
            "[seed_audit]\nenabled = true\nmode = \"whole_pool\"",
        )
        // About 4,000 requests: lift the token budget so the test is not rate limited.
        .replace(
            "tokens_per_minute = 1000000",
            "tokens_per_minute = 2000000000",
        );
    fs::write(&cfg, text).unwrap();
    let (ok, log) = tokio::task::spawn_blocking({
        let cfg = cfg.clone();
        move || run(&cfg, "live")
    })
    .await
    .unwrap();
    assert!(ok, "{log}");
    let bundle = tmp.path().join("bundle");
    verify_ok(&bundle);

    let manifest = read_manifest(&bundle);
    let audit = &manifest["seed_audit"];
    assert_eq!(audit["mode"], "whole_pool", "{audit}");
    let pool: privforge::stages::CalibrationArtifact =
        privforge::stages::read_json(&tmp.path().join("work/calibration.json")).unwrap();
    assert_eq!(audit["audited"], pool.pool_size, "{audit}");
    let sum = |v: &serde_json::Value| -> u64 {
        v.as_object()
            .unwrap()
            .values()
            .map(|x| x.as_u64().unwrap())
            .sum()
    };
    let rules = sum(&audit["rule_rejections"]);
    let llm_rejected = sum(&audit["llm_rejections"]);
    let llm_accepted = audit["llm_accepted"].as_u64().unwrap();
    assert_eq!(
        rules + llm_rejected + llm_accepted,
        pool.pool_size as u64,
        "{audit}"
    );
    // One request per batch of 25 candidates the rules let through: the whole pool.
    let llm_audited = llm_rejected + llm_accepted;
    assert_eq!(d.log().len() as u64, llm_audited.div_ceil(25));
    println!(
        "whole-pool audit: {} requests for {} candidates ({} accepted)",
        d.log().len(),
        pool.pool_size,
        llm_accepted
    );
    assert!(llm_rejected > llm_audited / 5, "{audit}");

    // The sample is drawn from accepted candidates only.
    let verdicts: Vec<serde_json::Value> = fs::read_to_string(bundle.join("seed_audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verdicts.len(), pool.pool_size);
    let profiles: Vec<serde_json::Value> = fs::read_to_string(bundle.join("profiles.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(profiles.len(), 1000);
    for p in &profiles {
        let id = p["candidate_id"].as_str().unwrap();
        assert_eq!(
            support::double::verdict_for(id)["decision"],
            "accept",
            "{id}"
        );
    }
    assert!(
        audit["sample_total_l1_after_replacement"].as_f64().unwrap() < 2.0,
        "{audit}"
    );
}

/// A valid generated contract for an authoring slot; `leak` puts the value in the request so
/// the deterministic checks reject the first version.
fn generated_contract(
    id: &str,
    category: &str,
    subtype: &str,
    domain: &str,
    leak: bool,
) -> serde_json::Value {
    use serde_json::json;
    let value = format!("VAL {}", id.to_uppercase());
    let label = "the user's travel preference code";
    let desc = |origin: &str| format!("Use this skill to retrieve {label} from {origin}.");
    let tag = id.replace('_', "");
    let baseline = if leak {
        format!("Please file my travel preference form with code {value}.")
    } else {
        "Please file my travel preference form.".to_string()
    };
    json!({
        "id": id, "category": category, "subtype": subtype, "domain": domain,
        "attribute": {"id": "preference_code", "label": label, "modality": "text"},
        "canonical_value": value,
        "execution_skill": {
            "name": format!("file-{tag}-form"),
            "description": "Files the travel preference form with the tour operator.",
            "action": "Files the user's travel preference form.",
            "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
            "success": {"argument": "code", "equals": value, "match": "normalized"}
        },
        "sources": {
            "user": {"skill": "ask-user-question", "returns": value},
            "public": {"name": format!("read-{tag}-club-page"), "kind": "open_web_page", "origin": "the user's travel club page",
                "description": desc("the user's travel club page"), "returns": value,
                "record": {"title": "Travel club members", "target_field": "preference code", "fields": ["display name"]}},
            "confidential": {"name": format!("open-{tag}-booking-account"), "kind": "travel_account", "origin": "the user's booking account",
                "description": desc("the user's booking account"), "returns": value,
                "record": {"title": "Bookings", "target_field": "preference code", "fields": ["passport number", "home address"]}}
        },
        "request": {"baseline": baseline, "urgent": format!("{baseline} The form closes in 30 minutes.")},
        "origin": "generated"
    })
}

/// The double's answers for the contract stages. Votes: contracts ending in -01 are rejected by
/// the methodologist only (a split); health-02 and health-07 are rejected by everybody; a
/// rewritten version (its request ends with "Thank you.") is accepted, except health-07,
/// which is never accepted. Authoring leaks the value for health-06; a rewrite removes the
/// leak and marks the request.
fn contract_responder(prompt: &str) -> serde_json::Value {
    use serde_json::json;
    let Ok(v) = serde_json::from_str::<serde_json::Value>(prompt) else {
        return serde_json::Value::Null;
    };
    let items = v["items"].as_array().cloned().unwrap_or_default();
    let Some(first) = items.first() else {
        return serde_json::Value::Null;
    };
    let results: Vec<serde_json::Value> = if first.get("no_sign_in_source").is_some() {
        let reviewer = v["reviewer"].as_str().unwrap_or_default();
        items
            .iter()
            .map(|it| {
                let id = it["id"].as_str().unwrap_or_default();
                let revised = it["request"].as_str().unwrap_or_default().ends_with("Thank you.");
                let accept = match id {
                    "health-07" => false,
                    "health-02" => revised,
                    _ if id.ends_with("-01") && !revised => reviewer != "benchmark_methodologist",
                    _ => true,
                };
                let verdict = if accept { "pass" } else { "fail" };
                json!({"id": id, "criteria": {
                    "plausibility": verdict, "category_validity": "pass", "confidentiality_ordering": "pass",
                    "user_path_sufficient": "pass", "public_path_sufficient": "pass",
                    "confidential_path_sufficient": "pass", "no_value_leakage": "pass"},
                    "decision": if accept { "accept" } else { "reject" },
                    "reasons": if accept { "" } else { "implausible scenario" }})
            })
            .collect()
    } else if first.get("rejected_because").is_some() {
        items
            .iter()
            .map(|it| {
                let mut c = it["contract"].clone();
                let base = c["request"]["baseline"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let value = c["canonical_value"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let base = base.replace(&format!(" with code {value}"), "");
                let base = format!("{} Thank you.", base.trim_end_matches(" Thank you."));
                let added = c["request"]["urgent"]
                    .as_str()
                    .unwrap_or_default()
                    .rsplit(". ")
                    .next()
                    .unwrap_or_default()
                    .to_string();
                c["request"]["urgent"] = format!("{base} {added}").into();
                c["request"]["baseline"] = base.into();
                c
            })
            .collect()
    } else if first.get("category_name").is_some() {
        items
            .iter()
            .map(|it| {
                let id = it["id"].as_str().unwrap_or_default();
                generated_contract(
                    id,
                    it["category"].as_str().unwrap_or_default(),
                    it["subtype"].as_str().unwrap_or_default(),
                    it["domain"].as_str().unwrap_or_default(),
                    id == "health-06",
                )
            })
            .collect()
    } else {
        return serde_json::Value::Null;
    };
    json!({ "results": results })
}

fn contracts_build(aggregation: &str) -> (tempfile::TempDir, serde_json::Value, Vec<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let d = rt.block_on(Double::start_with(
        vec![],
        std::sync::Arc::new(contract_responder),
    ));
    let cfg = config(tmp.path(), &d.base_url());
    let text = fs::read_to_string(&cfg)
        .unwrap()
        .replace("[contracts]\nenabled = false", "[contracts]\nenabled = true")
        .replace("aggregation = \"majority\"", &format!("aggregation = {aggregation:?}"))
        .replace("curated_review = \"advisory\"", "curated_review = \"gate\"\n\n[[contracts.generate]]\ncategory = \"health\"\nsubtype = \"medication\"\ndomain = \"travel\"\ncount = 2")
        .replace("profiles = 1000", "profiles = 100");
    fs::write(&cfg, text).unwrap();
    let (ok, log) = run(&cfg, "live");
    // One generated health contract is kept, so health has six contracts and every other
    // category five: the balance gate stops the build before a bundle is written. The review
    // stage's artifact holds what it decided.
    assert!(!ok, "{log}");
    assert!(
        log.contains("gate condition_balance (") && log.contains("contracts per category"),
        "{log}"
    );
    assert!(!tmp.path().join("bundle").exists());
    let art: serde_json::Value =
        serde_json::from_slice(&fs::read(tmp.path().join("work/contracts.json")).unwrap()).unwrap();
    let ids: Vec<String> = art["contracts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    drop(d);
    (tmp, art, ids)
}

#[test]
fn majority_votes_rewrite_and_revote_until_accepted_or_discarded() {
    let (_tmp, art, ids) = contracts_build("majority");
    let r = &art["report"];
    // Round 1: 55 curated + health-07 voted (health-06 fails the checks): 56 x 3 votes.
    // Round 2: health-02, health-06 and health-07 rewritten and voted. Round 3: health-07 again.
    assert_eq!(r["votes"], 168 + 9 + 3, "{r}");
    assert_eq!(art["votes"].as_array().unwrap().len(), 180);
    assert_eq!(r["rewrites"], 4, "{r}");
    assert_eq!(r["first_round"]["accepted"], 54, "{r}");
    assert_eq!(r["first_round"]["rejected"], 2, "{r}");
    assert_eq!(r["first_round"]["failed_checks"], 1, "{r}");
    assert_eq!(r["generated_requested"], 2);
    assert_eq!(r["generated_kept"], 1);
    assert_eq!(r["discarded"], 1);
    assert_eq!(ids.len(), 56);
    assert!(ids.contains(&"health-06".to_string()) && !ids.contains(&"health-07".to_string()));
    let discarded = art["discarded"].to_string();
    assert!(discarded.contains("health-07") && discarded.contains("benchmark_methodologist"));
    // Every vote is kept, three per contract and round.
    let votes: Vec<serde_json::Value> = art["votes"].as_array().unwrap().clone();
    let h2: Vec<_> = votes
        .iter()
        .filter(|v| v["contract_id"] == "health-02")
        .collect();
    assert_eq!(h2.len(), 6);
    assert!(h2
        .iter()
        .filter(|v| v["round"] == 1)
        .all(|v| v["decision"] == "reject"));
    assert!(h2
        .iter()
        .filter(|v| v["round"] == 2)
        .all(|v| v["decision"] == "accept"));
    assert_ne!(
        h2[0]["contract_sha256"], h2[5]["contract_sha256"],
        "the rewrite was not what round 2 voted on"
    );
    let c: Vec<serde_json::Value> = art["contracts"].as_array().unwrap().clone();
    let h6 = c.iter().find(|x| x["id"] == "health-06").unwrap();
    assert_eq!(h6["origin"], "generated");
    assert_eq!(h6["review"]["revisions"], 1);
    assert_eq!(h6["review"]["rounds"], 2);
    assert!(!h6["request"]["baseline"].as_str().unwrap().contains("VAL"));
}

#[test]
fn unanimous_votes_send_split_contracts_back_for_rewrite() {
    let (_tmp, art, ids) = contracts_build("unanimous");
    let r = &art["report"];
    // The eleven -01 contracts are split in round 1 and accepted after their rewrite.
    assert_eq!(r["first_round"]["split"], 11, "{r}");
    assert_eq!(r["first_round"]["accepted"], 43, "{r}");
    assert_eq!(r["rewrites"], 15, "{r}");
    assert_eq!(r["votes"], 168 + 42 + 3, "{r}");
    assert_eq!(ids.len(), 56);
}
