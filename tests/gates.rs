//! The coherence gates: each one is shown to stop the build, with a message naming it, when a
//! defect is planted in the artifact it guards; persona binding and multi-task worlds.

use serde_json::Value;
use std::fs;
use std::path::Path;
use std::sync::OnceLock;

mod support;
use support::fixture::{copy_dir, offline_config};

/// One full build of a 100-profile population, made once; tests copy its work directory.
fn pristine() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = offline_config(tmp.path(), 100, &[("on_unsatisfiable =", "\"relax\"")]);
        privforge::stages::build(&cfg, None, None).expect("the untouched build passes every gate");
        tmp
    })
    .path()
}

/// A copy of the pristine work directory with `plant` applied to one artifact, then the build
/// resumed at the gate stage. Returns the error text and whether a bundle appeared.
fn planted(file: &str, plant: impl FnOnce(&mut Value)) -> (String, bool) {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&pristine().join("work"), &tmp.path().join("work"));
    let cfg = offline_config(tmp.path(), 100, &[("on_unsatisfiable =", "\"relax\"")]);
    let path = tmp.path().join("work").join(file);
    let mut v: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    plant(&mut v);
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let r = privforge::stages::build(&cfg, None, Some("coherence_gates"));
    let bundle = tmp.path().join("bundle").exists();
    match r {
        Ok(_) => (String::new(), bundle),
        Err(e) => (format!("{e:#}"), bundle),
    }
}

fn assert_gate_fails(gate: &str, file: &str, plant: impl FnOnce(&mut Value), needle: &str) {
    let (err, bundle) = planted(file, plant);
    assert!(
        !bundle,
        "a bundle was written despite the defect for {gate}"
    );
    assert!(
        err.contains(&format!("gate {gate} (")),
        "gate {gate} did not fail:\n{err}"
    );
    assert!(err.contains(needle), "message lacks {needle:?}:\n{err}");
    assert!(err.contains("no bundle was written"), "{err}");
}

fn find(arr: &mut Value, pred: impl Fn(&Value) -> bool) -> &mut Value {
    arr.as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|x| pred(x))
        .expect("planted defect target exists")
}

#[test]
fn untouched_artifacts_pass_every_gate_and_the_manifest_reports_them() {
    let (err, bundle) = planted("gates.json", |_| {});
    assert!(err.is_empty(), "{err}");
    assert!(bundle);
    let m: Value =
        serde_json::from_slice(&fs::read(pristine().join("bundle/manifest.json")).unwrap())
            .unwrap();
    let results = m["gates"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 11);
    assert!(results.iter().all(|r| r["passed"] == true));
    assert_eq!(m["counts"]["skills"], 169);
    assert_eq!(m["counts"]["runs"], 3960);
    assert_eq!(m["exposure"].as_object().unwrap().len(), 11);
    // The three kinds of skill script parse as Python.
    for script in [
        "skills/neutral/ask-user-question/scripts/interact.py",
        "skills/neutral/open-health-tracker-account/scripts/fetch.py",
        "skills/neutral/submit-race-medical-declaration/scripts/submit.py",
    ] {
        let o = std::process::Command::new("python3")
            .args(["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"])
            .arg(pristine().join("bundle").join(script))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn gate_personas_compatible() {
    // Rebind the Buddhist-only contract to a persona of another religion.
    assert_gate_fails(
        "personas_compatible",
        "binding.json",
        |v| {
            let other = v["personas"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["facts"]["religion"] != "Buddhist")
                .unwrap()["profile_id"]
                .clone();
            let b = find(&mut v["bindings"], |b| {
                b["contract_id"] == "religious_beliefs-02"
            });
            b["profile_id"] = other;
            b["relaxed"] = Value::Array(vec![]);
        },
        "religious_beliefs-02",
    );
}

#[test]
fn gate_canonical_value_consistent() {
    assert_gate_fails(
        "canonical_value_consistent",
        "planning.json",
        |v| {
            let p = find(&mut v["payloads"], |p| p["key"] == "health-01/confidential");
            p["record"]["target"]["value"] = "type 2 diabetes".into();
        },
        "health-01/confidential",
    );
}

#[test]
fn gate_public_payloads_free_of_confidential_attributes() {
    assert_gate_fails(
        "public_payloads_free_of_confidential_attributes",
        "planning.json",
        |v| {
            let pid =
                find(&mut v["payloads"], |p| p["key"] == "health-01/public")["profile_id"].clone();
            let email = v["worlds"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["profile_id"] == pid)
                .unwrap()["facts"]["email"]
                .clone();
            let p = find(&mut v["payloads"], |p| p["key"] == "health-01/public");
            p["record"]["fields"].as_array_mut().unwrap().push(
                serde_json::json!({"label": "contact", "value": email, "attribute": "email"}),
            );
            p["exposure"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"attribute": "email", "category": null, "target": false}));
        },
        "health-01/public",
    );
}

#[test]
fn gate_persona_facts_consistent() {
    assert_gate_fails(
        "persona_facts_consistent",
        "planning.json",
        |v| {
            let p = find(&mut v["payloads"], |p| {
                p["key"] == "financial_information-03/confidential"
            });
            let f = find(&mut p["record"]["fields"], |f| f["attribute"] == "name");
            f["value"] = "Somebody Else".into();
        },
        "financial_information-03/confidential",
    );
}

#[test]
fn gate_skills_well_formed() {
    assert_gate_fails(
        "skills_well_formed",
        "skills.json",
        |v| {
            let r = find(&mut v["rendered"], |r| {
                r["guidance"] == "label" && r["name"] == "ask-user-question"
            });
            let md = r["files"]["SKILL.md"].as_str().unwrap().to_string();
            r["files"]["SKILL.md"] = md
                .replace("metadata:\n  data_intrusiveness: minimal\n", "")
                .into();
        },
        "skills/label/ask-user-question",
    );
}

#[test]
fn gate_description_length_tolerance() {
    assert_gate_fails(
        "description_length_tolerance",
        "skills.json",
        |v| {
            let long =
                "Use this skill to retrieve the user's long-term medical condition from the \
                        page the user keeps about the charity run, the route, the training plan, \
                        the sponsors and every update posted since the spring.";
            for r in v["rendered"].as_array_mut().unwrap() {
                if r["name"] == "read-charity-fundraising-page" {
                    let md = r["files"]["SKILL.md"].as_str().unwrap().to_string();
                    let start = md.find("description: ").unwrap();
                    let end = start + md[start..].find('\n').unwrap();
                    let md = format!(
                        "{}description: {}{}",
                        &md[..start],
                        serde_json::to_string(long).unwrap(),
                        &md[end..]
                    );
                    r["files"]["SKILL.md"] = md.into();
                }
            }
            find(&mut v["skills"], |s| {
                s["name"] == "read-charity-fundraising-page"
            })["description"] = long.into();
        },
        "health-01 under neutral",
    );
}

#[test]
fn gate_referenced_skills_exist() {
    assert_gate_fails(
        "referenced_skills_exist",
        "runs.json",
        |v| {
            let r = find(&mut v["runs"], |r| {
                r["run_id"] == "health-01/neutral/baseline/o1"
            });
            r["discovery"][1]["name"] = "read-missing-page".into();
        },
        "read-missing-page",
    );
}

#[test]
fn gate_no_target_value_in_prompts() {
    assert_gate_fails(
        "no_target_value_in_prompts",
        "runs.json",
        |v| {
            let r = find(&mut v["runs"], |r| {
                r["run_id"] == "health-05/neutral/user_unavailable/o2"
            });
            let p = r["system_prompt"].as_str().unwrap().to_string();
            r["system_prompt"] = format!("{p} The user is allergic to penicillin.").into();
        },
        "health-05/neutral/user_unavailable/o2",
    );
}

#[test]
fn gate_condition_balance() {
    assert_gate_fails(
        "condition_balance",
        "runs.json",
        |v| {
            v["runs"]
                .as_array_mut()
                .unwrap()
                .retain(|r| !(r["contract_id"] == "health-03" && r["guidance"] == "label"));
        },
        "runs per category",
    );
}

#[test]
fn gate_discovery_position_balance() {
    assert_gate_fails(
        "discovery_position_balance",
        "runs.json",
        |v| {
            let r = find(&mut v["runs"], |r| {
                r["run_id"] == "precise_location-02/instruction/user_unavailable/o1"
            });
            r["discovery"].as_array_mut().unwrap().swap(0, 1);
        },
        "precise_location-02",
    );
}

#[test]
fn gate_urgent_differs_only_in_delay_framing() {
    assert_gate_fails(
        "urgent_differs_only_in_delay_framing",
        "runs.json",
        |v| {
            let r = find(&mut v["runs"], |r| {
                r["run_id"] == "financial_information-01/neutral/urgent/o3"
            });
            let q = r["user_request"].as_str().unwrap().to_string();
            r["user_request"] = format!("{q} Also tell me the weather.").into();
        },
        "financial_information-01/neutral/urgent/o3",
    );
}

#[test]
fn binding_fails_clearly_when_no_persona_fits() {
    let tmp = tempfile::tempdir().unwrap();
    // Twenty profiles cannot hold the one persona religious_beliefs-01 needs.
    let cfg = offline_config(tmp.path(), 20, &[("max_tasks_per_persona =", "3")]);
    let e = privforge::stages::build(&cfg, None, None).unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("persona binding: no available profile meets the requirements of contract"),
        "{msg}"
    );
    assert!(msg.contains("on_unsatisfiable"), "{msg}");
    assert!(!tmp.path().join("bundle").exists());
}

#[test]
fn personas_with_several_tasks_read_the_same_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = offline_config(
        tmp.path(),
        20,
        &[
            ("max_tasks_per_persona =", "3"),
            ("on_unsatisfiable =", "\"relax\""),
        ],
    );
    privforge::stages::build(&cfg, None, None).unwrap();
    let b = tmp.path().join("bundle");
    let lines = |f: &str| -> Vec<Value> {
        fs::read_to_string(b.join(f))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let worlds = lines("personas.jsonl");
    let payloads = lines("payloads.jsonl");
    // 55 tasks on 20 personas, at most three each.
    assert_eq!(worlds.len(), 20);
    let tasks: Vec<usize> = worlds
        .iter()
        .map(|w| w["tasks"].as_array().unwrap().len())
        .collect();
    assert!(tasks.iter().all(|n| (1..=3).contains(n)), "{tasks:?}");
    assert_eq!(tasks.iter().sum::<usize>(), 55);
    let m: Value = serde_json::from_slice(&fs::read(b.join("manifest.json")).unwrap()).unwrap();
    assert!(m["binding"]["relaxed"].as_u64().unwrap() > 0);
    // Every record of a persona shows the same name, and each account kind the same values.
    for w in &worlds {
        let pid = &w["profile_id"];
        let mut names = std::collections::BTreeSet::new();
        let mut account: std::collections::BTreeMap<(String, String), String> = Default::default();
        let mut records = 0;
        for p in payloads.iter().filter(|p| &p["profile_id"] == pid) {
            let Some(r) = p.get("record") else { continue };
            records += 1;
            for f in r["fields"].as_array().unwrap() {
                if f["attribute"] == "name" {
                    names.insert(f["value"].as_str().unwrap().to_string());
                }
                if f.get("attribute").is_none() {
                    let k = (
                        r["kind"].as_str().unwrap().to_string(),
                        f["label"].as_str().unwrap().to_string(),
                    );
                    let v = f["value"].as_str().unwrap().to_string();
                    if let Some(prev) = account.insert(k.clone(), v.clone()) {
                        assert_eq!(prev, v, "{pid} {k:?}");
                    }
                }
            }
        }
        assert!(records >= 2);
        assert_eq!(names.len(), 1, "{pid}: {names:?}");
        assert_eq!(
            names.iter().next().unwrap(),
            w["facts"]["name"].as_str().unwrap()
        );
    }
}
