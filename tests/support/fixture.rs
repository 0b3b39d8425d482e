//! Offline builds for tests: a config derived from the reference one with every LLM stage off,
//! writing below a temporary directory.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The reference config with `profiles` profiles, a short sampling refinement, no LLM stage,
/// paths below `dir`, and `extra` (key prefix, value) replacements.
pub fn offline_config(dir: &Path, profiles: usize, extra: &[(&str, &str)]) -> PathBuf {
    let text = fs::read_to_string(repo().join("configs/reference.toml")).unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        let set = |k: &str, v: String| line.starts_with(k).then(|| format!("{k} {v}"));
        let l = extra
            .iter()
            .find(|(k, _)| line.starts_with(k))
            .map(|(k, v)| format!("{k} {v}"))
            .or_else(|| set("taxonomy =", format!("{:?}", repo().join("taxonomy"))))
            .or_else(|| {
                set(
                    "margins =",
                    format!("{:?}", repo().join("population-margins")),
                )
            })
            .or_else(|| set("output =", format!("{:?}", dir.join("bundle"))))
            .or_else(|| set("work =", format!("{:?}", dir.join("work"))))
            .or_else(|| set("prompts =", format!("{:?}", repo().join("prompts"))))
            .or_else(|| set("profiles =", profiles.to_string()))
            .or_else(|| set("trials =", "5".into()))
            .or_else(|| set("swap_iterations =", "200000".into()))
            .unwrap_or_else(|| line.to_string());
        out.push(l);
    }
    let text = (out.join("\n") + "\n")
        .replace(
            "[seed_audit]\nenabled = true",
            "[seed_audit]\nenabled = false",
        )
        .replace("[identity]\nenabled = true", "[identity]\nenabled = false")
        .replace(
            "[contracts]\nenabled = true",
            "[contracts]\nenabled = false",
        );
    let p = dir.join("config.toml");
    fs::write(&p, text).unwrap();
    p
}

pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            fs::copy(e.path(), t).unwrap();
        }
    }
}
