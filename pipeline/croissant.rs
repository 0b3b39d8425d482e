//! `croissant.json`: ML Commons Croissant 1.0 metadata describing the bundle's files and
//! record sets.
//!
//! Croissant 1.0 (<http://mlcommons.org/croissant/1.0>) is schema.org `Dataset` in JSON-LD plus
//! a `distribution` of `cr:FileObject`/`cr:FileSet` resources and `cr:RecordSet`s whose fields
//! say where each value is extracted from. The record sets are derived from the JSONL bytes
//! themselves, so the metadata cannot drift from the data. All records are read, not just the
//! first: optional fields (e.g. `skills.contract_id`, absent from shared skills) would
//! otherwise be missed, and keys and references can be verified rather than assumed.
//!
//! - Field types: strings `sc:Text`, integers `sc:Integer` (widened to `sc:Float` when any
//!   record has a fraction), booleans `sc:Boolean`; arrays of scalars are `repeated`.
//! - Objects with the same key set in every record are records themselves and are flattened
//!   one level into `parent.child` fields (`$.parent.child`). Objects whose keys are data
//!   (maps keyed by skill name, persona facts) and arrays of objects are kept whole: one
//!   `sc:Text` field whose description says it holds nested JSON.
//! - `key` is set only when the candidate id field(s) are present and unique in every record;
//!   `references` only when every value is a key of the target record set.

use crate::fsio::sha256_hex;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The specification version the document declares with `conformsTo`.
pub const CONFORMS_TO: &str = "http://mlcommons.org/croissant/1.0";
/// The Croissant namespace (`cr`), unversioned by design (spec, "Prerequisites › Namespaces").
const CR_NS: &str = "http://mlcommons.org/croissant/";
/// Dublin Core terms, which `conformsTo` comes from.
const DCT_NS: &str = "http://purl.org/dc/terms/";
/// The file this module renders; never described inside itself.
const SELF_FILE: &str = "croissant.json";
/// The bundle's own licence (CC BY 4.0), as the licence URL the spec recommends.
const LICENSE_URL: &str = "https://creativecommons.org/licenses/by/4.0/";

/// The standard Croissant 1.0 JSON-LD `@context`, as shipped with the 1.0 example datasets:
/// the spec's Appendix 1 context completed with `cr`, `dct`, `rai` and the 1.0 terms, so
/// short keys such as `fileObject` expand to the Croissant namespace rather than schema.org.
pub fn context() -> Value {
    json!({
        "@language": "en",
        "@vocab": "https://schema.org/",
        "citeAs": "cr:citeAs",
        "column": "cr:column",
        "conformsTo": "dct:conformsTo",
        "cr": CR_NS,
        "rai": "http://mlcommons.org/croissant/RAI/",
        "data": {"@id": "cr:data", "@type": "@json"},
        "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
        "dct": DCT_NS,
        "examples": {"@id": "cr:examples", "@type": "@json"},
        "extract": "cr:extract",
        "field": "cr:field",
        "fileProperty": "cr:fileProperty",
        "fileObject": "cr:fileObject",
        "fileSet": "cr:fileSet",
        "format": "cr:format",
        "includes": "cr:includes",
        "isLiveDataset": "cr:isLiveDataset",
        "jsonPath": "cr:jsonPath",
        "key": "cr:key",
        "md5": "cr:md5",
        "parentField": "cr:parentField",
        "path": "cr:path",
        "recordSet": "cr:recordSet",
        "references": "cr:references",
        "regex": "cr:regex",
        "repeated": "cr:repeated",
        "replace": "cr:replace",
        "sc": "https://schema.org/",
        "separator": "cr:separator",
        "source": "cr:source",
        "subField": "cr:subField",
        "transform": "cr:transform"
    })
}

/// Croissant metadata for a bundle: `manifest` without its files listing, `files` the bundle
/// files (path inside the bundle → bytes) the metadata describes.
///
/// `url`: Croissant 1.0 types it as schema.org `URL` and says it "generally corresponds to
/// the Web page for the dataset"; it does not require http(s). The bundle has no public home,
/// so rather than a made-up web address it gets a URN naming this exact build (version and
/// the first 16 hex digits of the config hash): an identifier that does not pretend to be
/// fetchable. File `contentUrl`s are paths relative to the bundle root, as in the spec's
/// examples.
pub fn metadata(manifest: &Value, files: &BTreeMap<String, Vec<u8>>) -> Value {
    let version = manifest["bundle_version"].as_str().unwrap_or_default();
    let config_hash: String = manifest["config_sha256"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(16)
        .collect();
    let url = if config_hash.is_empty() {
        format!("urn:privforge:bundle:{version}")
    } else {
        format!("urn:privforge:bundle:{version}:{config_hash}")
    };
    let date = manifest["build_date"].as_str().unwrap_or_default();
    let year = date.get(..4).unwrap_or_default();
    let cite_as = format!(
        "@misc{{privforge_{}, title = {{PrivForge benchmark bundle, version {version}}}, \
         author = {{PrivForge}}, year = {{{year}}}, note = {{{url}}}}}",
        version.replace(['.', '-', '+'], "_"),
    );

    let tables = jsonl_tables(files);
    let mut doc = json!({
        "@context": context(),
        "@type": "sc:Dataset",
        "name": "PrivForge benchmark bundle",
        "description": description(manifest),
        "conformsTo": CONFORMS_TO,
        "citeAs": cite_as,
        "license": LICENSE_URL,
        "url": url,
        "creator": {"@type": "sc:Organization", "name": "PrivForge"},
        "datePublished": date,
        "version": version,
        "keywords": [
            "privacy",
            "personal data",
            "LLM agents",
            "tool use",
            "Agent Skills",
            "data minimisation",
            "synthetic profiles",
            "benchmark"
        ],
        "inLanguage": "en",
        "isLiveDataset": false,
    });
    doc["distribution"] = Value::Array(distribution(manifest, files, &tables));
    doc["recordSet"] = Value::Array(record_sets(files, &tables));
    doc
}

/// Dataset description from the manifest counts, with the licensing caveat for the margins.
fn description(manifest: &Value) -> String {
    let n = |k: &str| {
        manifest
            .pointer(&format!("/counts/{k}"))
            .and_then(Value::as_u64)
    };
    let mut parts = Vec::new();
    if let Some(p) = n("profiles") {
        let margins = n("margins")
            .map(|m| format!(" calibrated to {m} population margins"))
            .unwrap_or_default();
        parts.push(format!("{p} synthetic adult profiles{margins}"));
    }
    if let Some(c) = n("contracts") {
        let cats = n("categories")
            .map(|k| format!(" in {k} sensitive-data categories"))
            .unwrap_or_default();
        let votes = n("votes")
            .map(|v| format!(" with {v} reviewer votes"))
            .unwrap_or_default();
        parts.push(format!("{c} privacy contracts{cats}{votes}"));
    }
    if let (Some(w), Some(p)) = (n("personas"), n("payloads")) {
        parts.push(format!("{w} persona worlds with {p} environment payloads"));
    }
    if let Some(s) = n("skills") {
        let folders = n("skill_folders")
            .map(|f| format!(" rendered as {f} Agent Skill folders across the guidance conditions"))
            .unwrap_or_default();
        parts.push(format!("{s} skills{folders}"));
    }
    if let Some(r) = n("runs") {
        parts.push(format!(
            "a run matrix of {r} runs (contract x guidance x pressure x Discovery order)"
        ));
    }
    let contents = if parts.is_empty() {
        String::new()
    } else {
        format!(" Contents: {}.", parts.join("; "))
    };
    let format = manifest["bundle_format"].as_str().unwrap_or("unknown");
    let config = manifest["config_sha256"].as_str().unwrap_or("unknown");
    format!(
        "Versioned benchmark bundle for measuring how LLM agents handle personal data, built by \
         PrivForge in one seeded, reproducible run from open population statistics.{contents} \
         All identities are synthetic. The bundle is licensed CC BY 4.0; the population margins \
         under margins/ are derived from third-party statistics and carry their sources' terms, \
         stated in each margin file's description here and in manifest.json (provenance). \
         Bundle format {format}; config sha256 {config}."
    )
}

/// MIME type of the bundle files the distribution lists; other extensions are not described.
fn encoding_format(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.').map(|(_, e)| e)?;
    Some(match ext {
        "jsonl" => "application/jsonlines",
        "json" => "application/json",
        "csv" => "text/csv",
        "html" => "text/html",
        "md" => "text/markdown",
        _ => return None,
    })
}

/// Whether `path` gets its own `cr:FileObject`: the bundle root, `schemas/` and `margins/`.
fn is_file_object(path: &str) -> bool {
    path != SELF_FILE
        && (!path.contains('/') || path.starts_with("schemas/") || path.starts_with("margins/"))
        && encoding_format(path).is_some()
}

/// The skills tree as two homogeneous file sets: (file set `@id`, record set `@id`, glob,
/// MIME type, what it is). `@id`s are document-wide, so the two kinds need distinct ones.
const SKILL_FILE_SETS: [(&str, &str, &str, &str, &str); 2] = [
    (
        "skill-document-files",
        "skill-documents",
        "skills/*/*/SKILL.md",
        "text/markdown",
        "Agent Skill documents (SKILL.md with name and description front matter), one per \
         skill folder under each guidance condition (skills/<guidance>/<skill>/)",
    ),
    (
        "skill-script-files",
        "skill-scripts",
        "skills/*/*/scripts/*.py",
        "text/x-python",
        "Python scripts of the Agent Skills that print the skill's record for the current task",
    ),
];

/// `*` matches within one path segment, as in the spec's glob examples.
fn glob_match(pattern: &str, path: &str) -> bool {
    fn seg(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| seg(rest, &s[i..])),
            Some((c, rest)) => s.first() == Some(c) && seg(rest, &s[1..]),
        }
    }
    let (ps, ss): (Vec<_>, Vec<_>) = (pattern.split('/').collect(), path.split('/').collect());
    ps.len() == ss.len()
        && ps
            .iter()
            .zip(&ss)
            .all(|(p, s)| seg(p.as_bytes(), s.as_bytes()))
}

/// One `cr:FileObject` per described file (sha256 and size from the bytes), then the skill
/// file sets that match at least one file.
fn distribution(
    manifest: &Value,
    files: &BTreeMap<String, Vec<u8>>,
    tables: &BTreeMap<String, Table>,
) -> Vec<Value> {
    // schemas/index.json maps bundle files to their schema; inverted, it says what each
    // schema describes.
    let mut schema_index: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(Ok(index)) = files
        .get("schemas/index.json")
        .map(|b| serde_json::from_slice::<Value>(b))
    {
        for (file, schema) in index["files"].as_object().into_iter().flatten() {
            if let Some(s) = schema.as_str() {
                schema_index
                    .entry(format!("schemas/{s}"))
                    .or_default()
                    .push(file.clone());
            }
        }
    }
    let mut out = Vec::new();
    for (path, bytes) in files.iter().filter(|(p, _)| is_file_object(p)) {
        let mut fo = json!({
            "@type": "cr:FileObject",
            "@id": path,
            "name": path,
        });
        if let Some(d) = file_description(manifest, path, tables, &schema_index) {
            fo["description"] = json!(d);
        }
        fo["contentUrl"] = json!(path);
        fo["contentSize"] = json!(format!("{} B", bytes.len()));
        fo["encodingFormat"] = json!(encoding_format(path));
        fo["sha256"] = json!(sha256_hex(bytes));
        out.push(fo);
    }
    for (id, _, glob, mime, what) in SKILL_FILE_SETS {
        let n = files.keys().filter(|p| glob_match(glob, p)).count();
        if n > 0 {
            out.push(json!({
                "@type": "cr:FileSet",
                "@id": id,
                "name": id,
                "description": format!("{what}: {n} files."),
                "encodingFormat": mime,
                "includes": glob,
            }));
        }
    }
    out
}

/// What a described file is; margins also say what they cover and under which terms.
fn file_description(
    manifest: &Value,
    path: &str,
    tables: &BTreeMap<String, Table>,
    schema_index: &BTreeMap<String, Vec<String>>,
) -> Option<String> {
    if let Some(described) = schema_index.get(path) {
        let what: Vec<String> = described
            .iter()
            .map(|f| match f.ends_with(".jsonl") {
                true => format!("one line of {f}"),
                false => f.clone(),
            })
            .collect();
        return Some(format!("JSON Schema of {}.", what.join(", ")));
    }
    if let Some(t) = tables.get(path) {
        return Some(format!(
            "{} JSON Lines, {} records.",
            record_set_description(&t.stem),
            t.records
        ));
    }
    if let Some(file) = path.strip_prefix("margins/") {
        let entry = manifest["margins"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["file"].as_str() == Some(path));
        let prov = manifest
            .pointer("/provenance/margins/margin")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|m| m["file"].as_str() == Some(file));
        let mut d = String::from("Population margin");
        if let Some(e) = entry {
            if let Some(name) = e["name"].as_str() {
                d.push_str(&format!(" `{name}`"));
            }
            let fields: Vec<&str> = e["fields"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !fields.is_empty() {
                d.push_str(&format!(" over {}", fields.join(", ")));
            }
            if let Some(status) = e["status"].as_str() {
                d.push_str(&format!(" ({status})"));
            }
        }
        d.push_str(", target shares the profiles were calibrated to.");
        match prov.and_then(|p| p["licence"].as_str()) {
            Some(l) => d.push_str(&format!(" Terms: {l}.")),
            None => d.push_str(" Terms: see manifest.json provenance."),
        }
        return Some(d);
    }
    let d = match path {
        "manifest.json" => {
            "Bundle manifest: configuration, input hashes, provenance, counts, gate results and \
             the sha256 of every file."
        }
        "calibration.json" => "Calibration report: IPF weights summary and per-margin fit.",
        "taxonomy.json" => {
            "Sensitive-data categories, sources, interaction skills, domains and the reviewer \
             criteria and personas."
        }
        "policies.json" => "Guidance and pressure conditions, labels and validation rules.",
        "identity_schemes.json" => {
            "Per-country identity formats (phone numbering, government identifiers) used to \
             validate the synthetic identities."
        }
        "schemas/profile.schema.json" => "JSON Schema of a profiles.jsonl record.",
        "schemas/index.json" => "Which schema under schemas/ describes which bundle file.",
        "report.html" => "Human-readable HTML report of the build.",
        "DATA_CARD.md" => "Data card of the bundle.",
        "README.md" => "Read-me of the bundle.",
        _ => return None,
    };
    Some(d.to_string())
}

/// What each known JSONL file holds (also the record set description).
fn record_set_description(stem: &str) -> String {
    match stem {
        "profiles" => "Synthetic adult profiles calibrated to the population margins.",
        "contracts" => {
            "Privacy contracts: the target attribute, its synthetic canonical value, the execution \
             skill that needs it and the user, public and confidential sources that hold it."
        }
        "contracts_discarded" => "Contracts the review discarded, with the reasons.",
        "votes" => "Reviewer-persona votes on the contracts, per review round.",
        "bindings" => "The persona (profile) each contract is bound to.",
        "personas" => "Persona worlds: the facts and per-environment account contents.",
        "payloads" => "What each environment (skill) returns for each contract.",
        "skills" => "Index of the Agent Skills rendered under skills/.",
        "runs" => {
            "Run matrix: one run per contract, guidance, pressure and Discovery order, with the \
             system prompt and user request."
        }
        "seed_audit" => "Seed-audit verdicts on the candidate profiles.",
        _ => return format!("Records of {stem}.jsonl."),
    }
    .to_string()
}

/// Data type of a JSON value as Croissant sees it; `List` is a `repeated` field of scalars.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Unknown,
    Bool,
    Int,
    Float,
    Text,
    List(Option<Scalar>),
    Json,
    Mixed,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Scalar {
    Bool,
    Int,
    Float,
    Text,
}

impl Scalar {
    fn of(v: &Value) -> Option<Scalar> {
        match v {
            Value::Bool(_) => Some(Scalar::Bool),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(Scalar::Int),
            Value::Number(_) => Some(Scalar::Float),
            Value::String(_) => Some(Scalar::Text),
            _ => None,
        }
    }

    /// Integers widen to floats; other disagreements have no common scalar type.
    fn unify(a: Scalar, b: Scalar) -> Option<Scalar> {
        match (a, b) {
            _ if a == b => Some(a),
            (Scalar::Int, Scalar::Float) | (Scalar::Float, Scalar::Int) => Some(Scalar::Float),
            _ => None,
        }
    }

    fn kind(self) -> Kind {
        match self {
            Scalar::Bool => Kind::Bool,
            Scalar::Int => Kind::Int,
            Scalar::Float => Kind::Float,
            Scalar::Text => Kind::Text,
        }
    }

    fn data_type(self) -> &'static str {
        match self {
            Scalar::Bool => "sc:Boolean",
            Scalar::Int => "sc:Integer",
            Scalar::Float => "sc:Float",
            Scalar::Text => "sc:Text",
        }
    }
}

impl Kind {
    /// Kind of one non-null value; objects and arrays of non-scalars are whole JSON values.
    fn of(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Unknown,
            Value::Array(items) => {
                let mut elem: Option<Scalar> = None;
                for it in items {
                    let Some(s) = Scalar::of(it) else {
                        return Kind::Json;
                    };
                    elem = match elem {
                        None => Some(s),
                        Some(e) => match Scalar::unify(e, s) {
                            Some(u) => Some(u),
                            None => return Kind::Json,
                        },
                    };
                }
                Kind::List(elem)
            }
            Value::Object(_) => Kind::Json,
            _ => Scalar::of(v).map_or(Kind::Unknown, Scalar::kind),
        }
    }

    fn scalar(self) -> Option<Scalar> {
        match self {
            Kind::Bool => Some(Scalar::Bool),
            Kind::Int => Some(Scalar::Int),
            Kind::Float => Some(Scalar::Float),
            Kind::Text => Some(Scalar::Text),
            _ => None,
        }
    }

    fn unify(a: Kind, b: Kind) -> Kind {
        match (a, b) {
            (Kind::Unknown, k) | (k, Kind::Unknown) => k,
            // An empty array fits arrays of objects too.
            (Kind::Json, Kind::Json)
            | (Kind::List(None), Kind::Json)
            | (Kind::Json, Kind::List(None)) => Kind::Json,
            (Kind::List(x), Kind::List(y)) => match (x, y) {
                (None, e) | (e, None) => Kind::List(e),
                (Some(x), Some(y)) => {
                    Scalar::unify(x, y).map_or(Kind::Json, |u| Kind::List(Some(u)))
                }
            },
            _ => match (a.scalar(), b.scalar()) {
                (Some(x), Some(y)) => Scalar::unify(x, y).map_or(Kind::Mixed, Scalar::kind),
                _ => Kind::Mixed,
            },
        }
    }
}

/// What the records say about one field: how often it is there, null, and its type.
#[derive(Clone, Debug)]
struct Column {
    present: usize,
    nulls: usize,
    kind: Kind,
}

impl Column {
    fn new() -> Self {
        Column {
            present: 0,
            nulls: 0,
            kind: Kind::Unknown,
        }
    }

    fn add(&mut self, v: &Value) {
        self.present += 1;
        if v.is_null() {
            self.nulls += 1;
        }
        self.kind = Kind::unify(self.kind, Kind::of(v));
    }
}

/// A top-level record key: the column, plus the shape of its values when they are objects.
#[derive(Debug)]
struct TopColumn {
    name: String,
    col: Column,
    objects: usize,
    /// Key set shared by every object value (sorted); `None` once two objects disagree.
    shape: Option<Option<Vec<String>>>,
    children: Vec<(String, Column)>,
}

impl TopColumn {
    /// Objects with one fixed key set are records, flattened one level into `parent.child`
    /// fields; objects whose keys vary (maps keyed by data, like skill names) stay whole JSON.
    fn flattened(&self) -> bool {
        self.objects > 0
            && self.objects + self.col.nulls == self.col.present
            && matches!(&self.shape, Some(Some(k)) if !k.is_empty())
    }
}

/// One parsed JSONL file: its columns, verified key and the values of reference candidates.
#[derive(Debug)]
struct Table {
    stem: String,
    file: String,
    records: usize,
    columns: Vec<TopColumn>,
    key: Option<Vec<String>>,
    key_values: HashSet<String>,
    /// Values of the fields that may reference another record set's key.
    ref_values: BTreeMap<String, HashSet<String>>,
}

/// Key candidates per record set, tried in order; a candidate is used only when every record
/// has a scalar value for each of its fields and the combinations are unique.
fn key_candidates(stem: &str) -> &'static [&'static [&'static str]] {
    match stem {
        "profiles" | "personas" => &[&["profile_id"]],
        "contracts" | "contracts_discarded" => &[&["id"]],
        "votes" => &[&["contract_id", "round", "persona"]],
        "bindings" => &[&["contract_id"]],
        "payloads" => &[&["key"]],
        "skills" => &[&["name"]],
        "runs" => &[&["run_id"]],
        "seed_audit" => &[&["candidate_id"]],
        _ => &[&["id"], &["key"], &["run_id"], &["name"]],
    }
}

/// Foreign keys: a field named like this, in another record set, whose values are all keys
/// of the target gets `references` (spec, "Joins").
const REFERENCES: [(&str, &str, &str); 3] = [
    ("contract_id", "contracts", "id"),
    ("profile_id", "profiles", "profile_id"),
    ("payload_key", "payloads", "key"),
];

/// JSON text of a scalar, used to compare key values across files.
fn scalar_text(v: Option<&Value>) -> Option<String> {
    v.filter(|x| Scalar::of(x).is_some()).map(Value::to_string)
}

/// Parses every root-level JSONL file into a [`Table`]. Blank and non-object lines are
/// skipped; the bundle verifier is what rejects malformed files.
fn jsonl_tables(files: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Table> {
    let mut out = BTreeMap::new();
    for (path, bytes) in files {
        let Some(stem) = path.strip_suffix(".jsonl").filter(|s| !s.contains('/')) else {
            continue;
        };
        let mut columns: Vec<TopColumn> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut records = 0usize;
        let candidates = key_candidates(stem);
        let mut key_seen: Vec<Option<HashSet<String>>> =
            candidates.iter().map(|_| Some(HashSet::new())).collect();
        let mut ref_values: BTreeMap<String, HashSet<String>> = BTreeMap::new();
        for line in bytes.split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Ok(Value::Object(rec)) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            records += 1;
            for (k, v) in &rec {
                let i = *index.entry(k.clone()).or_insert_with(|| {
                    columns.push(TopColumn {
                        name: k.clone(),
                        col: Column::new(),
                        objects: 0,
                        shape: None,
                        children: Vec::new(),
                    });
                    columns.len() - 1
                });
                let top = &mut columns[i];
                top.col.add(v);
                if let Value::Object(o) = v {
                    top.objects += 1;
                    let mut keys: Vec<String> = o.keys().cloned().collect();
                    keys.sort();
                    top.shape = match top.shape.take() {
                        None => Some(Some(keys)),
                        Some(Some(prev)) if prev == keys => Some(Some(prev)),
                        Some(_) => Some(None),
                    };
                    for (ck, cv) in o {
                        match top.children.iter_mut().find(|(n, _)| n == ck) {
                            Some((_, c)) => c.add(cv),
                            None => {
                                let mut c = Column::new();
                                c.add(cv);
                                top.children.push((ck.clone(), c));
                            }
                        }
                    }
                }
            }
            for (seen, fields) in key_seen.iter_mut().zip(candidates) {
                let Some(set) = seen else { continue };
                let parts: Option<Vec<String>> =
                    fields.iter().map(|f| scalar_text(rec.get(*f))).collect();
                match parts {
                    Some(p) if set.insert(p.join("\u{1f}")) => {}
                    _ => *seen = None,
                }
            }
            for (field, _, _) in REFERENCES {
                if let Some(t) = scalar_text(rec.get(field)) {
                    ref_values.entry(field.to_string()).or_default().insert(t);
                }
            }
        }
        if records == 0 {
            continue;
        }
        let (key, key_values) = key_seen
            .into_iter()
            .zip(candidates)
            .find_map(|(s, f)| s.map(|s| (f, s)))
            .map_or((None, HashSet::new()), |(f, s)| {
                (Some(f.iter().map(|x| x.to_string()).collect()), s)
            });
        out.insert(
            path.clone(),
            Table {
                stem: stem.to_string(),
                file: path.clone(),
                records,
                columns,
                key,
                key_values,
                ref_values,
            },
        );
    }
    out
}

/// Description of a field of a known record set; `path` is `field` or `parent.child`.
fn field_description(stem: &str, path: &str) -> String {
    let known = match (stem, path) {
        (_, "profile_id") if stem == "profiles" => "Profile identifier (P and digits).",
        (_, "profile_id") if stem == "personas" => "Profile the persona world belongs to.",
        (_, "profile_id") => "Profile (persona) bound to the contract.",
        (_, "contract_id") if stem == "skills" => {
            "Contract the skill serves; absent for skills shared by all contracts."
        }
        (_, "contract_id") => "Contract identifier (contracts.jsonl id).",
        (_, "candidate_id") => "Identifier of the candidate in the calibrated pool.",
        ("profiles", "proposal") => {
            "Proposal that produced the candidate: target, uniform or backfill."
        }
        ("profiles", "age") => "Age in years.",
        ("profiles", "sex") => "Sex.",
        ("profiles", "ethnicity") => "Broad ethnic group.",
        ("profiles", "citizenship") => "Country of citizenship.",
        ("profiles", "current_location") => "Current city and country.",
        ("profiles", "birth_location") => "Birth city and country.",
        ("profiles", "education_level") => "Highest education level attained.",
        ("profiles", "income_level") => "Income band within the country of residence.",
        ("profiles", "relationship_status") => "Relationship status.",
        ("profiles", "religious_belief") => "Religious belief.",
        ("profiles", "occupation") => "Occupation.",
        ("profiles", "physical_condition") => "Physical health condition, or None.",
        ("profiles", "mental_condition") => "Mental health condition, or None.",
        ("profiles", "age_group") => "Age band used by the margins.",
        ("profiles", "current_country") => "Country of residence.",
        ("profiles", "birth_country") => "Country of birth.",
        ("profiles", "current_city_size") => "Population size class of the current city.",
        ("profiles", "occupation_group") => "Occupation group code used by the margins.",
        ("profiles", "date_of_birth") => "Date of birth (YYYY-MM-DD), consistent with the age.",
        ("profiles", "name") => "Synthetic full name.",
        ("profiles", "email") => "Synthetic email address on a reserved example.* domain.",
        ("profiles", "phone_number") => "Synthetic phone number (E.164).",
        ("profiles", "government_id") => "Synthetic government identifier.",
        ("profiles", "government_id_document") => "Document the government identifier belongs to.",
        ("contracts", "id") => "Contract identifier (<category>-<nn>).",
        (_, "category") => "Sensitive-data category of the contract's target attribute.",
        ("contracts", "subtype") => "Subtype of the target attribute within its category.",
        ("contracts", "domain") => "Task domain of the execution skill.",
        ("contracts", "canonical_value") => "The synthetic value the execution skill needs.",
        ("contracts", "origin") => "Whether the contract was curated or generated.",
        ("contracts", "persona_requirements") => "Constraints the bound persona must meet.",
        ("votes", "round") => "Review round (from 1).",
        ("votes", "persona") => "Reviewer persona.",
        ("votes", "contract_sha256") => "sha256 of the contract version the vote judged.",
        ("votes", "decision") | ("seed_audit", "decision") => "accept or reject.",
        ("votes", "reasons") => "The reviewer's reasons.",
        ("bindings", "compatible_profiles") => {
            "Number of profiles meeting the contract's persona requirements."
        }
        ("personas", "identity_source") => "Where the persona's identity fields came from.",
        ("personas", "facts") => "Persona facts as label and value text.",
        ("personas", "accounts") => "Account contents per environment.",
        ("personas", "tasks") => "Contracts assigned to the persona.",
        ("payloads", "key") => "Payload key: <contract_id>/<role>, with @<pressure> for variants.",
        ("payloads", "role") | ("skills", "role") => {
            "Environment role: user, user_unavailable, public, confidential or execution."
        }
        ("payloads", "skill") => "Skill that returns the payload.",
        ("payloads", "message") => "Fixed message returned instead of a value.",
        ("payloads", "exposure") => {
            "Attributes the payload exposes, each with its category and whether it is the target."
        }
        ("skills", "name") => "Skill name, the folder name under each guidance directory.",
        ("skills", "description") => "One-line description shown in Discovery.",
        ("skills", "payload_key") => "Key of the payload the skill returns (payloads.jsonl key).",
        ("skills", "folders") => "Bundle folders holding the skill, one per guidance condition.",
        ("runs", "run_id") => "Run identifier: <contract>/<guidance>/<pressure>/o<n>.",
        ("runs", "guidance") => "Guidance condition of the system prompt.",
        ("runs", "pressure") => "Pressure condition of the user request.",
        ("runs", "order") => "Number of the Discovery order, 1 to 6 (the o<n> of the run id).",
        ("runs", "system_prompt") => "System prompt given to the agent.",
        ("runs", "system_prompt_additions") => "Guidance sentences added to the system prompt.",
        ("runs", "user_request") => "The user's request.",
        ("runs", "discovery") => "Skills listed in Discovery, in this run's order.",
        ("runs", "payload_keys") => "Payload key per skill name.",
        ("runs", "expected_argument") => "Argument values the execution skill must receive.",
        ("runs", "user_skill_response") => "Fixed response of the user skill under this pressure.",
        ("seed_audit", "by") => "Who decided: rule or llm.",
        ("seed_audit", "reason_code") => "Reason code of the verdict (none when accepted).",
        ("seed_audit", "round") => "Audit round (from 1).",
        _ => "",
    };
    if !known.is_empty() {
        return known.to_string();
    }
    match path.split_once('.') {
        Some(("identity_provenance", c)) => {
            format!("How the {c} identity field was produced (llm, llm_repaired or fallback).")
        }
        Some(("criteria", c)) => format!("The reviewer's verdict on the {c} criterion."),
        Some(("request", c)) => format!("User request under {c} pressure."),
        Some(("sources", c)) => format!("How the value is obtained from the {c} source."),
        Some((parent, c)) => {
            let what = match parent {
                "attribute" => "Target attribute",
                "execution_skill" => "Execution skill",
                "review" => "Review outcome",
                "reply" => "The user's reply",
                "record" => "Record the source returns",
                "execution" => "What the execution skill accepts",
                _ => return format!("`{c}` of the `{parent}` object."),
            };
            format!("{what}: {c}.")
        }
        None => format!("`{path}` of each {stem}.jsonl record."),
    }
}

/// One `cr:Field` extracted with a JSONPath from a JSONL file object.
fn field(table: &Table, path: &str, col: &Column, jsonpath: &str) -> Value {
    let rs = &table.stem;
    let mut description = field_description(rs, path);
    let (data_type, repeated) = match col.kind {
        Kind::List(e) => (e.map_or("sc:Text", Scalar::data_type), true),
        k => (k.scalar().map_or("sc:Text", Scalar::data_type), false),
    };
    match col.kind {
        Kind::Json => description.push_str(
            " Nested JSON (object or array) kept whole: the JSONPath yields the JSON value, \
             typed sc:Text.",
        ),
        Kind::Mixed => description.push_str(" Values of mixed JSON types, typed sc:Text."),
        Kind::Unknown => description.push_str(" Always null in this bundle."),
        _ => {}
    }
    if col.present < table.records {
        description.push_str(&format!(
            " Present in {} of {} records.",
            col.present, table.records
        ));
    }
    if col.nulls > 0 && col.kind != Kind::Unknown {
        description.push_str(&format!(" Null in {} records.", col.nulls));
    }
    let mut f = json!({
        "@type": "cr:Field",
        "@id": format!("{rs}/{path}"),
        "name": path,
        "description": description,
        "dataType": data_type,
    });
    if repeated {
        f["repeated"] = json!(true);
    }
    f["source"] = json!({
        "fileObject": {"@id": table.file},
        "extract": {"jsonPath": jsonpath},
    });
    f
}

/// JSONPath of a key, with bracket notation when it is not a plain identifier.
fn json_path_step(key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        format!(".{key}")
    } else {
        format!("['{}']", key.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

/// Record sets: one per JSONL file (known files first, in pipeline order), then one per
/// skill file set with the path and content of each file.
fn record_sets(files: &BTreeMap<String, Vec<u8>>, tables: &BTreeMap<String, Table>) -> Vec<Value> {
    const ORDER: [&str; 9] = [
        "profiles",
        "contracts",
        "votes",
        "bindings",
        "personas",
        "payloads",
        "skills",
        "runs",
        "seed_audit",
    ];
    let by_stem: BTreeMap<&str, &Table> = tables.values().map(|t| (t.stem.as_str(), t)).collect();
    let rank = |s: &str| ORDER.iter().position(|o| *o == s).unwrap_or(ORDER.len());
    let mut ordered: Vec<&Table> = tables.values().collect();
    ordered.sort_by(|a, b| (rank(&a.stem), &a.stem).cmp(&(rank(&b.stem), &b.stem)));

    let mut out = Vec::new();
    for t in ordered {
        let mut fields = Vec::new();
        for top in &t.columns {
            let step = json_path_step(&top.name);
            if top.flattened() {
                for (child, col) in &top.children {
                    let path = format!("{}.{child}", top.name);
                    let jp = format!("${step}{}", json_path_step(child));
                    fields.push(field(t, &path, col, &jp));
                }
                continue;
            }
            let mut f = field(t, &top.name, &top.col, &format!("${step}"));
            if let Some((_, target, key)) = REFERENCES
                .iter()
                .find(|(name, target, _)| *name == top.name && *target != t.stem)
            {
                let resolves = by_stem.get(target).is_some_and(|tt| {
                    tt.key.as_deref() == Some(&[key.to_string()][..])
                        && t.ref_values
                            .get(&top.name)
                            .is_some_and(|vals| vals.is_subset(&tt.key_values))
                });
                if resolves && top.col.kind == Kind::Text {
                    f["references"] = json!({"@id": format!("{target}/{key}")});
                }
            }
            fields.push(f);
        }
        let mut rs = json!({
            "@type": "cr:RecordSet",
            "@id": t.stem,
            "name": t.stem,
            "description": record_set_description(&t.stem),
        });
        if let Some(k) = &t.key {
            let refs: Vec<Value> = k
                .iter()
                .map(|f| json!({"@id": format!("{}/{f}", t.stem)}))
                .collect();
            rs["key"] = if refs.len() == 1 {
                refs[0].clone()
            } else {
                Value::Array(refs)
            };
        }
        rs["field"] = Value::Array(fields);
        out.push(rs);
    }
    for (set, id, glob, _, what) in SKILL_FILE_SETS {
        if !files.keys().any(|p| glob_match(glob, p)) {
            continue;
        }
        let file_field = |name: &str, property: &str, description: &str| {
            json!({
                "@type": "cr:Field",
                "@id": format!("{id}/{name}"),
                "name": name,
                "description": description,
                "dataType": "sc:Text",
                "source": {"fileSet": {"@id": set}, "extract": {"fileProperty": property}},
            })
        };
        out.push(json!({
            "@type": "cr:RecordSet",
            "@id": id,
            "name": id,
            "description": format!("{what}, one record per file."),
            "key": {"@id": format!("{id}/path")},
            "field": [
                file_field("path", "fullpath", "Path of the file inside the bundle."),
                file_field("content", "content", "Text of the file."),
            ],
        }));
    }
    out
}

/// Croissant terms a document may use, each of which the `@context` must map into the `cr`
/// namespace (spec, "Appendix 1: JSON-LD context", and the 1.0 example datasets' context);
/// unmapped, `@vocab` would silently expand them to non-existent schema.org properties.
const CR_TERMS: [&str; 28] = [
    "citeAs",
    "column",
    "data",
    "dataType",
    "examples",
    "excludes",
    "extract",
    "field",
    "fileObject",
    "fileProperty",
    "fileSet",
    "format",
    "includes",
    "isLiveDataset",
    "jsonPath",
    "key",
    "md5",
    "parentField",
    "path",
    "recordSet",
    "references",
    "regex",
    "repeated",
    "replace",
    "separator",
    "source",
    "subField",
    "transform",
];

/// Problems of a Croissant 1.0 document against the rules of the specification
/// (<http://mlcommons.org/croissant/1.0>); an empty list means valid. Rules by spec section:
///
/// - "Dataset-level Information › schema.org/Dataset › Required": `@context`, `@type`
///   `sc:Dataset`, `dct:conformsTo` = `http://mlcommons.org/croissant/1.0`, `name`,
///   `description`, `license`, `url`, `creator` (Organization or Person) and `datePublished`
///   (Date or DateTime) must be present.
/// - "Prerequisites › Namespaces" and "Appendix 1: JSON-LD context": the context must bind
///   `@vocab` and `sc` to schema.org, `cr` to `http://mlcommons.org/croissant/`, `dct` when
///   `conformsTo` is used, and map every Croissant term the document uses into `cr`
///   (`dataType` as `@vocab`, `data`/`examples` as `@json`).
/// - "Modified and Added Properties": `distribution` is required and holds only
///   `cr:FileObject` or `cr:FileSet`.
/// - "Resources › FileObject": `name`, `contentUrl`, `encodingFormat`; with "Dataset
///   Versioning/Checkpoints › Checksums": a `sha256` (64 hex) or `md5` checksum.
/// - "Resources › FileSet": `includes` glob(s) and `encodingFormat`; `containedIn` resolves.
/// - "RecordSets › RecordSet": at least one `field`; every `key` names a field of the set.
/// - "RecordSets › Field": each field has a `name`, unique in its record set, and a
///   `dataType`; its `source` ("DataSource") names an existing `fileObject` or `fileSet` with
///   an `extract` (`fileProperty`, `column` for CSV, `jsonPath` for JSON), a `recordSet`, or is
///   a reference to another field ("Joins"); a field with `subField`s gets its data from them
///   ("Hierarchical RecordSets › Nested Fields"); `references` resolve to a field.
/// - "Prerequisites › ID and Reference Mechanism": `@id`s are unique across the document
///   and every `{"@id": …}` reference resolves.
pub fn check(doc: &Value) -> Vec<String> {
    let mut p = Vec::new();
    let Some(obj) = doc.as_object() else {
        return vec!["the document is not a JSON object".into()];
    };
    check_context(obj, &mut p);

    if !obj
        .get("@type")
        .is_some_and(|t| has_type(t, &sc_iris("Dataset")))
    {
        p.push("@type must be sc:Dataset".into());
    }
    let conforms = obj.get("conformsTo").or_else(|| obj.get("dct:conformsTo"));
    if conforms.and_then(Value::as_str) != Some(CONFORMS_TO) {
        p.push(format!("conformsTo must be {CONFORMS_TO}"));
    }
    for prop in ["name", "description"] {
        if !is_text(obj.get(prop)) {
            p.push(format!("dataset {prop} is missing or empty"));
        }
    }
    let license_ok = match obj.get("license") {
        Some(Value::Array(items)) => !items.is_empty() && items.iter().all(license_value_ok),
        Some(v) => license_value_ok(v),
        None => false,
    };
    if !license_ok {
        p.push("dataset license is missing or empty".into());
    }
    match obj.get("url").and_then(Value::as_str) {
        Some(u) if has_scheme(u) => {}
        Some(u) => p.push(format!("dataset url `{u}` is not an absolute URL")),
        None => p.push("dataset url is missing".into()),
    }
    let creators: Vec<&Value> = match obj.get("creator") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(v) => vec![v],
        None => Vec::new(),
    };
    let agent: Vec<String> = ["Organization", "Person"]
        .iter()
        .flat_map(|t| sc_iris(t))
        .collect();
    if creators.is_empty() {
        p.push("dataset creator is missing".into());
    }
    for c in creators {
        if !c.get("@type").is_some_and(|t| has_type(t, &agent)) || !is_text(c.get("name")) {
            p.push("every creator must be an sc:Organization or sc:Person with a name".into());
        }
    }
    match obj.get("datePublished").and_then(Value::as_str) {
        Some(d) if is_date(d) => {}
        _ => p.push("dataset datePublished is missing or not a Date/DateTime".into()),
    }

    // Every @id defined in the document, for uniqueness and reference resolution.
    let mut ids: BTreeMap<String, &'static str> = BTreeMap::new();
    let mut define = |id: Option<&str>, what: &'static str, p: &mut Vec<String>| match id {
        Some(id) if !id.is_empty() => {
            if ids.insert(id.to_string(), what).is_some() {
                p.push(format!("@id `{id}` is defined more than once"));
            }
        }
        _ => p.push(format!("a {what} has no @id")),
    };

    let dist: Vec<&Value> = match obj.get("distribution") {
        Some(Value::Array(items)) if !items.is_empty() => items.iter().collect(),
        _ => {
            p.push("distribution is missing or empty".into());
            Vec::new()
        }
    };
    let fo_types = cr_iris("FileObject");
    let fs_types = cr_iris("FileSet");
    let mut resources: BTreeMap<String, (&'static str, String)> = BTreeMap::new();
    for r in &dist {
        let id = r.get("@id").and_then(Value::as_str);
        let t = r.get("@type");
        let kind = if t.is_some_and(|t| has_type(t, &fo_types)) {
            "FileObject"
        } else if t.is_some_and(|t| has_type(t, &fs_types)) {
            "FileSet"
        } else {
            p.push(format!(
                "distribution entry `{}` is neither a cr:FileObject nor a cr:FileSet",
                id.unwrap_or("?")
            ));
            continue;
        };
        define(id, kind, &mut p);
        let label = id.unwrap_or("?");
        if !is_text(r.get("name")) {
            p.push(format!("{kind} `{label}` has no name"));
        }
        let format = r
            .get("encodingFormat")
            .and_then(Value::as_str)
            .unwrap_or("");
        if format.is_empty() {
            p.push(format!("{kind} `{label}` has no encodingFormat"));
        }
        if kind == "FileObject" {
            if !is_text(r.get("contentUrl")) {
                p.push(format!("FileObject `{label}` has no contentUrl"));
            }
            let sha = r.get("sha256").and_then(Value::as_str);
            let md5 = r.get("md5").and_then(Value::as_str);
            match (sha, md5) {
                (None, None) => p.push(format!("FileObject `{label}` has no sha256 or md5")),
                (Some(s), _) if !is_hex(s, 64) => {
                    p.push(format!("FileObject `{label}` sha256 is not 64 hex digits"))
                }
                (None, Some(m)) if !is_hex(m, 32) => {
                    p.push(format!("FileObject `{label}` md5 is not 32 hex digits"))
                }
                _ => {}
            }
        } else {
            let ok = match r.get("includes") {
                Some(Value::Array(g)) => !g.is_empty() && g.iter().all(|x| is_text(Some(x))),
                other => is_text(other),
            };
            if !ok {
                p.push(format!("FileSet `{label}` has no includes glob"));
            }
        }
        if let Some(id) = id {
            resources.insert(id.to_string(), (kind, format.to_string()));
        }
    }
    for r in &dist {
        for target in refs(r.get("containedIn")) {
            if !resources.contains_key(&target) {
                p.push(format!(
                    "`{}` is containedIn `{target}`, which is not in distribution",
                    r.get("@id").and_then(Value::as_str).unwrap_or("?")
                ));
            }
        }
    }

    let record_sets: Vec<&Value> = match obj.get("recordSet") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(v) => vec![v],
    };
    // Field ids first, so joins and references may point forward.
    let mut field_ids = BTreeSet::new();
    fn collect_fields<'a>(fields: Option<&'a Value>, out: &mut Vec<&'a Value>) {
        for f in fields.and_then(Value::as_array).into_iter().flatten() {
            out.push(f);
            collect_fields(f.get("subField"), out);
        }
    }
    let mut rs_ids = BTreeSet::new();
    for rs in &record_sets {
        let rs_id = rs.get("@id").and_then(Value::as_str);
        define(rs_id, "RecordSet", &mut p);
        if let Some(id) = rs_id {
            rs_ids.insert(id.to_string());
        }
        let mut all = Vec::new();
        collect_fields(rs.get("field"), &mut all);
        for f in all {
            let fid = f.get("@id").and_then(Value::as_str);
            define(fid, "Field", &mut p);
            if let Some(id) = fid {
                field_ids.insert(id.to_string());
            }
        }
    }
    let ctx = Refs {
        resources: &resources,
        field_ids: &field_ids,
        record_sets: &rs_ids,
    };
    for rs in &record_sets {
        let label = rs.get("@id").and_then(Value::as_str).unwrap_or("?");
        if !rs
            .get("@type")
            .is_some_and(|t| has_type(t, &cr_iris("RecordSet")))
        {
            p.push(format!("RecordSet `{label}` is not typed cr:RecordSet"));
        }
        if !is_text(rs.get("name")) {
            p.push(format!("RecordSet `{label}` has no name"));
        }
        let fields: Vec<&Value> = rs
            .get("field")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        if fields.is_empty() {
            p.push(format!("RecordSet `{label}` has no field"));
        }
        check_fields(&fields, label, &ctx, &mut p);
        let own: BTreeSet<&str> = fields
            .iter()
            .filter_map(|f| f.get("@id").and_then(Value::as_str))
            .collect();
        let keys: Vec<String> = match rs.get("key") {
            Some(Value::String(s)) => vec![s.clone()],
            other => refs(other),
        };
        for k in keys {
            let qualified = format!("{label}/{k}");
            if !own.contains(k.as_str()) && !own.contains(qualified.as_str()) {
                p.push(format!(
                    "RecordSet `{label}` key `{k}` is not one of its fields"
                ));
            }
        }
    }
    p
}

/// What references may resolve to.
struct Refs<'a> {
    resources: &'a BTreeMap<String, (&'static str, String)>,
    field_ids: &'a BTreeSet<String>,
    record_sets: &'a BTreeSet<String>,
}

/// Field rules ("RecordSets › Field", "DataSource", "Extract", "Joins"), recursing into
/// `subField`s.
fn check_fields(fields: &[&Value], parent: &str, ctx: &Refs, p: &mut Vec<String>) {
    let mut names = BTreeSet::new();
    for f in fields {
        let label = f.get("@id").and_then(Value::as_str).unwrap_or("?");
        if !f
            .get("@type")
            .is_some_and(|t| has_type(t, &cr_iris("Field")))
        {
            p.push(format!("Field `{label}` is not typed cr:Field"));
        }
        match f.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => {
                if !names.insert(n) {
                    p.push(format!("field name `{n}` appears twice in `{parent}`"));
                }
            }
            _ => p.push(format!("Field `{label}` has no name")),
        }
        let dt_ok = match f.get("dataType") {
            Some(Value::Array(v)) => !v.is_empty() && v.iter().all(|x| is_text(Some(x))),
            other => is_text(other),
        };
        if !dt_ok {
            p.push(format!("Field `{label}` has no dataType"));
        }
        let subs: Vec<&Value> = f
            .get("subField")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        match f.get("source") {
            Some(src) => check_source(src, label, ctx, p),
            None if !subs.is_empty() => {}
            None => p.push(format!("Field `{label}` has no source")),
        }
        if !subs.is_empty() {
            check_fields(&subs, label, ctx, p);
        }
        for target in refs(f.get("references")) {
            if !ctx.field_ids.contains(&target) {
                p.push(format!(
                    "Field `{label}` references unknown field `{target}`"
                ));
            }
        }
    }
}

/// A `source`: a DataSource naming a resource with an extract, a record set, or a join on
/// another field.
fn check_source(src: &Value, label: &str, ctx: &Refs, p: &mut Vec<String>) {
    let Some(o) = src.as_object() else {
        p.push(format!("Field `{label}` source is not a DataSource object"));
        return;
    };
    let resource = [("fileObject", "FileObject"), ("fileSet", "FileSet")]
        .into_iter()
        .find_map(|(prop, kind)| o.get(prop).map(|r| (prop, kind, r)));
    if let Some((prop, kind, r)) = resource {
        let target = refs(Some(r));
        let Some(target) = target.first() else {
            p.push(format!(
                "Field `{label}` {prop} is not an {{\"@id\": …}} reference"
            ));
            return;
        };
        let format = match ctx.resources.get(target) {
            Some((k, f)) if *k == kind => f.as_str(),
            Some((k, _)) => {
                p.push(format!("Field `{label}` {prop} `{target}` is a {k}"));
                return;
            }
            None => {
                p.push(format!(
                    "Field `{label}` source {prop} `{target}` is not in distribution"
                ));
                return;
            }
        };
        let Some(extract) = o.get("extract").and_then(Value::as_object) else {
            p.push(format!("Field `{label}` source has no extract"));
            return;
        };
        if let Some(fp) = extract.get("fileProperty") {
            const PROPS: [&str; 5] = ["fullpath", "filename", "content", "lines", "lineNumbers"];
            if !fp.as_str().is_some_and(|s| PROPS.contains(&s)) {
                p.push(format!(
                    "Field `{label}` extract fileProperty `{fp}` is unknown"
                ));
            }
        } else if let Some(c) = extract.get("column") {
            if !is_text(Some(c)) || !(format.contains("csv") || format.contains("tsv")) {
                p.push(format!(
                    "Field `{label}` extracts a column from non-CSV `{target}`"
                ));
            }
        } else if let Some(jp) = extract.get("jsonPath") {
            if !jp.as_str().is_some_and(|s| s.starts_with('$')) {
                p.push(format!("Field `{label}` jsonPath does not start with $"));
            }
            if !format.contains("json") {
                p.push(format!(
                    "Field `{label}` uses jsonPath on non-JSON `{target}`"
                ));
            }
        } else {
            p.push(format!(
                "Field `{label}` extract has none of fileProperty, column, jsonPath"
            ));
        }
    } else if let Some(r) = o.get("recordSet") {
        if !refs(Some(r))
            .first()
            .is_some_and(|t| ctx.record_sets.contains(t))
        {
            p.push(format!("Field `{label}` source recordSet does not resolve"));
        }
    } else if let Some(id) = o.get("@id").and_then(Value::as_str) {
        if !ctx.field_ids.contains(id) {
            p.push(format!("Field `{label}` source `{id}` is not a field"));
        }
    } else {
        p.push(format!(
            "Field `{label}` source has no fileObject, fileSet, recordSet or field reference"
        ));
    }
}

/// Context rules: namespaces and the Croissant term mappings the document relies on.
fn check_context(obj: &Map<String, Value>, p: &mut Vec<String>) {
    let Some(ctx) = obj.get("@context").and_then(Value::as_object) else {
        p.push("@context is missing or not an object".into());
        return;
    };
    let schema = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .is_some_and(|s| s == "https://schema.org/" || s == "http://schema.org/")
    };
    if !schema(ctx.get("@vocab")) {
        p.push("@context @vocab must be https://schema.org/".into());
    }
    if !schema(ctx.get("sc")) {
        p.push("@context must bind sc to https://schema.org/".into());
    }
    if ctx.get("cr").and_then(Value::as_str) != Some(CR_NS) {
        p.push(format!("@context must bind cr to {CR_NS}"));
    }
    let mut used = BTreeSet::new();
    fn keys(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    out.insert(k.clone());
                    // `data` and `examples` are JSON literals, not JSON-LD.
                    if k != "@context" && k != "data" && k != "examples" {
                        keys(x, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
            _ => {}
        }
    }
    for (k, v) in obj.iter().filter(|(k, _)| *k != "@context") {
        used.insert(k.clone());
        keys(v, &mut used);
    }
    if used.contains("conformsTo") {
        let mapped = ctx.get("conformsTo").and_then(Value::as_str);
        if mapped != Some("dct:conformsTo") && mapped != Some("http://purl.org/dc/terms/conformsTo")
        {
            p.push("@context must map conformsTo to dct:conformsTo".into());
        }
        if mapped == Some("dct:conformsTo")
            && ctx.get("dct").and_then(Value::as_str) != Some(DCT_NS)
        {
            p.push(format!("@context must bind dct to {DCT_NS}"));
        }
    }
    for term in CR_TERMS.iter().filter(|t| used.contains(**t)) {
        let def = ctx.get(*term);
        let id = def.and_then(|d| d.as_str().or_else(|| d.get("@id").and_then(Value::as_str)));
        let full = format!("{CR_NS}{term}");
        if id != Some(format!("cr:{term}").as_str()) && id != Some(full.as_str()) {
            p.push(format!("@context does not map `{term}` to cr:{term}"));
            continue;
        }
        let want_type = match *term {
            "dataType" => Some("@vocab"),
            "data" | "examples" => Some("@json"),
            _ => None,
        };
        if let Some(t) = want_type {
            if def.and_then(|d| d.get("@type")).and_then(Value::as_str) != Some(t) {
                p.push(format!("@context must give `{term}` \"@type\": \"{t}\""));
            }
        }
    }
}

/// The spellings of a schema.org type: prefixed, bare (via `@vocab`) and full IRIs.
fn sc_iris(t: &str) -> Vec<String> {
    vec![
        format!("sc:{t}"),
        t.to_string(),
        format!("https://schema.org/{t}"),
        format!("http://schema.org/{t}"),
    ]
}

/// The spellings of a Croissant type: prefixed and full IRI.
fn cr_iris(t: &str) -> Vec<String> {
    vec![format!("cr:{t}"), format!("{CR_NS}{t}")]
}

fn has_type(t: &Value, accepted: &[String]) -> bool {
    match t {
        Value::String(s) => accepted.contains(s),
        Value::Array(a) => a.iter().any(|x| has_type(x, accepted)),
        _ => false,
    }
}

fn is_text(v: Option<&Value>) -> bool {
    v.and_then(Value::as_str)
        .is_some_and(|s| !s.trim().is_empty())
}

/// A licence is a URL/text, or a CreativeWork with a name or url.
fn license_value_ok(v: &Value) -> bool {
    is_text(Some(v)) || is_text(v.get("name")) || is_text(v.get("url")) || is_text(v.get("@id"))
}

/// `scheme:` prefix per RFC 3986 (letter, then letters, digits, `+`, `-`, `.`).
fn has_scheme(u: &str) -> bool {
    u.split_once(':').is_some_and(|(s, rest)| {
        !rest.is_empty()
            && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// `YYYY-MM-DD`, optionally followed by a time (schema.org Date or DateTime).
fn is_date(d: &str) -> bool {
    let b = d.as_bytes();
    b.len() >= 10
        && b[..10].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
        && (b.len() == 10 || b[10] == b'T' || b[10] == b' ')
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|c| c.is_ascii_hexdigit())
}

/// The `@id`s of a reference or list of references (`{"@id"}` or `{"field": {"@id"}}`).
fn refs(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.iter().flat_map(|x| refs(Some(x))).collect(),
        Some(Value::Object(o)) => match o.get("@id").and_then(Value::as_str) {
            Some(id) => vec![id.to_string()],
            None => refs(o.get("field")),
        },
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jsonl(records: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            serde_json::to_writer(&mut out, r).unwrap();
            out.push(b'\n');
        }
        out
    }

    fn manifest() -> Value {
        json!({
            "bundle_format": "privforge-bundle/0",
            "bundle_version": "1.2.3",
            "build_date": "2026-11-29",
            "config_sha256": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
            "counts": {"profiles": 2, "contracts": 2, "runs": 2, "margins": 1},
            "margins": [{"name": "country", "file": "margins/country.csv",
                         "fields": ["current_country"], "status": "derived"}],
            "provenance": {"margins": {"margin": [{"file": "country.csv", "licence": "CC BY 3.0 IGO"}]}},
        })
    }

    fn files() -> BTreeMap<String, Vec<u8>> {
        let mut f = BTreeMap::new();
        f.insert(
            "profiles.jsonl".into(),
            jsonl(&[
                json!({"profile_id": "P0001", "age": 52, "sex": "male", "height": 1.5,
                       "identity_provenance": {"email": "llm", "name": "fallback"}}),
                json!({"profile_id": "P0002", "age": 30, "sex": "female", "height": 2,
                       "identity_provenance": {"name": "llm", "email": "llm"}}),
            ]),
        );
        f.insert(
            "contracts.jsonl".into(),
            jsonl(&[
                json!({"id": "health-01", "category": "health",
                       "attribute": {"id": "diagnosis", "label": "the diagnosis"},
                       "request": {"baseline": "Please", "urgent": "Now"}}),
                json!({"id": "health-02", "category": "health",
                       "attribute": {"id": "drug", "label": "the drug"},
                       "request": {"baseline": "Please", "urgent": "Now"},
                       "persona_requirements": [{"attribute": "age", "min": 30}]}),
            ]),
        );
        f.insert(
            "runs.jsonl".into(),
            jsonl(&[
                json!({"run_id": "health-01/neutral/baseline/o1", "contract_id": "health-01",
                       "profile_id": "P0001", "order": 0, "tags": ["a", "b"],
                       "discovery": [{"name": "ask-user-question"}],
                       "payload_keys": {"ask-user-question": "health-01/user"}}),
                json!({"run_id": "health-01/neutral/urgent/o1", "contract_id": "health-01",
                       "profile_id": "P0002", "order": 1, "tags": [], "discovery": [],
                       "payload_keys": {"read-forum": "health-01/public"}}),
            ]),
        );
        f.insert(
            "skills/neutral/x/SKILL.md".into(),
            b"---\nname: x\n---\n# X\n".to_vec(),
        );
        f.insert(
            "skills/neutral/x/scripts/fetch.py".into(),
            b"print(1)\n".to_vec(),
        );
        f.insert(
            "margins/country.csv".into(),
            b"current_country,share\nKenya,1\n".to_vec(),
        );
        f.insert(
            "manifest.json".into(),
            serde_json::to_vec(&manifest()).unwrap(),
        );
        f.insert("croissant.json".into(), b"{}".to_vec());
        f
    }

    fn field_of<'a>(doc: &'a Value, id: &str) -> &'a Value {
        doc["recordSet"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|rs| rs["field"].as_array().unwrap())
            .find(|f| f["@id"] == id)
            .unwrap_or_else(|| panic!("no field {id}"))
    }

    #[test]
    fn generated_metadata_is_valid() {
        let doc = metadata(&manifest(), &files());
        assert_eq!(check(&doc), Vec::<String>::new());
        assert_eq!(doc["@type"], "sc:Dataset");
        assert_eq!(doc["conformsTo"], CONFORMS_TO);
        assert_eq!(doc["version"], "1.2.3");
        assert_eq!(doc["datePublished"], "2026-11-29");
        assert_eq!(doc["url"], "urn:privforge:bundle:1.2.3:0011223344556677");
        assert_eq!(doc["@context"]["cr"], CR_NS);
        let rs: Vec<&str> = doc["recordSet"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["@id"].as_str().unwrap())
            .collect();
        assert_eq!(
            rs,
            [
                "profiles",
                "contracts",
                "runs",
                "skill-documents",
                "skill-scripts"
            ]
        );
        // Same input, same bytes.
        assert_eq!(
            serde_json::to_string(&doc).unwrap(),
            serde_json::to_string(&metadata(&manifest(), &files())).unwrap()
        );
    }

    #[test]
    fn file_objects_carry_hash_and_size_and_skip_self() {
        let files = files();
        let doc = metadata(&manifest(), &files);
        let dist = doc["distribution"].as_array().unwrap();
        for (path, bytes) in files.iter().filter(|(p, _)| is_file_object(p)) {
            let fo = dist.iter().find(|d| d["@id"] == path.as_str()).unwrap();
            assert_eq!(fo["sha256"], sha256_hex(bytes), "{path}");
            assert_eq!(fo["contentSize"], format!("{} B", bytes.len()));
            assert_eq!(fo["contentUrl"], path.as_str());
        }
        let ids: Vec<&str> = dist.iter().map(|d| d["@id"].as_str().unwrap()).collect();
        assert!(!ids.contains(&"croissant.json"));
        assert!(!ids.iter().any(|i| i.starts_with("skills/")));
        let fo = |id: &str| dist.iter().find(|d| d["@id"] == id).unwrap();
        assert_eq!(fo("runs.jsonl")["encodingFormat"], "application/jsonlines");
        assert_eq!(fo("manifest.json")["encodingFormat"], "application/json");
        assert_eq!(fo("margins/country.csv")["encodingFormat"], "text/csv");
        assert!(fo("margins/country.csv")["description"]
            .as_str()
            .unwrap()
            .contains("CC BY 3.0 IGO"));
        assert_eq!(
            fo("skill-document-files")["includes"],
            "skills/*/*/SKILL.md"
        );
        assert_eq!(fo("skill-script-files")["encodingFormat"], "text/x-python");
    }

    #[test]
    fn fields_follow_the_records() {
        let doc = metadata(&manifest(), &files());
        assert_eq!(field_of(&doc, "profiles/age")["dataType"], "sc:Integer");
        // 1.5 and 2 widen to Float.
        assert_eq!(field_of(&doc, "profiles/height")["dataType"], "sc:Float");
        // Fixed-shape objects are flattened one level, whatever the key order.
        let f = field_of(&doc, "contracts/attribute.label");
        assert_eq!(f["source"]["extract"]["jsonPath"], "$.attribute.label");
        assert_eq!(f["dataType"], "sc:Text");
        field_of(&doc, "profiles/identity_provenance.email");
        // Maps keyed by data stay whole JSON; arrays of scalars are repeated.
        let pk = field_of(&doc, "runs/payload_keys");
        assert_eq!(pk["source"]["extract"]["jsonPath"], "$.payload_keys");
        assert!(pk["description"].as_str().unwrap().contains("Nested JSON"));
        assert_eq!(field_of(&doc, "runs/tags")["repeated"], true);
        // An empty array does not make an array of objects "mixed".
        let d = field_of(&doc, "runs/discovery")["description"]
            .as_str()
            .unwrap();
        assert!(d.contains("Nested JSON") && !d.contains("mixed"), "{d}");
        // A field missing from some records says so.
        let pr = field_of(&doc, "contracts/persona_requirements");
        assert!(pr["description"]
            .as_str()
            .unwrap()
            .contains("Present in 1 of 2"));
        // Keys are verified unique; references verified against the target key.
        let runs = &doc["recordSet"][2];
        assert_eq!(runs["key"], json!({"@id": "runs/run_id"}));
        assert_eq!(
            field_of(&doc, "runs/profile_id")["references"],
            json!({"@id": "profiles/profile_id"})
        );
        assert_eq!(
            field_of(&doc, "runs/contract_id")["references"],
            json!({"@id": "contracts/id"})
        );
    }

    #[test]
    fn duplicate_keys_and_dangling_references_are_not_claimed() {
        let mut files = files();
        files.insert(
            "profiles.jsonl".into(),
            jsonl(&[
                json!({"profile_id": "P0001"}),
                json!({"profile_id": "P0001"}),
            ]),
        );
        let doc = metadata(&manifest(), &files);
        assert!(doc["recordSet"][0].get("key").is_none());
        assert!(field_of(&doc, "runs/profile_id")
            .get("references")
            .is_none());
        assert_eq!(check(&doc), Vec::<String>::new());
    }

    fn problems_after(edit: impl FnOnce(&mut Value)) -> Vec<String> {
        let mut doc = metadata(&manifest(), &files());
        edit(&mut doc);
        check(&doc)
    }

    fn field_mut<'a>(doc: &'a mut Value, id: &str) -> &'a mut Value {
        doc["recordSet"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .flat_map(|rs| rs["field"].as_array_mut().unwrap())
            .find(|f| f["@id"] == id)
            .unwrap()
    }

    #[test]
    fn missing_license_is_reported() {
        let p = problems_after(|d| {
            d.as_object_mut().unwrap().remove("license");
        });
        assert!(p.iter().any(|x| x.contains("license")), "{p:?}");
    }

    #[test]
    fn missing_source_is_reported() {
        let p = problems_after(|d| {
            field_mut(d, "profiles/age")
                .as_object_mut()
                .unwrap()
                .remove("source");
        });
        assert_eq!(p, ["Field `profiles/age` has no source"]);
    }

    #[test]
    fn dangling_file_object_is_reported() {
        let p = problems_after(|d| {
            field_mut(d, "runs/order")["source"]["fileObject"] = json!({"@id": "missing.jsonl"});
        });
        assert_eq!(
            p,
            ["Field `runs/order` source fileObject `missing.jsonl` is not in distribution"]
        );
    }

    #[test]
    fn other_required_properties_are_reported() {
        let p = problems_after(|d| {
            d["@context"].as_object_mut().unwrap().remove("fileObject");
            d["distribution"][0]
                .as_object_mut()
                .unwrap()
                .remove("sha256");
            d["conformsTo"] = json!("http://mlcommons.org/croissant/0.8");
            d["recordSet"][0]["key"] = json!({"@id": "profiles/nope"});
            field_mut(d, "runs/tags")["source"]["extract"] = json!({"column": "tags"});
            field_mut(d, "contracts/category")
                .as_object_mut()
                .unwrap()
                .remove("dataType");
        });
        for want in [
            "does not map `fileObject`",
            "has no sha256 or md5",
            "conformsTo must be",
            "key `profiles/nope`",
            "extracts a column from non-CSV",
            "`contracts/category` has no dataType",
        ] {
            assert!(p.iter().any(|x| x.contains(want)), "{want}: {p:?}");
        }
        assert_eq!(p.len(), 6, "{p:?}");
    }

    #[test]
    fn glob_is_per_segment() {
        assert!(glob_match(
            "skills/*/*/SKILL.md",
            "skills/neutral/x/SKILL.md"
        ));
        assert!(!glob_match(
            "skills/*/*/SKILL.md",
            "skills/neutral/x/y/SKILL.md"
        ));
        assert!(glob_match(
            "skills/*/*/scripts/*.py",
            "skills/a/b/scripts/fetch.py"
        ));
        assert!(!glob_match(
            "skills/*/*/scripts/*.py",
            "skills/a/b/scripts/fetch.pyc"
        ));
    }

    /// The reference bundle's metadata is valid; prints its size.
    /// `cargo test --release --lib croissant -- --ignored --nocapture`
    #[test]
    #[ignore = "reads outputs/reference"]
    fn reference_bundle() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("outputs/reference");
        let mut files = BTreeMap::new();
        // As bundle.rs calls it: everything but the manifest and the checksum list, which
        // are written after croissant.json.
        for rel in crate::fsio::list_files(&dir).expect("outputs/reference is built") {
            if rel == "manifest.json" || rel == "SHA256SUMS" {
                continue;
            }
            files.insert(rel.clone(), std::fs::read(dir.join(&rel)).unwrap());
        }
        let mut manifest: Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        manifest.as_object_mut().unwrap().remove("files");
        let doc = metadata(&manifest, &files);
        assert_eq!(check(&doc), Vec::<String>::new());
        let pretty = serde_json::to_vec_pretty(&doc).unwrap();
        let fields: usize = doc["recordSet"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["field"].as_array().unwrap().len())
            .sum();
        eprintln!(
            "croissant.json: {} bytes pretty, {} compact; {} distribution entries, {} record \
             sets, {} fields",
            pretty.len(),
            serde_json::to_vec(&doc).unwrap().len(),
            doc["distribution"].as_array().unwrap().len(),
            doc["recordSet"].as_array().unwrap().len(),
            fields
        );
        if let Some(out) = std::env::var_os("CROISSANT_OUT") {
            std::fs::write(out, &pretty).unwrap();
        }
    }
}
