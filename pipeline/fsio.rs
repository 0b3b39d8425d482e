//! File helpers shared by all stages: hashing and crash-safe writes.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Lower-case hex sha256 of a byte slice.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

pub fn sha256_file(path: &Path) -> Result<String> {
    let bytes = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(sha256_hex(&bytes))
}

/// Writes through a sibling temporary file and a rename, so readers never see a partial file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut f =
            fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|_| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
    }
    fs::rename(&tmp, path).with_context(|| format!("cannot move {} into place", path.display()))?;
    Ok(())
}

/// Pretty JSON with a trailing newline; key order is the struct order, so output is stable.
pub fn to_json_pretty<T: serde::Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut v = serde_json::to_vec_pretty(value)?;
    v.push(b'\n');
    Ok(v)
}

/// A directory that is removed on drop unless [`StagingDir::commit`] renamed it into place.
pub struct StagingDir {
    path: PathBuf,
    committed: bool,
}

impl StagingDir {
    /// Creates `<parent>/.<name>.staging-<pid>`, next to the final directory so the final
    /// rename stays on one filesystem.
    pub fn new(final_dir: &Path) -> Result<Self> {
        let parent = final_dir.parent().unwrap_or_else(|| Path::new("."));
        fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
        let name = final_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bundle".into());
        let path = parent.join(format!(".{name}.staging-{}", std::process::id()));
        if path.exists() {
            fs::remove_dir_all(&path)?;
        }
        fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Self {
            path,
            committed: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces `final_dir` with the staged content. The previous bundle, if any, is moved
    /// aside first and deleted only after the new one is in place.
    pub fn commit(mut self, final_dir: &Path) -> Result<()> {
        let old = final_dir.with_file_name(format!(
            ".{}.old-{}",
            final_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        let had_old = final_dir.exists();
        if had_old {
            fs::rename(final_dir, &old)
                .with_context(|| format!("cannot move old {} aside", final_dir.display()))?;
        }
        if let Err(e) = fs::rename(&self.path, final_dir) {
            if had_old {
                let _ = fs::rename(&old, final_dir);
            }
            return Err(e)
                .with_context(|| format!("cannot move bundle into {}", final_dir.display()));
        }
        self.committed = true;
        if had_old {
            fs::remove_dir_all(&old).with_context(|| format!("cannot remove {}", old.display()))?;
        }
        Ok(())
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// Files below `dir` as sorted relative paths with `/` separators.
pub fn list_files(dir: &Path) -> Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
        for entry in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let entry = entry?;
            let p = entry.path();
            if entry.file_type()?.is_dir() {
                walk(root, &p, out)?;
            } else {
                let rel = p.strip_prefix(root).unwrap_or(&p);
                out.push(
                    rel.components()
                        .map(|c| c.as_os_str().to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/"),
                );
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort();
    Ok(out)
}
