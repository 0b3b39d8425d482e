//! `DATA_CARD.md`: the bundle described the way dataset reviewers expect, rendered from the
//! manifest alone.

use serde_json::Value;

/// The data card of the bundle whose manifest (without its files listing) is `manifest`.
pub fn render(manifest: &Value) -> String {
    format!(
        "# Data card\n\nBundle {}\n",
        manifest["bundle_version"].as_str().unwrap_or_default()
    )
}
