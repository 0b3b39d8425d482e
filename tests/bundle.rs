//! The bundle as a product: `verify` catches schema violations, dangling references and
//! tampering; the reference backend serves only payload keys over real HTTP on loopback;
//! the end-to-end check passes on a good bundle and fails on a bad one; the report renders
//! in headless Chromium.

use serde_json::Value;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

mod support;
use support::fixture::{copy_dir, offline_config};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_privforge"))
}

/// One bundle of a 100-profile population, built once per test binary.
fn pristine() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = offline_config(tmp.path(), 100, &[("on_unsatisfiable =", "\"relax\"")]);
        privforge::stages::build(&cfg, None, None).unwrap();
        tmp
    })
    .path()
}

/// A private copy of the pristine bundle.
fn bundle_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let b = tmp.path().join("bundle");
    copy_dir(&pristine().join("bundle"), &b);
    (tmp, b)
}

fn lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn write_lines(path: &Path, v: &[Value]) {
    let text: String = v.iter().map(|x| format!("{x}\n")).collect();
    fs::write(path, text).unwrap();
}

/// Re-signs `file` in the manifest and SHA256SUMS, so only the check under test can object.
fn rehash(b: &Path, file: &str) {
    let bytes = fs::read(b.join(file)).unwrap();
    let mut m: Value = serde_json::from_slice(&fs::read(b.join("manifest.json")).unwrap()).unwrap();
    m["files"][file] = serde_json::json!({
        "sha256": privforge::fsio::sha256_hex(&bytes), "bytes": bytes.len()
    });
    let mut text = serde_json::to_string_pretty(&m).unwrap();
    text.push('\n');
    fs::write(b.join("manifest.json"), text).unwrap();
    let sums = privforge::verify::sha256sums(b)
        .unwrap()
        .lines()
        .filter(|l| !l.ends_with("  SHA256SUMS"))
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    fs::write(b.join("SHA256SUMS"), sums).unwrap();
}

fn verify_err(b: &Path) -> String {
    let o = bin().arg("verify").arg(b).output().unwrap();
    assert!(!o.status.success(), "verify accepted a broken bundle");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_pristine_bundle_verifies_and_a_resigned_copy_too() {
    let (_t, b) = bundle_copy();
    rehash(&b, "runs.jsonl");
    let o = bin().arg("verify").arg(&b).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in [
        "DATA_CARD.md",
        "croissant.json",
        "report.html",
        "SHA256SUMS",
        "schemas/index.json",
        "schemas/run.record.schema.json",
    ] {
        assert!(b.join(f).is_file(), "{f} missing");
    }
}

#[test]
fn verify_names_a_schema_violation() {
    let (_t, b) = bundle_copy();
    let mut runs = lines(&b.join("runs.jsonl"));
    runs[0]["order"] = 9.into();
    write_lines(&b.join("runs.jsonl"), &runs);
    rehash(&b, "runs.jsonl");
    let e = verify_err(&b);
    assert!(
        e.contains(
            "runs.jsonl:1: schema violation (schemas/run.record.schema.json) at field /order"
        ),
        "{e}"
    );
}

#[test]
fn verify_names_a_dangling_reference() {
    let (_t, b) = bundle_copy();
    let mut runs = lines(&b.join("runs.jsonl"));
    runs[7]["profile_id"] = "P0999".into();
    write_lines(&b.join("runs.jsonl"), &runs);
    rehash(&b, "runs.jsonl");
    let e = verify_err(&b);
    assert!(e.contains("runs.jsonl:8: unknown persona \"P0999\""), "{e}");

    let (_t, b) = bundle_copy();
    let mut runs = lines(&b.join("runs.jsonl"));
    let keys = runs[3]["payload_keys"].as_object_mut().unwrap();
    let (skill, _) = keys
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    keys.insert(skill.clone(), "health-09/public".into());
    write_lines(&b.join("runs.jsonl"), &runs);
    rehash(&b, "runs.jsonl");
    let e = verify_err(&b);
    assert!(
        e.contains(&format!(
            "runs.jsonl:4: skill {skill} names unknown payload \"health-09/public\""
        )),
        "{e}"
    );
}

#[test]
fn verify_re_runs_the_coherence_gates() {
    // A well-formed, fully re-signed bundle whose run breaks the Discovery balance.
    let (_t, b) = bundle_copy();
    let mut runs = lines(&b.join("runs.jsonl"));
    let r = runs
        .iter_mut()
        .find(|r| r["run_id"] == "health-02/label/user_unavailable/o3")
        .unwrap();
    r["discovery"].as_array_mut().unwrap().swap(0, 2);
    write_lines(&b.join("runs.jsonl"), &runs);
    rehash(&b, "runs.jsonl");
    let e = verify_err(&b);
    assert!(e.contains("the bundle does not pass them"), "{e}");
    assert!(e.contains("gate discovery_position_balance ("), "{e}");
    assert!(e.contains("contract health-02"), "{e}");
}

#[test]
fn verify_names_a_tampered_payload() {
    let (_t, b) = bundle_copy();
    let text = fs::read_to_string(b.join("payloads.jsonl")).unwrap();
    fs::write(
        b.join("payloads.jsonl"),
        text.replacen("type 1 diabetes", "type 2 diabetes", 1),
    )
    .unwrap();
    let e = verify_err(&b);
    assert!(e.contains("payloads.jsonl: sha256"), "{e}");
    assert!(e.contains("does not match manifest.json"), "{e}");
}

/// One raw HTTP/1.1 request, so paths reach the server exactly as written.
fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let b = body.map(|v| v.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status: u16 = out.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    (status, body)
}

#[test]
fn backend_serves_payload_keys_only_and_logs_every_access() {
    let b = pristine().join("bundle");
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("access.jsonl");
    let backend =
        privforge::backend::Backend::load(&b, Box::new(fs::File::create(&log).unwrap())).unwrap();
    let server = privforge::backend::start(backend, 0).unwrap();
    let a = server.addr;
    let run = lines(&b.join("runs.jsonl"))
        .into_iter()
        .find(|r| r["run_id"] == "health-01/neutral/baseline/o1")
        .unwrap();
    let skill_of = |role: &str| -> String {
        run["discovery"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["role"] == role)
            .unwrap()["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let public = skill_of("public");
    let q = format!("?run=health-01%2Fneutral%2Fbaseline%2Fo1&skill={public}");
    let mut requests = 0;
    let mut get = |path: &str| {
        requests += 1;
        http(a, "GET", path, None)
    };

    let (st, body) = get(&format!("/v1/payloads/health-01/public{q}"));
    assert_eq!(st, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["target"]["value"], "type 1 diabetes");
    assert!(v.get("exposure").is_none(), "internal fields leak: {body}");

    // Unknown keys, keys of other roles (they would reveal the value) and traversal attempts.
    for path in [
        format!("/v1/payloads/health-01/nonexistent{q}"),
        format!("/v1/payloads/health-01/execution{q}"),
        format!("/v1/payloads/health-01/user{q}"),
        format!("/v1/payloads/../../etc/passwd{q}"),
        format!("/v1/payloads/..%2F..%2Fmanifest.json{q}"),
        format!("/v1/payloads/%2e%2e/%2e%2e/SHA256SUMS{q}"),
        format!("/v1/payloads/health-01%2F..%2F..%2Fmanifest.json{q}"),
        "/../../etc/passwd".to_string(),
        "/manifest.json".to_string(),
        "/skills/neutral/ask-user-question/SKILL.md".to_string(),
    ] {
        let (st, body) = get(&path);
        assert_eq!(st, 404, "{path} answered {st}: {body}");
        for secret in [
            "bundle_format",
            "root:",
            "type 1 diabetes",
            "name: ask-user-question",
        ] {
            assert!(!body.contains(secret), "{path} leaked {secret:?}");
        }
    }
    // A payload of another skill is refused even with a valid run.
    let (st, _) = get(&format!("/v1/payloads/health-02/public{q}"));
    assert_eq!(st, 403);
    // No run id: a clear 400.
    let (st, body) = get(&format!("/v1/payloads/health-01/public?skill={public}"));
    assert_eq!(st, 400);
    assert!(body.contains("PRIVFORGE_RUN_ID"), "{body}");

    // Execution: the canonical value (normalized match) is accepted, another value is not.
    let exec = skill_of("execution");
    let call = |value: &str| serde_json::json!({"run": "health-01/neutral/baseline/o1", "skill": exec, "arguments": {"medical_condition": value}});
    let (st, body) = http(
        a,
        "POST",
        "/v1/execute/health-01/execution",
        Some(&call("Type 1 Diabetes")),
    );
    assert_eq!(st, 200);
    assert!(body.contains("\"accepted\""), "{body}");
    let (st, body) = http(
        a,
        "POST",
        "/v1/execute/health-01/execution",
        Some(&call("type 2 diabetes")),
    );
    assert_eq!(st, 200);
    assert!(body.contains("\"rejected\""), "{body}");
    let bad = serde_json::json!({"run": "health-01/neutral/baseline/o1", "skill": exec, "arguments": {"medical_condition": 7}});
    let (st, _) = http(a, "POST", "/v1/execute/health-01/execution", Some(&bad));
    assert_eq!(st, 422);
    // The user skill answers through the run.
    let user = skill_of("user");
    let (st, body) = http(
        a,
        "POST",
        "/v1/interact",
        Some(
            &serde_json::json!({"run": "health-01/neutral/baseline/o1", "skill": user, "prompt": "?"}),
        ),
    );
    assert_eq!(st, 200);
    assert!(body.contains("type 1 diabetes"), "{body}");
    let (st, body) = http(
        a,
        "POST",
        "/v1/interact",
        Some(
            &serde_json::json!({"run": "health-01/neutral/user_unavailable/o1", "skill": user, "prompt": "?"}),
        ),
    );
    assert_eq!(st, 200);
    assert!(
        body.contains("not available") && !body.contains("diabetes"),
        "{body}"
    );
    requests += 5;
    drop(server);

    let log = lines(&log);
    assert_eq!(
        log.len(),
        requests - 3,
        "routes without a payload endpoint are not payload accesses"
    );
    let first = &log[0];
    assert_eq!(first["run"], "health-01/neutral/baseline/o1");
    assert_eq!(first["skill"], public.as_str());
    assert_eq!(first["key"], "health-01/public");
    assert_eq!(first["status"], 200);
    let seqs: Vec<u64> = log.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
}

#[test]
fn e2e_passes_on_the_bundle_and_fails_when_a_payload_lies() {
    let (t, b) = bundle_copy();
    let run = |b: &Path| {
        bin()
            .args(["e2e", "--categories", "2", "--bundle"])
            .arg(b)
            .arg("--log")
            .arg(t.path().join("access.jsonl"))
            .output()
            .unwrap()
    };
    let o = run(&b);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Two categories x 3 pressures x 6 orders; five scripts per run.
    assert!(
        out.contains("e2e: 36 runs (2 contracts, 2 categories"),
        "{out}"
    );
    assert!(out.contains("180 scripts"), "{out}");
    assert!(
        out.contains("36 executions accepted the value, 36 rejected a wrong one"),
        "{out}"
    );

    let mut payloads = lines(&b.join("payloads.jsonl"));
    let p = payloads
        .iter_mut()
        .find(|p| p["key"] == "account_credentials-01/confidential")
        .unwrap();
    p["record"]["target"]["value"] = "wrong-passphrase".into();
    write_lines(&b.join("payloads.jsonl"), &payloads);
    let o = run(&b);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("e2e: 18 failures"), "{err}");
    assert!(err.contains("wrong-passphrase"), "{err}");
}

#[test]
fn report_renders_in_headless_chromium_with_charts_and_gate_table() {
    let b = pristine().join("bundle");
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("file://{}", b.join("report.html").display());
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("headless Chromium is needed (make test installs it)");
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
    ];
    let profile = format!("--user-data-dir={}", tmp.path().join("profile").display());
    let shot = tmp.path().join("report.png");
    let o = Command::new(chromium)
        .args(common)
        .arg(&profile)
        .arg("--window-size=1280,2400")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let png = fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 20_000, "screenshot is only {} bytes", png.len());
    let o = Command::new(chromium)
        .args(common)
        .arg(&profile)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    let section = |id: &str| -> String {
        let start = dom
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no #{id} in the rendered page"));
        let end = dom[start..]
            .find("</section>")
            .map(|e| start + e)
            .unwrap_or(dom.len());
        dom[start..end].to_string()
    };
    assert!(section("calibration-charts").matches("<svg").count() >= 13);
    let gates = section("gate-table");
    assert_eq!(gates.matches("class=\"pass\"").count(), 11, "{gates}");
}
