//! The transcript: every validated response, keyed by its request's content hash. Live and
//! embedded runs append to it as responses arrive, so a killed run resumes from it; the
//! reference build replays a committed, key-sorted copy.

use super::ChatMessage;
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A validated answer.
    Response,
    /// The batch behind this key kept failing validation and was answered in two halves.
    Split,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub key: String,
    pub stage: String,
    /// `id@version` of the prompt template.
    pub template: String,
    pub model: String,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    /// Attempts it took to obtain this answer (1 = first try).
    #[serde(default)]
    pub attempts: u32,
    /// Attempts rejected on the way (invalid JSON or schema, wrong ids, truncation).
    #[serde(default)]
    pub rejected: u32,
    pub provider: String,
    /// The rendered messages, so a reviewer can audit what was asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<ChatMessage>,
}

pub struct Transcript {
    path: Option<PathBuf>,
    records: Mutex<HashMap<String, Record>>,
    writer: Option<Mutex<File>>,
}

/// Reads a transcript file; a torn last line (a run killed mid-write) is dropped and,
/// when `repair` is set, cut from the file so later appends start on a fresh line.
fn load(path: &Path, repair: bool) -> Result<HashMap<String, Record>> {
    let mut out = HashMap::new();
    if !path.exists() {
        return Ok(out);
    }
    let mut f = OpenOptions::new()
        .read(true)
        .write(repair)
        .open(path)
        .with_context(|| format!("cannot open transcript {}", path.display()))?;
    let mut text = String::new();
    f.read_to_string(&mut text)
        .with_context(|| format!("cannot read transcript {}", path.display()))?;
    let complete = match text.rfind('\n') {
        Some(i) => i + 1,
        None => 0,
    };
    if complete < text.len() {
        if repair {
            f.set_len(complete as u64)?;
            f.seek(SeekFrom::End(0))?;
        }
        text.truncate(complete);
    }
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let rec: Record = serde_json::from_str(line).map_err(|e| {
            anyhow!(
                "{}:{}: invalid transcript record: {e}",
                path.display(),
                i + 1
            )
        })?;
        out.insert(rec.key.clone(), rec);
    }
    Ok(out)
}

impl Transcript {
    /// A transcript that answers from `path` and never writes (replay).
    pub fn read_only(path: &Path) -> Result<Self> {
        if !path.exists() {
            bail!("transcript {} does not exist", path.display());
        }
        Ok(Self {
            path: Some(path.to_path_buf()),
            records: Mutex::new(load(path, false)?),
            writer: None,
        })
    }

    /// A transcript that resumes from `path` and appends every new record to it.
    pub fn append(path: &Path) -> Result<Self> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        let records = load(path, true)?;
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open transcript {}", path.display()))?;
        Ok(Self {
            path: Some(path.to_path_buf()),
            records: Mutex::new(records),
            writer: Some(Mutex::new(f)),
        })
    }

    /// An in-memory transcript (tests, benchmarks of the transport alone).
    pub fn memory() -> Self {
        Self {
            path: None,
            records: Mutex::new(HashMap::new()),
            writer: None,
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn get(&self, key: &str) -> Option<Record> {
        self.records.lock().unwrap().get(key).cloned()
    }

    pub fn keys(&self) -> Vec<String> {
        self.records.lock().unwrap().keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.records.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores a record: one `write` of one line, so a kill leaves at most a torn last line.
    pub fn put(&self, rec: Record) -> Result<()> {
        if let Some(w) = &self.writer {
            let mut line = serde_json::to_vec(&rec)?;
            line.push(b'\n');
            let mut f = w.lock().unwrap();
            f.write_all(&line)
                .context("cannot append to the transcript")?;
        }
        self.records.lock().unwrap().insert(rec.key.clone(), rec);
        Ok(())
    }

    /// Flushes appended records to stable storage.
    pub fn sync(&self) -> Result<()> {
        if let Some(w) = &self.writer {
            w.lock().unwrap().sync_data()?;
        }
        Ok(())
    }

    /// The records with the given keys, in key order.
    pub fn subset<'a>(&self, keys: impl IntoIterator<Item = &'a String>) -> Vec<Record> {
        let all = self.records.lock().unwrap();
        let mut picked: BTreeMap<&String, Record> = BTreeMap::new();
        for k in keys {
            if let Some(r) = all.get(k) {
                picked.insert(k, r.clone());
            }
        }
        picked.into_values().collect()
    }
}

/// Canonical form: one record per line, sorted by key, so a committed transcript diffs cleanly
/// and hashes the same however the responses arrived.
pub fn canonical_bytes(records: &[Record]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&Record> = records.iter().collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let mut out = Vec::new();
    for r in sorted {
        serde_json::to_writer(&mut out, r)?;
        out.push(b'\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &str) -> Record {
        Record {
            key: key.into(),
            stage: "s".into(),
            template: "t@1".into(),
            model: "m".into(),
            outcome: Outcome::Response,
            response: Some(serde_json::json!({"ok": true})),
            finish_reason: Some("stop".into()),
            usage: Usage::default(),
            attempts: 1,
            rejected: 0,
            provider: "test".into(),
            messages: vec![],
        }
    }

    #[test]
    fn resumes_after_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        {
            let t = Transcript::append(&p).unwrap();
            t.put(rec("a")).unwrap();
            t.put(rec("b")).unwrap();
        }
        // Simulate a kill in the middle of the third write.
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(br#"{"key":"c","stage":"#).unwrap();
        drop(f);
        let t = Transcript::append(&p).unwrap();
        assert_eq!(t.len(), 2);
        t.put(rec("c")).unwrap();
        drop(t);
        let t = Transcript::read_only(&p).unwrap();
        assert_eq!(t.len(), 3);
        assert!(t.get("c").is_some());
    }

    #[test]
    fn a_corrupt_middle_line_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, "not json\n").unwrap();
        let err = Transcript::read_only(&p).err().unwrap().to_string();
        assert!(err.contains("t.jsonl:1"), "{err}");
    }
}
