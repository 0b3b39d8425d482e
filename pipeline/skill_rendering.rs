//! Stage 10: every skill as an Agent Skill folder (`SKILL.md` with front matter, inputs and
//! instructions, plus a script that queries the local backend by payload key), rendered once
//! per guidance condition. Only label conditions add `metadata.data_intrusiveness`; the
//! instruction text lives in the system prompt, never in a skill.

use crate::content::{Content, Contract};
use crate::data_planning;
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One skill as the benchmark defines it (independent of guidance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillEntry {
    pub name: String,
    /// `user`, `public`, `confidential` or `execution`.
    pub role: String,
    /// The task a skill belongs to; shared user-interaction skills have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_id: Option<String>,
    pub description: String,
    /// The payload the script reads; shared skills resolve theirs from the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_key: Option<String>,
}

/// One rendered folder: `skills/<guidance>/<name>/...`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RenderedSkill {
    pub guidance: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_intrusiveness: Option<String>,
    /// Path inside the skill folder → text.
    pub files: BTreeMap<String, String>,
}

impl RenderedSkill {
    pub fn dir(&self) -> String {
        format!("skills/{}/{}", self.guidance, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillsArtifact {
    pub skills: Vec<SkillEntry>,
    pub rendered: Vec<RenderedSkill>,
}

impl SkillsArtifact {
    pub fn rendered(&self, guidance: &str, name: &str) -> Option<&RenderedSkill> {
        self.rendered
            .iter()
            .find(|r| r.guidance == guidance && r.name == name)
    }
}

/// The skill name as a heading: `read-charity-page` → `Read charity page`.
fn title(name: &str) -> String {
    let t = name.replace('-', " ");
    let mut c = t.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => t,
    }
}

fn fill(template: &str, vars: &BTreeMap<&str, String>, what: &str) -> Result<String> {
    let mut out = template.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    if let Some(i) = out.find("{{") {
        let rest: String = out[i..].chars().take(30).collect();
        bail!("skill template {what}: unfilled placeholder at {rest:?}");
    }
    Ok(out)
}

fn template<'a>(content: &'a Content, file: &str) -> Result<&'a str> {
    content
        .skill_templates
        .get(file)
        .map(String::as_str)
        .ok_or_else(|| {
            anyhow!(
                "skill template {} is missing",
                content.dir.join("skills").join(file).display()
            )
        })
}

/// Markdown list of an execution skill's arguments from its input schema.
fn inputs(schema: &serde_json::Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let mut lines = Vec::new();
    if let Some(props) = schema["properties"].as_object() {
        for (k, v) in props {
            let ty = v["type"].as_str().unwrap_or("string");
            let req = if required.contains(&k.as_str()) {
                ", required"
            } else {
                ""
            };
            lines.push(format!(
                "- `{k}` ({ty}{req}): {}",
                v["description"].as_str().unwrap_or_default()
            ));
        }
    }
    lines.join("\n")
}

/// The distinct skills of `contracts`: the shared user-interaction skills first, then each
/// task's public, confidential and execution skills.
pub fn entries(content: &Content, contracts: &[&Contract]) -> Vec<SkillEntry> {
    let mut out: Vec<SkillEntry> = content
        .interaction_skills
        .iter()
        .map(|s| SkillEntry {
            name: s.name.clone(),
            role: "user".into(),
            contract_id: None,
            description: s.description.clone(),
            payload_key: None,
        })
        .collect();
    for c in contracts {
        for (role, src) in [
            ("public", &c.sources.public),
            ("confidential", &c.sources.confidential),
        ] {
            out.push(SkillEntry {
                name: src.name.clone(),
                role: role.into(),
                contract_id: Some(c.id.clone()),
                description: src.description.clone(),
                payload_key: Some(data_planning::key(&c.id, role)),
            });
        }
        out.push(SkillEntry {
            name: c.execution_skill.name.clone(),
            role: "execution".into(),
            contract_id: Some(c.id.clone()),
            description: c.execution_skill.description.clone(),
            payload_key: Some(data_planning::key(&c.id, "execution")),
        });
    }
    out
}

/// Every skill under every guidance condition.
pub fn render(content: &Content, contracts: &[&Contract]) -> Result<SkillsArtifact> {
    let skills = entries(content, contracts);
    let labels = &content.labels.item;
    // One request helper, written once and carried by every script (its comment lines are
    // for this repository's readers only).
    let request_helper: String = template(content, "backend_request.py.part")?
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut rendered = Vec::new();
    for g in &content.guidance {
        let g = &g.item;
        for s in &skills {
            let label = if g.show_labels && s.role != "execution" {
                Some(labels.by_source_type.get(&s.role).cloned().ok_or_else(|| {
                    anyhow!(
                        "{}: no label for source type {:?}",
                        content.labels.file.display(),
                        s.role
                    )
                })?)
            } else {
                None
            };
            let mut vars: BTreeMap<&str, String> = BTreeMap::new();
            vars.insert("name", s.name.clone());
            vars.insert("title", title(&s.name));
            vars.insert("description", s.description.clone());
            vars.insert("description_yaml", serde_json::to_string(&s.description)?);
            vars.insert(
                "metadata",
                match &label {
                    Some(l) => {
                        let (section, key) = labels.field.split_once('.').ok_or_else(|| {
                            anyhow!(
                                "{}: field {:?} must be <section>.<key>",
                                content.labels.file.display(),
                                labels.field
                            )
                        })?;
                        format!("{section}:\n  {key}: {l}\n")
                    }
                    None => String::new(),
                },
            );
            vars.insert("skill_literal", serde_json::to_string(&s.name)?);
            vars.insert("backend_request", request_helper.clone());
            if let Some(k) = &s.payload_key {
                vars.insert("key_literal", serde_json::to_string(k)?);
            }
            let (md, script) = match s.role.as_str() {
                "user" => ("SKILL.interaction.md", "interact.py"),
                "execution" => {
                    let c = contracts
                        .iter()
                        .find(|c| Some(&c.id) == s.contract_id.as_ref())
                        .ok_or_else(|| anyhow!("skill {} has no contract", s.name))?;
                    vars.insert("action", c.execution_skill.action.clone());
                    vars.insert("inputs", inputs(&c.execution_skill.input_schema));
                    ("SKILL.execution.md", "submit.py")
                }
                _ => ("SKILL.acquisition.md", "fetch.py"),
            };
            let what = format!("{md} for {}", s.name);
            let mut files = BTreeMap::new();
            files.insert(
                "SKILL.md".to_string(),
                fill(template(content, md)?, &vars, &what)?,
            );
            files.insert(
                format!("scripts/{script}"),
                fill(template(content, script)?, &vars, &what)?,
            );
            rendered.push(RenderedSkill {
                guidance: g.id.clone(),
                name: s.name.clone(),
                data_intrusiveness: label,
                files,
            });
        }
    }
    Ok(SkillsArtifact { skills, rendered })
}

/// The front matter of a rendered `SKILL.md`: `name`, `description` and the metadata keys,
/// read back the way a harness would read them.
pub fn front_matter(skill_md: &str) -> Result<BTreeMap<String, String>> {
    let body = skill_md
        .strip_prefix("---\n")
        .ok_or_else(|| anyhow!("SKILL.md does not open with front matter"))?;
    let end = body
        .find("\n---\n")
        .ok_or_else(|| anyhow!("SKILL.md front matter is not closed"))?;
    let mut out = BTreeMap::new();
    let mut section = String::new();
    for line in body[..end + 1].lines() {
        if line.trim().is_empty() {
            continue;
        }
        let indented = line.starts_with(' ');
        let (k, v) = line
            .trim()
            .split_once(':')
            .ok_or_else(|| anyhow!("front matter line {line:?} is not key: value"))?;
        let v = v.trim();
        let key = if indented {
            format!("{section}.{k}")
        } else {
            section = k.to_string();
            k.to_string()
        };
        if v.is_empty() {
            continue;
        }
        let value = if v.starts_with('"') {
            serde_json::from_str::<String>(v)
                .map_err(|e| anyhow!("front matter {k}: bad quoted string: {e}"))?
        } else {
            v.to_string()
        };
        out.insert(key, value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn reference_skills_render_with_labels_only_under_label_conditions() {
        let content =
            Content::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("taxonomy")).unwrap();
        let contracts: Vec<&Contract> = content.contracts.iter().map(|l| &l.item).collect();
        let art = render(&content, &contracts).unwrap();
        assert_eq!(art.skills.len(), 169);
        assert_eq!(art.rendered.len(), 169 * content.guidance.len());
        for r in &art.rendered {
            let fm = front_matter(&r.files["SKILL.md"]).unwrap();
            let s = art.skills.iter().find(|s| s.name == r.name).unwrap();
            assert_eq!(fm["name"], r.name);
            assert_eq!(fm["description"], s.description);
            let g = &content
                .guidance
                .iter()
                .find(|g| g.item.id == r.guidance)
                .unwrap()
                .item;
            assert_eq!(
                fm.contains_key(&content.labels.item.field),
                g.show_labels && s.role != "execution",
                "{} under {}",
                r.name,
                r.guidance
            );
            assert_eq!(r.files.len(), 2);
        }
        // A task script carries its payload key and never its value.
        let c = contracts[0];
        let r = art
            .rendered("neutral", &c.sources.confidential.name)
            .unwrap();
        let script = &r.files["scripts/fetch.py"];
        assert!(script.contains(&format!("\"{}/confidential\"", c.id)));
        assert!(!script.contains(&c.canonical_value));
    }
}
