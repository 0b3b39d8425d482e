//! `privforge e2e`: consumes a bundle the way an execution harness would. It starts the
//! reference backend and, for a sample of runs that covers all six Discovery orders of one
//! contract per category under every pressure condition, runs every skill script of the run
//! from its rendered folder, checks each acquisition returns the canonical value (or the
//! unavailability message), and that execution succeeds with the value and fails without it.

use crate::backend::{self, Backend};
use crate::stages::read_jsonl;
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Default, Clone, Serialize)]
pub struct Report {
    pub runs: usize,
    pub contracts: usize,
    pub categories: usize,
    pub guidance_conditions: usize,
    pub pressure_conditions: usize,
    pub orders: usize,
    pub scripts_run: usize,
    pub acquisitions_returned_value: usize,
    pub acquisitions_unavailable: usize,
    pub executions_accepted: usize,
    pub wrong_values_rejected: usize,
    pub log_lines: usize,
    pub failures: Vec<String>,
}

struct Task {
    run: Value,
    canonical: String,
    argument: String,
    /// Other required arguments with a filler value, so the call fits the input schema.
    filler: serde_json::Map<String, Value>,
    attribute: String,
}

/// The sample: per category its first contract, under one guidance condition (rotating over
/// categories so every condition's skill folders are exercised), every pressure and order.
fn sample(bundle: &Path, max_categories: Option<usize>) -> Result<Vec<Task>> {
    let runs = read_jsonl::<Value>(&bundle.join("runs.jsonl"))?;
    let contracts = read_jsonl::<Value>(&bundle.join("contracts.jsonl"))?;
    let mut guidance: Vec<String> = Vec::new();
    for r in &runs {
        let g = r["guidance"].as_str().unwrap_or_default().to_string();
        if !guidance.contains(&g) {
            guidance.push(g);
        }
    }
    let mut first: BTreeMap<String, &Value> = BTreeMap::new();
    for c in &contracts {
        let cat = c["category"].as_str().unwrap_or_default().to_string();
        let id = c["id"].as_str().unwrap_or_default();
        if first
            .get(&cat)
            .is_none_or(|k| id < k["id"].as_str().unwrap_or_default())
        {
            first.insert(cat, c);
        }
    }
    if guidance.is_empty() || first.is_empty() {
        bail!("{}: no runs or contracts to check", bundle.display());
    }
    let mut out = Vec::new();
    for (i, (_, c)) in first
        .iter()
        .enumerate()
        .take(max_categories.unwrap_or(usize::MAX))
    {
        let g = &guidance[i % guidance.len()];
        let id = c["id"].as_str().unwrap_or_default();
        let ex = &c["execution_skill"];
        let argument = ex["success"]["argument"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut filler = serde_json::Map::new();
        for r in ex["input_schema"]["required"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or_default();
            if r != argument {
                filler.insert(r.to_string(), json!("as stated in the request"));
            }
        }
        for r in runs
            .iter()
            .filter(|r| r["contract_id"] == id && r["guidance"] == g.as_str())
        {
            out.push(Task {
                run: r.clone(),
                canonical: c["canonical_value"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                argument: argument.clone(),
                filler: filler.clone(),
                attribute: c["attribute"]["label"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            });
        }
    }
    Ok(out)
}

struct Outcome {
    scripts: usize,
    value: usize,
    unavailable: usize,
    accepted: usize,
    rejected: usize,
    failures: Vec<String>,
}

/// Runs one script from its skill folder with the run's environment; returns exit code and
/// parsed stdout.
fn script(
    python: &str,
    dir: &Path,
    file: &str,
    args: &[&str],
    url: &str,
    run_id: &str,
) -> Result<(i32, Value)> {
    let path = dir.join("scripts").join(file);
    if !path.is_file() {
        bail!("{} is missing", path.display());
    }
    // -S: no site packages, the strictest interpreter a harness could use; the scripts need
    // only the standard library.
    let o = Command::new(python)
        .arg("-S")
        .arg(Path::new("scripts").join(file))
        .args(args)
        .current_dir(dir)
        .env("PRIVFORGE_BACKEND_URL", url)
        .env("PRIVFORGE_RUN_ID", run_id)
        .output()
        .with_context(|| format!("cannot run {python}"))?;
    let out: Value = serde_json::from_slice(&o.stdout).map_err(|e| {
        anyhow!(
            "{}: output is not JSON ({e}): {}{}",
            path.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })?;
    Ok((o.status.code().unwrap_or(-1), out))
}

fn check_run(bundle: &Path, python: &str, url: &str, t: &Task) -> Outcome {
    let mut o = Outcome {
        scripts: 0,
        value: 0,
        unavailable: 0,
        accepted: 0,
        rejected: 0,
        failures: vec![],
    };
    let run_id = t.run["run_id"].as_str().unwrap_or_default();
    let guidance = t.run["guidance"].as_str().unwrap_or_default();
    let unavailable = t.run["user_skill_response"].as_str();
    let mut fail = |m: String| o.failures.push(format!("{run_id}: {m}"));
    for d in t.run["discovery"].as_array().into_iter().flatten() {
        let name = d["name"].as_str().unwrap_or_default();
        let role = d["role"].as_str().unwrap_or_default();
        let dir = bundle.join("skills").join(guidance).join(name);
        let result = match role {
            "user" => {
                let prompt = format!("Could you tell me {}?", t.attribute);
                script(
                    python,
                    &dir,
                    "interact.py",
                    &["--prompt", &prompt],
                    url,
                    run_id,
                )
                .map(|(code, v)| {
                    o.scripts += 1;
                    let ok = match unavailable {
                        Some(m) => v["message"] == m,
                        None => v["value"] == t.canonical.as_str(),
                    };
                    if code != 0 || !ok {
                        Some(format!("{name} answered {v} (exit {code})"))
                    } else {
                        if unavailable.is_some() {
                            o.unavailable += 1;
                        } else {
                            o.value += 1;
                        }
                        None
                    }
                })
            }
            "public" | "confidential" => {
                script(python, &dir, "fetch.py", &[], url, run_id).map(|(code, v)| {
                    o.scripts += 1;
                    if code != 0 || v["target"]["value"] != t.canonical.as_str() {
                        Some(format!("{name} returned {v} (exit {code})"))
                    } else {
                        o.value += 1;
                        None
                    }
                })
            }
            "execution" => {
                let call = |value: &str| {
                    let mut a = t.filler.clone();
                    a.insert(t.argument.clone(), json!(value));
                    Value::Object(a).to_string()
                };
                let right = script(
                    python,
                    &dir,
                    "submit.py",
                    &["--arguments", &call(&t.canonical)],
                    url,
                    run_id,
                );
                let wrong = script(
                    python,
                    &dir,
                    "submit.py",
                    &["--arguments", &call(&format!("not {}", t.canonical))],
                    url,
                    run_id,
                );
                match (right, wrong) {
                    (Ok((c1, v1)), Ok((c2, v2))) => {
                        o.scripts += 2;
                        let mut m = Vec::new();
                        if c1 == 0 && v1["status"] == "accepted" {
                            o.accepted += 1;
                        } else {
                            m.push(format!("{name} with the value: {v1} (exit {c1})"));
                        }
                        if c2 != 0 && v2["status"] == "rejected" {
                            o.rejected += 1;
                        } else {
                            m.push(format!("{name} with a wrong value: {v2} (exit {c2})"));
                        }
                        Ok((!m.is_empty()).then(|| m.join("; ")))
                    }
                    (Err(e), _) | (_, Err(e)) => Err(e),
                }
            }
            other => Ok(Some(format!("unknown role {other:?} for {name}"))),
        };
        match result {
            Ok(None) => {}
            Ok(Some(m)) => fail(m),
            Err(e) => fail(format!("{e:#}")),
        }
    }
    o
}

/// Runs the check on `bundle`, with up to `jobs` scripts at a time; the backend's access log
/// goes to `log`. `max_categories` narrows the sample (for quick trials; the full check
/// covers every category).
pub fn run(
    bundle: &Path,
    python: &str,
    jobs: usize,
    log: &Path,
    max_categories: Option<usize>,
) -> Result<Report> {
    let tasks = sample(bundle, max_categories)?;
    let python = interpreter(python)?;
    let python = python.as_str();
    let file = std::fs::File::create(log)
        .with_context(|| format!("cannot create the access log {}", log.display()))?;
    let server = backend::start(Backend::load(bundle, Box::new(file))?, 0)?;
    let url = server.url();
    let jobs = jobs.max(1);
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let chunks: Vec<Vec<&Task>> = (0..jobs)
            .map(|j| tasks.iter().skip(j).step_by(jobs).collect())
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let url = url.clone();
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|t| check_run(bundle, python, &url, t))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    drop(server);
    let mut r = Report {
        runs: tasks.len(),
        ..Default::default()
    };
    let set = |k: &str| -> usize {
        tasks
            .iter()
            .map(|t| t.run[k].to_string())
            .collect::<BTreeSet<_>>()
            .len()
    };
    r.contracts = set("contract_id");
    r.categories = set("category");
    r.guidance_conditions = set("guidance");
    r.pressure_conditions = set("pressure");
    r.orders = set("order");
    for o in outcomes {
        r.scripts_run += o.scripts;
        r.acquisitions_returned_value += o.value;
        r.acquisitions_unavailable += o.unavailable;
        r.executions_accepted += o.accepted;
        r.wrong_values_rejected += o.rejected;
        r.failures.extend(o.failures);
    }
    r.failures.sort();
    let lines = std::fs::read_to_string(log)?;
    r.log_lines = lines.lines().count();
    if r.log_lines != r.scripts_run {
        r.failures.push(format!(
            "the access log has {} lines for {} script runs",
            r.log_lines, r.scripts_run
        ));
    }
    Ok(r)
}

/// The interpreter behind `python`, resolved once: version-manager shims (pyenv, asdf) cost
/// tens of milliseconds per start, which a thousand script runs would pay each time.
fn interpreter(python: &str) -> Result<String> {
    let o = Command::new(python)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .with_context(|| format!("cannot run {python}; the skill scripts need Python 3"))?;
    let exe = String::from_utf8_lossy(&o.stdout).trim().to_string();
    if !o.status.success() || exe.is_empty() {
        bail!("{python} did not report its executable");
    }
    Ok(exe)
}

/// Where the access log of a bundle's check goes by default: beside the bundle, never in it.
pub fn default_log(bundle: &Path) -> PathBuf {
    let name = bundle
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bundle".into());
    bundle
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{name}.e2e-access.jsonl"))
}
