//! Prompt templates: `prompts/<id>.toml` (id, version, system and user text with `{{name}}`
//! placeholders) next to `prompts/<id>.schema.json`, the JSON Schema of the stage's output.

use super::ChatMessage;
use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateFile {
    id: String,
    version: String,
    description: String,
    system: String,
    user: String,
    schema: String,
}

#[derive(Debug, Clone)]
pub struct Template {
    pub id: String,
    pub version: String,
    pub description: String,
    system: String,
    user: String,
    pub schema_name: String,
    pub schema: Value,
    pub files: Vec<PathBuf>,
}

impl Template {
    pub fn load(dir: &Path, id: &str) -> Result<Self> {
        let path = dir.join(format!("{id}.toml"));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read prompt template {}", path.display()))?;
        let t: TemplateFile = toml::from_str(&text)
            .map_err(|e| anyhow!("{}: {}", path.display(), e.to_string().trim()))?;
        if t.id != id {
            bail!(
                "{}: id {:?} does not match the file name",
                path.display(),
                t.id
            );
        }
        let spath = dir.join(&t.schema);
        let schema: Value = serde_json::from_str(
            &std::fs::read_to_string(&spath)
                .with_context(|| format!("cannot read {}", spath.display()))?,
        )
        .map_err(|e| anyhow!("{}:{}: invalid JSON: {e}", spath.display(), e.line()))?;
        jsonschema::validator_for(&schema)
            .map_err(|e| anyhow!("{}: not a usable JSON Schema: {e}", spath.display()))?;
        let schema_name = t
            .schema
            .trim_end_matches(".schema.json")
            .trim_end_matches(".json")
            .replace(['.', '-'], "_");
        Ok(Self {
            id: t.id,
            version: t.version,
            description: t.description,
            system: t.system,
            user: t.user,
            schema_name,
            schema,
            files: vec![path, spath],
        })
    }

    /// Fills `{{name}}` placeholders; a placeholder without a value is an error.
    pub fn render(&self, vars: &BTreeMap<&str, String>) -> Result<Vec<ChatMessage>> {
        Ok(vec![
            ChatMessage::new(
                "system",
                fill(&self.system, vars)
                    .with_context(|| format!("template {} (system)", self.id))?,
            ),
            ChatMessage::new(
                "user",
                fill(&self.user, vars).with_context(|| format!("template {} (user)", self.id))?,
            ),
        ])
    }
}

fn fill(text: &str, vars: &BTreeMap<&str, String>) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| anyhow!("unclosed placeholder"))?;
        let name = after[..end].trim();
        let value = vars
            .get(name)
            .ok_or_else(|| anyhow!("no value for placeholder {{{{{name}}}}}"))?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_placeholders_and_rejects_missing_ones() {
        let mut v = BTreeMap::new();
        v.insert("a", "1".to_string());
        assert_eq!(fill("x {{a}} y {{ a }}", &v).unwrap(), "x 1 y 1");
        assert!(fill("{{b}}", &v).is_err());
    }
}
