//! `DATA_CARD.md`: the bundle described the way dataset reviewers expect, rendered from the
//! manifest alone.
//!
//! Every figure comes from the manifest, so the card can never disagree with the bundle it
//! ships in. Sections that a build did not produce (identity completion off, no contract
//! review, no LLM) render a sentence instead of a table; nothing here panics on a missing or
//! null field. JSON objects are walked in their stored order (`preserve_order`), so the same
//! manifest always renders the same bytes.

use serde_json::Value;

/// Shown in a cell whose value the manifest does not carry.
const DASH: &str = "—";

/// A field whose fallback share exceeds this gets its own limitation bullet.
const HIGH_FALLBACK_SHARE: f64 = 0.2;

/// Models below this many parameters are called small in the limitations.
const SMALL_MODEL_PARAMS: f64 = 1e9;

/// Returned by [`at`] for a missing path, so callers never deal with `Option`.
static NULL: Value = Value::Null;

/// The data card of the bundle whose manifest (without its files listing) is `manifest`.
pub fn render(manifest: &Value) -> String {
    let mut doc = Doc::default();
    summary(&mut doc, manifest);
    composition(&mut doc, manifest);
    stages(&mut doc, manifest);
    models(&mut doc, manifest);
    provenance(&mut doc, manifest);
    calibration(&mut doc, manifest);
    field_provenance(&mut doc, manifest);
    votes(&mut doc, manifest);
    gates_and_exposure(&mut doc, manifest);
    limitations(&mut doc, manifest);
    intended_use(&mut doc);
    doc.finish()
}

// ---------------------------------------------------------------------------------------------
// Markdown building blocks

/// A Markdown document built block by block; every block ends with one blank line.
#[derive(Default)]
struct Doc(String);

impl Doc {
    fn heading(&mut self, level: usize, text: &str) {
        self.0.push_str(&"#".repeat(level));
        self.0.push(' ');
        self.0.push_str(text);
        self.0.push_str("\n\n");
    }

    fn para(&mut self, text: &str) {
        self.0.push_str(text.trim_end());
        self.0.push_str("\n\n");
    }

    fn list(&mut self, items: &[String]) {
        if items.is_empty() {
            return;
        }
        for item in items {
            self.0.push_str("- ");
            self.0.push_str(item);
            self.0.push('\n');
        }
        self.0.push('\n');
    }

    fn table(&mut self, headers: &[&str], rows: &[Vec<String>]) {
        self.0.push_str(&table(headers, rows));
        self.0.push('\n');
    }

    /// The document with exactly one trailing newline.
    fn finish(self) -> String {
        format!("{}\n", self.0.trim_end())
    }
}

/// Makes `s` safe inside a table cell: a `|` would end the cell, a newline the row.
fn esc(s: &str) -> String {
    s.replace("\r\n", " ")
        .replace(['\n', '\r'], " ")
        .replace('|', "\\|")
}

/// A Markdown table; cells are escaped, short rows padded, and an empty table is a sentence.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        return "_None recorded._\n".to_string();
    }
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut s = line(headers.iter().map(|h| esc(h)).collect());
    s.push_str(&line(vec!["---".to_string(); headers.len()]));
    for row in rows {
        s.push_str(&line(
            (0..headers.len())
                .map(|i| row.get(i).map_or_else(|| DASH.to_string(), |c| esc(c)))
                .collect(),
        ));
    }
    s
}

/// Inline code for identifiers and file names; plain text when the value has a backtick.
fn code(s: &str) -> String {
    if s.is_empty() {
        DASH.to_string()
    } else if s.contains('`') {
        s.to_string()
    } else {
        format!("`{s}`")
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the manifest without panics

/// The value at `path`, or null when any step is missing.
fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    path.iter()
        .try_fold(v, |cur, key| cur.get(key))
        .unwrap_or(&NULL)
}

/// The members of an object in stored order; nothing for any other value.
fn entries(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.as_object().into_iter().flatten()
}

/// The elements of an array; nothing for any other value.
fn items(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

fn as_str(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn as_f64(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Whether an optional stage section is present (absent, null and `false` mean off).
fn present(v: &Value) -> bool {
    !(v.is_null() || v == &Value::Bool(false))
}

// ---------------------------------------------------------------------------------------------
// Number formatting

/// An integer with thousands separators.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count with thousands separators, or a dash when it is not a non-negative integer.
fn int(v: &Value) -> String {
    match v.as_u64() {
        Some(n) => grouped(n),
        None => match v.as_i64() {
            Some(n) => format!("-{}", grouped(n.unsigned_abs())),
            None => DASH.to_string(),
        },
    }
}

/// A non-integer figure such as an effective sample size, rounded and grouped.
fn rounded(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x >= 0.0 && x.is_finite() => grouped(x.round() as u64),
        _ => dec(v, 0),
    }
}

/// A count with the singular or plural noun, e.g. `1 task`, `3 tasks`.
fn plural(v: &Value, one: &str, many: &str) -> String {
    let word = if v.as_u64() == Some(1) { one } else { many };
    format!("{} {word}", int(v))
}

/// A number with `places` decimals, or a dash.
fn dec(v: &Value, places: usize) -> String {
    v.as_f64()
        .map(|x| format!("{x:.places$}"))
        .unwrap_or_else(|| DASH.to_string())
}

/// L1 distances are shown with four decimals throughout.
fn l1(v: &Value) -> String {
    dec(v, 4)
}

/// A share as a percentage with one decimal.
fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1}%", 100.0 * part / whole)
    } else {
        DASH.to_string()
    }
}

/// A count with its share of `whole`, e.g. `790 (79.0%)`.
fn count_pct(v: &Value, whole: f64) -> String {
    match v.as_f64() {
        Some(n) if whole > 0.0 => format!("{} ({})", int(v), pct(n, whole)),
        _ => int(v),
    }
}

/// A parameter such as a temperature stored as f32: at most three decimals, no trailing zeros
/// (0.699999988079071 reads as 0.7).
fn short(v: &Value) -> String {
    match v.as_f64() {
        Some(x) => {
            let s = format!("{x:.3}");
            let s = s.trim_end_matches('0').trim_end_matches('.');
            if s == "-0" {
                "0".to_string()
            } else {
                s.to_string()
            }
        }
        None => DASH.to_string(),
    }
}

/// Any scalar as text; arrays are joined; null is a dash.
fn text(v: &Value) -> String {
    match v {
        Value::Null => DASH.to_string(),
        Value::String(s) if s.is_empty() => DASH.to_string(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => yes_no(*b).to_string(),
        Value::Number(_) => {
            if v.is_u64() || v.is_i64() {
                int(v)
            } else {
                short(v)
            }
        }
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(", "),
        Value::Object(_) => v.to_string(),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// `key count` pairs of a counter object, e.g. `health 1, ordinary 5`.
fn counter(v: &Value) -> String {
    let parts: Vec<String> = entries(v).map(|(k, n)| format!("{k} {}", int(n))).collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// The sum of the numeric values of a counter object.
fn counter_total(v: &Value) -> u64 {
    entries(v).filter_map(|(_, n)| n.as_u64()).sum()
}

// ---------------------------------------------------------------------------------------------
// 1. Title and summary

fn summary(doc: &mut Doc, m: &Value) {
    let version = text(&m["bundle_version"]);
    doc.heading(1, &format!("Data card: PrivForge bundle {version}"));
    let frame = as_str(at(m, &["provenance", "margins", "frame"]));
    let frame = if frame.is_empty() {
        String::new()
    } else {
        format!(" (frame: {frame})")
    };
    let generator = format!(
        "{} {}",
        text(at(m, &["generator", "name"])),
        text(at(m, &["generator", "version"]))
    );
    doc.para(&format!(
        "This bundle is a privacy benchmark. It pairs {profiles} synthetic adult profiles, \
         whose seed attributes are calibrated to {margins} population margins{frame}, with \
         {contracts} source-selection tasks: in each task an agent must obtain one personal \
         attribute of a persona and can ask the user, consult a public source or open a \
         confidential account. The tasks are expanded into {runs} runs over guidance, pressure \
         and Discovery-order conditions. Bundle format {format}, bundle version {version}, \
         built on {date} from seed {seed} by {generator}. Every figure below is read from the \
         bundle's `manifest.json`.",
        profiles = int(at(m, &["counts", "profiles"])),
        margins = int(at(m, &["counts", "margins"])),
        contracts = int(at(m, &["counts", "contracts"])),
        runs = int(at(m, &["counts", "runs"])),
        format = code(as_str(&m["bundle_format"])),
        date = text(&m["build_date"]),
        seed = text_plain(&m["seed"]),
    ));
    let gates = match at(m, &["gates", "passed"]).as_bool() {
        Some(b) => yes_no(b).to_string(),
        None => DASH.to_string(),
    };
    doc.table(
        &["Property", "Value"],
        &[
            vec!["Bundle format".into(), code(as_str(&m["bundle_format"]))],
            vec!["Bundle version".into(), version.clone()],
            vec!["Build date".into(), text(&m["build_date"])],
            vec!["Seed".into(), text_plain(&m["seed"])],
            vec!["Generator".into(), generator],
            vec!["Config sha256".into(), code(as_str(&m["config_sha256"]))],
            vec!["All coherence gates passed".into(), gates],
        ],
    );
}

/// Seeds and similar identifiers: digits without separators.
fn text_plain(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        _ => text(v),
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Composition and counts

/// What each entry of `counts` is, in the order the card lists them.
const COUNT_LABELS: &[(&str, &str)] = &[
    ("profiles", "Synthetic profiles"),
    ("candidates", "Candidates in the calibrated pool"),
    ("margins", "Population margins fitted"),
    ("contracts", "Task contracts"),
    ("votes", "Reviewer votes"),
    ("categories", "Sensitive-data categories"),
    ("skills", "Agent Skills"),
    (
        "skill_folders",
        "Skill folders (skills × guidance conditions)",
    ),
    ("personas", "Personas (profiles bound to tasks)"),
    ("payloads", "Environment payloads"),
    ("runs", "Runs"),
];

fn composition(doc: &mut Doc, m: &Value) {
    doc.heading(2, "Composition and counts");
    let counts = &m["counts"];
    let mut rows: Vec<Vec<String>> = COUNT_LABELS
        .iter()
        .map(|(key, label)| vec![label.to_string(), int(&counts[*key])])
        .collect();
    for (key, v) in entries(counts) {
        if !COUNT_LABELS.iter().any(|(k, _)| k == key) {
            rows.push(vec![key.clone(), text(v)]);
        }
    }
    doc.table(&["Item", "Count"], &rows);

    let runs = &m["runs"];
    let total = as_f64(at(m, &["counts", "runs"]));
    for (key, title, column) in [
        ("per_category", "Runs per category", "Category"),
        ("per_guidance", "Runs per guidance condition", "Guidance"),
        ("per_pressure", "Runs per pressure condition", "Pressure"),
    ] {
        doc.heading(3, title);
        let rows: Vec<Vec<String>> = entries(&runs[key])
            .map(|(k, n)| vec![code(k), int(n), pct(as_f64(n), total)])
            .collect();
        doc.table(&[column, "Runs", "Share"], &rows);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Stages

fn stages(doc: &mut Doc, m: &Value) {
    doc.heading(2, "How each stage produced its content");
    let cfg = &m["config"];
    let counts = &m["counts"];
    let cal = &m["calibration"];
    let mut b = Vec::new();

    b.push(format!(
        "**Candidates.** Seed profiles are drawn from a λ-mixture proposal, \
         λ·target + (1−λ)·uniform with λ = {lambda}, so most candidates follow the target \
         distributions while the rest explore rare combinations; duplicates are dropped \
         (at most {factor} draws per requested candidate). Configured base pool: {base}; \
         pool after up to {backfill} rounds of targeted backfill for thin cells: {pool}.",
        lambda = short(at(cfg, &["population", "lambda"])),
        factor = int(at(cfg, &["population", "attempts_factor"])),
        base = int(at(cfg, &["population", "candidates"])),
        backfill = int(at(cfg, &["ipf", "backfill_rounds"])),
        pool = int(&counts["candidates"]),
    ));

    let converged = match (cal["max_l1"].as_f64(), cal["tolerance"].as_f64()) {
        (Some(x), Some(t)) if x <= t => "within the tolerance",
        (Some(_), Some(_)) => "above the tolerance",
        _ => "against the tolerance",
    };
    b.push(format!(
        "**Calibration.** Iterative proportional fitting (IPF) weights the pool to all \
         {margins} margins. It stopped after {sweeps} sweeps (limit {max_sweeps}) with a \
         largest per-margin L1 of {max_l1}, {converged} of {tol}; effective sample size of the \
         weighted pool: {ess}.",
        margins = int(&counts["margins"]),
        sweeps = int(&cal["ipf_sweeps"]),
        max_sweeps = int(at(cfg, &["ipf", "max_sweeps"])),
        max_l1 = l1(&cal["max_l1"]),
        tol = short(&cal["tolerance"]),
        ess = rounded(&cal["effective_sample_size"]),
    ));

    b.push(format!(
        "**Sampling.** {n} profiles are drawn without replacement in proportion to the \
         weights; the best of {trials} weighted draws is refined by up to {swaps} proposed \
         swaps. Total L1 over all margins before the seed audit: {before} (a single plain \
         draw: {plain}; the rounding floor: {floor}).",
        n = int(&counts["profiles"]),
        trials = int(at(cfg, &["sampling", "trials"])),
        swaps = int(at(cfg, &["sampling", "swap_iterations"])),
        before = l1(&cal["sample_total_l1_before_audit"]),
        plain = l1(&cal["plain_draw_total_l1"]),
        floor = l1(&cal["floor_total_l1"]),
    ));

    let audit = &m["seed_audit"];
    if present(audit) {
        let rule = counter_total(&audit["rule_rejections"]);
        let llm = counter_total(&audit["llm_rejections"]);
        b.push(format!(
            "**Seed audit** (mode {mode}). Deterministic rules and an LLM reviewer check \
             profiles for contradictions; rejected ones are replaced and the replacements \
             audited too. {audited} profiles audited over {rounds} rounds; rejected by rule: \
             {rule} ({rule_kinds}); rejected by the LLM: {llm} ({llm_kinds}); accepted by the \
             LLM: {accepted}. Total L1 after replacement: {after}.",
            mode = code(as_str(&audit["mode"])),
            audited = int(&audit["audited"]),
            rounds = int(&audit["rounds"]),
            rule = grouped(rule),
            rule_kinds = counter(&audit["rule_rejections"]),
            llm = grouped(llm),
            llm_kinds = counter(&audit["llm_rejections"]),
            accepted = int(&audit["llm_accepted"]),
            after = l1(&audit["sample_total_l1_after_replacement"]),
        ));
    } else {
        b.push("**Seed audit.** Off for this build: the sampled profiles were not audited.".into());
    }

    let ident = &m["identity"];
    if present(ident) {
        b.push(format!(
            "**Identity completion.** An LLM proposed a name, email, phone number and \
             government identifier for each of {n} profiles; deterministic validators checked \
             every field; a failing field was sent back for repair (repair rounds run: {rounds}, \
             configured maximum {max}) and otherwise replaced by a value valid by \
             construction. The LLM audit of government identifiers ran {req} requests and \
             accepted {acc}. Per-field rates are under \"Field provenance\".",
            n = int(&ident["profiles"]),
            rounds = int(&ident["repair_rounds"]),
            max = int(at(cfg, &["identity", "max_repair_rounds"])),
            req = int(&ident["govid_audit_requests"]),
            acc = int(&ident["govid_audit_accepted"]),
        ));
    } else {
        b.push(
            "**Identity completion.** Off for this build: no LLM-generated identities; \
             personas use deterministic identities that are valid by construction."
                .into(),
        );
    }

    let contracts = &m["contracts"];
    let report = &contracts["report"];
    if contracts["reviewed"].as_bool().unwrap_or(false) && present(report) {
        b.push(format!(
            "**Contract review.** {curated} curated contracts (plus {gen_req} generation \
             slots requested, {gen_kept} generated contracts kept) were voted on by the \
             reviewer personas and combined by the {agg} rule over up to {rounds} rounds: \
             {votes} votes, {rewrites} rewrites, {discarded} discarded. Outcomes are under \
             \"Vote outcomes\".",
            curated = int(&report["curated"]),
            gen_req = int(&report["generated_requested"]),
            gen_kept = int(&report["generated_kept"]),
            agg = code(as_str(&report["aggregation"])),
            rounds = int(&report["max_review_rounds"]),
            votes = int(&report["votes"]),
            rewrites = int(&report["rewrites"]),
            discarded = int(&report["discarded"]),
        ));
    } else {
        b.push("**Contract review.** Off for this build: the contracts were not voted on.".into());
    }

    let val = at(contracts, &["validation"]);
    b.push(format!(
        "**Policy validation.** The final set of {n} contracts ({curated} curated, {generated} \
         generated) covering {cats} categories and {domains} domains was checked against the \
         {guid} guidance and {press} pressure conditions it is shown under.",
        n = int(&val["contracts"]),
        curated = int(&val["curated"]),
        generated = int(&val["generated"]),
        cats = int(&val["categories"]),
        domains = int(&val["domains"]),
        guid = int(&val["guidance_conditions"]),
        press = int(&val["pressure_conditions"]),
    ));

    let bind = &m["binding"];
    b.push(format!(
        "**Persona binding.** {contracts} contracts were bound to {personas} personas \
         (at most {max} per persona; {spread}). {req} contracts carry persona requirements; \
         the tightest had {min}; relaxed bindings: {relaxed}.",
        contracts = int(&bind["contracts"]),
        personas = int(&bind["personas"]),
        max = plural(&bind["max_tasks_per_persona"], "task", "tasks"),
        spread = tasks_per_persona(&bind["tasks_per_persona"]),
        req = int(&bind["with_requirements"]),
        min = plural(
            &bind["min_compatible_profiles"],
            "compatible profile",
            "compatible profiles"
        ),
        relaxed = int(&bind["relaxed"]),
    ));

    let exposure = &m["exposure"];
    let field_sum = |f: &str| -> u64 { entries(exposure).filter_map(|(_, e)| e[f].as_u64()).sum() };
    b.push(format!(
        "**Data planning.** Each task's environments were filled from its persona's facts: \
         {payloads} payloads for {personas} persona worlds. Of {conf} confidential payloads, \
         {beyond} reveal persona attributes beyond the target and {sensitive} reveal another \
         sensitive category (see \"Exposure inventory\").",
        payloads = int(&counts["payloads"]),
        personas = int(&counts["personas"]),
        conf = grouped(field_sum("confidential_payloads")),
        beyond = grouped(field_sum("beyond_target")),
        sensitive = grouped(field_sum("sensitive_beyond_target")),
    ));

    b.push(format!(
        "**Skill rendering.** {skills} Agent Skills were rendered under each of {guid} \
         guidance conditions, giving {folders} skill folders, each with a `SKILL.md` and a \
         script that fetches its payload by key.",
        skills = int(&counts["skills"]),
        guid = entries(&m["runs"]["per_guidance"]).count(),
        folders = int(&counts["skill_folders"]),
    ));

    b.push(format!(
        "**Run matrix.** Contracts × guidance × pressure × the orders of the acquisition \
         skills at Discovery give {runs} runs. Runs per order: {orders}. Source type per \
         Discovery position: {positions}.",
        runs = int(&counts["runs"]),
        orders = labelled(&m["runs"]["per_order"], "order"),
        positions = positions(&m["runs"]["source_type_per_position"]),
    ));

    let results: Vec<&Value> = items(at(m, &["gates", "results"])).collect();
    let passed = results
        .iter()
        .filter(|r| r["passed"].as_bool() == Some(true))
        .count();
    let checked: u64 = results.iter().filter_map(|r| r["checked"].as_u64()).sum();
    b.push(format!(
        "**Coherence gates.** {passed} of {n} named checks passed over {checked} checked \
         items; a failing gate stops the build before any bundle is written.",
        n = results.len(),
        checked = grouped(checked),
    ));
    doc.list(&b);
}

/// `55 personas with 1 task` style summary of the binding's tasks-per-persona counter.
fn tasks_per_persona(v: &Value) -> String {
    let parts: Vec<String> = entries(v)
        .map(|(tasks, n)| {
            let tasks = plural(
                &Value::from(tasks.parse::<u64>().unwrap_or(0)),
                "task",
                "tasks",
            );
            format!("{} with {tasks}", plural(n, "persona", "personas"))
        })
        .collect();
    if parts.is_empty() {
        DASH.to_string()
    } else {
        parts.join(", ")
    }
}

/// `order 1: 660, order 2: 660, …` for a counter keyed by number.
fn labelled(v: &Value, label: &str) -> String {
    let parts: Vec<String> = entries(v)
        .map(|(k, n)| format!("{label} {k}: {}", int(n)))
        .collect();
    if parts.is_empty() {
        DASH.to_string()
    } else {
        parts.join(", ")
    }
}

/// `position 1: confidential 1,320, public 1,320, user 1,320; …`.
fn positions(v: &Value) -> String {
    let parts: Vec<String> = entries(v)
        .map(|(p, kinds)| format!("position {p}: {}", counter(kinds)))
        .collect();
    if parts.is_empty() {
        DASH.to_string()
    } else {
        parts.join("; ")
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Models and prompts

fn models(doc: &mut Doc, m: &Value) {
    doc.heading(2, "Models and prompts per stage");
    let llm_cfg = at(m, &["config", "llm"]);
    let llm = &m["llm"];
    let mode = as_str(&llm_cfg["mode"]);
    let how = match mode {
        "replay" => format!(
            "answers are read from the recorded transcript {}; no model runs during the build",
            code(as_str(&llm_cfg["transcript"]))
        ),
        "live" => "answers come from the configured OpenAI-compatible endpoints".to_string(),
        "embedded" => format!(
            "answers come from the in-process llama.cpp model {}",
            code(as_str(at(llm_cfg, &["embedded", "model_id"])))
        ),
        _ => "the mode is not recorded".to_string(),
    };
    doc.para(&format!("LLM mode: {} ({how}).", code(mode)));
    if present(llm) {
        doc.para(&format!(
            "Transcript sha256 (used answers, canonical key order): {}; answers used: {}.",
            code(as_str(&llm["transcript_sha256"])),
            int(&llm["responses"]),
        ));
    } else {
        doc.para("No LLM stage ran in this build, so there is no transcript.");
    }

    let rows: Vec<Vec<String>> = entries(&llm_cfg["stages"])
        .map(|(stage, s)| {
            let template = as_str(&s["template"]);
            let version = at(llm, &["prompts", template, "version"]);
            let template = match version.as_str() {
                Some(v) => format!("{} v{v}", code(template)),
                None => code(template),
            };
            let top_p = if s["top_p"].is_null() {
                "unset".to_string()
            } else {
                short(&s["top_p"])
            };
            vec![
                code(stage),
                code(as_str(&s["model"])),
                template,
                short(&s["temperature"]),
                top_p,
                int(&s["max_tokens"]),
                int(&s["batch_size"]),
            ]
        })
        .collect();
    doc.heading(3, "Stage settings");
    doc.table(
        &[
            "Stage",
            "Model",
            "Template",
            "Temperature",
            "top_p",
            "Max tokens",
            "Batch size",
        ],
        &rows,
    );

    if !present(llm) {
        return;
    }
    doc.heading(3, "Requests and tokens");
    let fields = [
        "requests",
        "prompt_tokens",
        "completion_tokens",
        "retries",
        "failures",
        "split_batches",
    ];
    let mut totals = [0u64; 6];
    let mut cost = 0.0;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (stage, s) in entries(&llm["stages"]) {
        let mut row = vec![code(stage)];
        for (i, f) in fields.iter().enumerate() {
            totals[i] += s[*f].as_u64().unwrap_or(0);
            row.push(int(&s[*f]));
        }
        cost += as_f64(&s["estimated_cost_usd"]);
        row.push(dec(&s["estimated_cost_usd"], 4));
        rows.push(row);
    }
    if !rows.is_empty() {
        let mut total = vec!["**Total**".to_string()];
        total.extend(totals.iter().map(|n| grouped(*n)));
        total.push(format!("{cost:.4}"));
        rows.push(total);
    }
    doc.table(
        &[
            "Stage",
            "Requests",
            "Prompt tokens",
            "Completion tokens",
            "Retries",
            "Failures",
            "Split batches",
            "Est. cost (USD)",
        ],
        &rows,
    );

    doc.heading(3, "Prompt templates");
    let mut rows = Vec::new();
    for (id, p) in entries(&llm["prompts"]) {
        for (file, sha) in entries(&p["sha256"]) {
            rows.push(vec![
                code(id),
                text(&p["version"]),
                code(file),
                code(as_str(sha)),
            ]);
        }
    }
    doc.table(&["Template", "Version", "File", "sha256"], &rows);
}

// ---------------------------------------------------------------------------------------------
// 5. Provenance and licences

/// The status cell of a margin; assumptions are flagged so they cannot be mistaken for data.
fn status_cell(status: &str) -> String {
    match status {
        "assumption" => "**assumption** (project estimate, not a published table)".to_string(),
        "" => DASH.to_string(),
        s => s.to_string(),
    }
}

/// `title (publisher, edition)` for every source of a margin.
fn sources_cell(sources: &Value) -> String {
    let parts: Vec<String> = items(sources)
        .map(|s| {
            let details: Vec<&str> = ["publisher", "edition"]
                .iter()
                .map(|k| as_str(&s[*k]))
                .filter(|x| !x.is_empty())
                .collect();
            let title = as_str(&s["title"]);
            let title = if title.is_empty() {
                as_str(&s["id"])
            } else {
                title
            };
            if details.is_empty() {
                title.to_string()
            } else {
                format!("{title} ({})", details.join(", "))
            }
        })
        .collect();
    if parts.is_empty() {
        DASH.to_string()
    } else {
        parts.join("; ")
    }
}

/// A provenance row: margin or table, file, status, licence, sources, derivation.
fn provenance_row(label: String, entry: &Value) -> Vec<String> {
    vec![
        label,
        code(as_str(&entry["file"])),
        status_cell(as_str(&entry["status"])),
        text(&entry["licence"]),
        sources_cell(&entry["sources"]),
        text(&entry["derivation"]),
    ]
}

/// The margins' provenance entries; the bare margin list when the full manifest is absent.
fn margin_entries(m: &Value) -> Vec<&Value> {
    let full: Vec<&Value> = items(at(m, &["provenance", "margins", "margin"])).collect();
    if full.is_empty() {
        items(&m["margins"]).collect()
    } else {
        full
    }
}

/// Auxiliary tables of the margins manifest (city catalog, age within group): every object
/// member other than the margin list that names a file.
fn auxiliary_entries(m: &Value) -> Vec<(&String, &Value)> {
    entries(at(m, &["provenance", "margins"]))
        .filter(|(k, v)| k.as_str() != "margin" && v.get("file").is_some())
        .collect()
}

fn provenance(doc: &mut Doc, m: &Value) {
    doc.heading(2, "Provenance and licences");
    let pm = at(m, &["provenance", "margins"]);
    let mut facts = Vec::new();
    if let Some(frame) = pm["frame"].as_str() {
        facts.push(format!("Population frame: {frame}."));
    }
    if !pm["reference_year"].is_null() {
        facts.push(format!(
            "Reference year: {}.",
            text_plain(&pm["reference_year"])
        ));
    }
    if let Some(g) = pm["generated_by"].as_str() {
        facts.push(format!("Margins manifest generated by: {}.", code(g)));
    }
    doc.list(&facts);

    let margins = margin_entries(m);
    let assumed: Vec<String> = margins
        .iter()
        .filter(|e| as_str(&e["status"]) == "assumption")
        .map(|e| code(as_str(&e["name"])))
        .collect();
    doc.heading(3, "Margins");
    doc.para(
        "Status `official` means the shares are read from a published table, `derived` that \
         they are computed from published tables with the stated derivation, and `assumption` \
         that they rest on the project's own estimates.",
    );
    if !assumed.is_empty() {
        doc.para(&format!(
            "**Assumptions:** {} of {} margins have status assumption: {}. Their shares are \
             plausible estimates, not measurements; treat results that depend on them with \
             care.",
            assumed.len(),
            margins.len(),
            assumed.join(", ")
        ));
    }
    let headers = [
        "Margin",
        "File",
        "Status",
        "Licence",
        "Sources",
        "Derivation",
    ];
    let rows: Vec<Vec<String>> = margins
        .iter()
        .map(|e| provenance_row(code(as_str(&e["name"])), e))
        .collect();
    doc.table(&headers, &rows);

    let aux = auxiliary_entries(m);
    if !aux.is_empty() {
        doc.heading(3, "Catalog and auxiliary tables");
        let rows: Vec<Vec<String>> = aux
            .iter()
            .map(|(key, e)| {
                let name = as_str(&e["name"]);
                let label = if name.is_empty() || name == key.as_str() {
                    code(key)
                } else {
                    format!("{} ({key})", code(name))
                };
                provenance_row(label, e)
            })
            .collect();
        let mut headers = headers;
        headers[0] = "Table";
        doc.table(&headers, &rows);
    }

    let stated: Vec<String> = margins
        .iter()
        .copied()
        .chain(aux.iter().map(|(_, e)| *e))
        .flat_map(|e| {
            let name = code(as_str(&e["name"]));
            items(&e["assumptions"])
                .map(move |a| format!("{name}: {}", text(a)))
                .collect::<Vec<_>>()
        })
        .collect();
    if !stated.is_empty() {
        doc.heading(3, "Stated assumptions");
        doc.list(&stated);
    }

    doc.heading(3, "Sources");
    let mut seen: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for e in margins.iter().copied().chain(aux.iter().map(|(_, e)| *e)) {
        for s in items(&e["sources"]) {
            let id = format!("{}{}", as_str(&s["id"]), as_str(&s["title"]));
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            rows.push(vec![
                code(as_str(&s["id"])),
                text(&s["title"]),
                text(&s["licence"]),
                text(&s["url"]),
                code(as_str(&s["extract"])),
                code(as_str(&s["sha256"])),
            ]);
        }
    }
    doc.table(
        &["Id", "Title", "Licence", "URL", "Extract", "Extract sha256"],
        &rows,
    );

    doc.heading(3, "Data files");
    let rows: Vec<Vec<String>> = items(at(m, &["provenance", "data_files"]))
        .map(|f| vec![code(as_str(&f["file"])), text(&f["provenance"])])
        .collect();
    doc.table(&["File", "Provenance"], &rows);
}

// ---------------------------------------------------------------------------------------------
// 6. Calibration

/// Margin names in manifest order, then any only the calibration figures mention.
fn margin_names(m: &Value) -> Vec<String> {
    let mut names: Vec<String> = items(&m["margins"])
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect();
    for (k, _) in entries(at(m, &["calibration", "sample_l1"])) {
        if !names.contains(k) {
            names.push(k.clone());
        }
    }
    names
}

fn calibration(doc: &mut Doc, m: &Value) {
    doc.heading(2, "Calibration results");
    let cal = &m["calibration"];
    if !present(cal) {
        doc.para("The manifest carries no calibration figures.");
        return;
    }
    doc.para(&format!(
        "L1 is the sum over a margin's cells of the absolute difference between achieved and \
         target shares. The floor is the smallest L1 any sample of {n} profiles can reach \
         given rounding; the plain draw is one weighted draw without refinement. The IPF-\
         weighted pool reached a largest L1 of {max} (tolerance {tol}).",
        n = int(at(m, &["counts", "profiles"])),
        max = l1(&cal["max_l1"]),
        tol = short(&cal["tolerance"]),
    ));
    let mut rows: Vec<Vec<String>> = margin_names(m)
        .iter()
        .map(|name| {
            let n = name.as_str();
            vec![
                code(n),
                l1(at(cal, &["sample_l1", n])),
                l1(at(cal, &["floor_l1", n])),
                l1(at(cal, &["plain_draw_l1", n])),
                l1(at(cal, &["sample_l1_before_audit", n])),
            ]
        })
        .collect();
    rows.push(vec![
        "**Total**".into(),
        l1(&cal["sample_total_l1"]),
        l1(&cal["floor_total_l1"]),
        l1(&cal["plain_draw_total_l1"]),
        l1(&cal["sample_total_l1_before_audit"]),
    ]);
    doc.table(
        &[
            "Margin",
            "Sample L1",
            "Floor L1",
            "Plain-draw L1",
            "Sample L1 before audit",
        ],
        &rows,
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Field provenance

/// Sentence used instead of the table when the identity stage did not run.
const IDENTITY_OFF: &str = "Identity completion was off for this build: the profiles carry no \
     LLM-generated names, emails, phone numbers or government identifiers, and the personas \
     bound to tasks use deterministic identities that are valid by construction.";

/// The number of profiles identity rates are shares of.
fn identity_base(m: &Value) -> f64 {
    m["identity"]["profiles"]
        .as_f64()
        .unwrap_or_else(|| as_f64(at(m, &["counts", "profiles"])))
}

fn field_provenance(doc: &mut Doc, m: &Value) {
    doc.heading(2, "Field provenance");
    let ident = &m["identity"];
    if !present(ident) {
        doc.para(IDENTITY_OFF);
        return;
    }
    let base = identity_base(m);
    doc.para(&format!(
        "How each identity field of the {} profiles was obtained: accepted from the LLM's \
         first answer, accepted after an LLM repair, or replaced by a fallback value valid by \
         construction. \"Failed first check\" counts first answers the validators rejected.",
        int(&ident["profiles"])
    ));
    let rows: Vec<Vec<String>> = entries(&ident["fields"])
        .map(|(field, r)| {
            vec![
                code(field),
                count_pct(&r["llm"], base),
                count_pct(&r["llm_repaired"], base),
                count_pct(&r["fallback"], base),
                count_pct(&r["initial_failures"], base),
                int(&r["repair_requests"]),
            ]
        })
        .collect();
    doc.table(
        &[
            "Field",
            "LLM",
            "LLM, repaired",
            "Fallback",
            "Failed first check",
            "Repair requests",
        ],
        &rows,
    );
    doc.para(&format!(
        "Government-identifier audit: {} identifiers reviewed, {} accepted; rejections: {}.",
        int(&ident["govid_audit_requests"]),
        int(&ident["govid_audit_accepted"]),
        counter(&ident["govid_audit_rejections"]),
    ));
}

// ---------------------------------------------------------------------------------------------
// 8. Vote outcomes

fn votes(doc: &mut Doc, m: &Value) {
    doc.heading(2, "Vote outcomes");
    let contracts = &m["contracts"];
    let report = &contracts["report"];
    if !contracts["reviewed"].as_bool().unwrap_or(false) || !present(report) {
        doc.para(
            "Contract review was off for this build: no reviewer votes were cast and the \
             contracts are published as curated.",
        );
        return;
    }
    let mode = as_str(&report["curated_review"]);
    let meaning = match mode {
        "advisory" => {
            "votes on curated contracts are recorded as evidence only; curated contracts are \
             kept whatever the outcome"
        }
        "gate" => {
            "curated contracts must be accepted; the others are rewritten and, after the last \
             round, discarded"
        }
        _ => "the mode is not recorded",
    };
    doc.para(&format!(
        "Curated review mode: {} ({meaning}). Aggregation rule: {}; at most {} review rounds.",
        code(mode),
        code(as_str(&report["aggregation"])),
        int(&report["max_review_rounds"]),
    ));

    let first = &report["first_round"];
    let reviewed = counter_total(first) as f64;
    let known = ["accepted", "split", "rejected", "failed_checks"];
    let mut rows: Vec<Vec<String>> = known
        .iter()
        .map(|k| {
            let n = first.get(*k).cloned().unwrap_or(Value::from(0));
            vec![k.replace('_', " "), count_pct(&n, reviewed)]
        })
        .collect();
    for (k, n) in entries(first) {
        if !known.contains(&k.as_str()) {
            rows.push(vec![k.replace('_', " "), count_pct(n, reviewed)]);
        }
    }
    doc.heading(3, "First round");
    doc.table(&["Outcome", "Contracts"], &rows);

    doc.heading(3, "Totals");
    let rows: Vec<Vec<String>> = [
        ("Votes cast", "votes"),
        ("Rewrites", "rewrites"),
        ("Discarded contracts", "discarded"),
        ("Curated contracts", "curated"),
        ("Generated contracts requested", "generated_requested"),
        ("Generated contracts kept", "generated_kept"),
    ]
    .iter()
    .map(|(label, key)| vec![label.to_string(), int(&report[*key])])
    .collect();
    doc.table(&["Item", "Count"], &rows);

    let rates: Vec<Vec<String>> = entries(&report["persona_accept_rate"])
        .map(|(p, r)| vec![code(p), pct(as_f64(r), 1.0)])
        .collect();
    if !rates.is_empty() {
        doc.heading(3, "Accept rate per reviewer persona");
        doc.table(&["Persona", "Accept votes"], &rates);
    }
}

// ---------------------------------------------------------------------------------------------
// 9. Gates and exposure

fn gates_and_exposure(doc: &mut Doc, m: &Value) {
    doc.heading(2, "Coherence gates");
    let gates = &m["gates"];
    let rows: Vec<Vec<String>> = items(&gates["results"])
        .map(|g| {
            vec![
                code(as_str(&g["name"])),
                code(as_str(&g["stage"])),
                int(&g["checked"]),
                int(&g["failures"]),
                g["passed"]
                    .as_bool()
                    .map(|b| yes_no(b).to_string())
                    .unwrap_or_else(|| DASH.to_string()),
            ]
        })
        .collect();
    doc.table(&["Gate", "Stage", "Checked", "Failures", "Passed"], &rows);

    doc.heading(2, "Exposure inventory");
    doc.para(
        "Per category: how many confidential payloads reveal persona attributes beyond the \
         task's target, how many of those reveal an attribute of another sensitive category, \
         and the mean number of extra attributes per confidential payload; public payloads \
         are counted the same way.",
    );
    let mut sums = [0u64; 5];
    let mut weighted = 0.0;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let int_fields = [
        "confidential_payloads",
        "beyond_target",
        "sensitive_beyond_target",
        "public_payloads",
        "public_beyond_target",
    ];
    for (category, e) in entries(&m["exposure"]) {
        for (i, f) in int_fields.iter().enumerate() {
            sums[i] += e[*f].as_u64().unwrap_or(0);
        }
        weighted += as_f64(&e["mean_extra_attributes"]) * as_f64(&e["confidential_payloads"]);
        rows.push(vec![
            code(category),
            int(&e["confidential_payloads"]),
            int(&e["beyond_target"]),
            int(&e["sensitive_beyond_target"]),
            dec(&e["mean_extra_attributes"], 2),
            int(&e["public_payloads"]),
            int(&e["public_beyond_target"]),
            counter(&e["beyond_target_by_category"]),
        ]);
    }
    if !rows.is_empty() {
        let mean = if sums[0] > 0 {
            format!("{:.2}", weighted / sums[0] as f64)
        } else {
            DASH.to_string()
        };
        rows.push(vec![
            "**Total**".into(),
            grouped(sums[0]),
            grouped(sums[1]),
            grouped(sums[2]),
            mean,
            grouped(sums[3]),
            grouped(sums[4]),
            String::new(),
        ]);
    }
    doc.table(
        &[
            "Category",
            "Confidential payloads",
            "Beyond target",
            "Sensitive beyond target",
            "Mean extra attributes",
            "Public payloads",
            "Public beyond target",
            "Beyond-target categories",
        ],
        &rows,
    );
}

// ---------------------------------------------------------------------------------------------
// 10. Limitations

/// The parameter count a model id states, e.g. `smollm2-135m-…` → 1.35e8, `…-1.7b` → 1.7e9.
fn stated_params(model: &str) -> Option<f64> {
    model
        .to_ascii_lowercase()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .find_map(|tok| {
            let (num, unit) = tok.split_at(tok.len().checked_sub(1)?);
            let scale = match unit {
                "m" => 1e6,
                "b" => 1e9,
                _ => return None,
            };
            num.parse::<f64>().ok().map(|x| x * scale)
        })
}

/// The stages that sent requests, with their configured model (all configured stages when the
/// manifest has no per-stage accounting).
fn used_models(m: &Value) -> Vec<(String, String)> {
    let cfg = at(m, &["config", "llm", "stages"]);
    let model_of = |stage: &str| as_str(at(cfg, &[stage, "model"])).to_string();
    entries(at(m, &["llm", "stages"]))
        .filter(|(_, s)| s["requests"].as_u64().unwrap_or(0) > 0)
        .map(|(stage, _)| (stage.clone(), model_of(stage)))
        .filter(|(_, model)| !model.is_empty())
        .collect()
}

/// A bullet for each small model that answered a stage of this build.
fn small_model_bullets(m: &Value) -> Vec<String> {
    let embedded = as_str(at(m, &["config", "llm", "embedded", "model_id"]));
    let used = used_models(m);
    let mut models: Vec<&str> = Vec::new();
    for (_, model) in &used {
        if !models.contains(&model.as_str()) {
            models.push(model);
        }
    }
    let replay = as_str(at(m, &["config", "llm", "mode"])) == "replay";
    models
        .into_iter()
        .filter_map(|model| {
            let is_embedded = !embedded.is_empty() && model == embedded;
            let small = stated_params(model).is_some_and(|p| p < SMALL_MODEL_PARAMS);
            if !(is_embedded || small) {
                return None;
            }
            let stages: Vec<String> = used
                .iter()
                .filter(|(_, x)| x == model)
                .map(|(s, _)| code(s))
                .collect();
            let kind = match (small, is_embedded) {
                (true, true) => "a small embedded model run in-process",
                (true, false) => "a small model",
                _ => "the embedded model run in-process",
            };
            let source = if replay {
                "The transcript this bundle replays"
            } else {
                "The LLM answers of this build"
            };
            Some(format!(
                "{source} comes from {}, {kind} (stages: {}). The texts it wrote and the \
                 verdicts and votes it cast are of limited quality: read them as evidence \
                 that the pipeline works, not as expert judgement.",
                code(model),
                stages.join(", ")
            ))
        })
        .collect()
}

fn limitations(doc: &mut Doc, m: &Value) {
    doc.heading(2, "Known limitations");
    let mut b = small_model_bullets(m);
    if !present(&m["llm"]) {
        b.push(
            "No LLM stage ran: the profiles were not audited by a model and no votes or \
             generated texts are included."
                .into(),
        );
    }

    let ident = &m["identity"];
    if present(ident) {
        let base = identity_base(m);
        let high: Vec<String> = entries(&ident["fields"])
            .filter(|(_, r)| base > 0.0 && as_f64(&r["fallback"]) / base > HIGH_FALLBACK_SHARE)
            .map(|(f, r)| {
                format!(
                    "{} {} of {} ({})",
                    code(f),
                    int(&r["fallback"]),
                    grouped(base as u64),
                    pct(as_f64(&r["fallback"]), base)
                )
            })
            .collect();
        if !high.is_empty() {
            b.push(format!(
                "Identity completion often fell back to values built by construction: {}. \
                 These values are valid but formulaic, so the variety of these fields is \
                 lower than an LLM-written identity would give.",
                high.join(", ")
            ));
        }
    } else {
        b.push(
            "Identity completion was off: names, contacts and identifiers are deterministic \
             stand-ins."
                .into(),
        );
    }

    let assumed: Vec<String> = margin_entries(m)
        .into_iter()
        .chain(auxiliary_entries(m).into_iter().map(|(_, e)| e))
        .filter(|e| as_str(&e["status"]) == "assumption")
        .map(|e| code(as_str(&e["name"])))
        .collect();
    if !assumed.is_empty() {
        b.push(format!(
            "These margins are assumptions, not published statistics: {}. Their shares are \
             the project's estimates (see \"Stated assumptions\").",
            assumed.join(", ")
        ));
    }

    let relaxed = at(m, &["binding", "relaxed"]).as_u64().unwrap_or(0);
    if relaxed > 0 {
        b.push(format!(
            "{} bound to a persona that does not meet all of their persona requirements \
             (relaxed binding); the unmet requirements are listed in `bindings.jsonl`.",
            plural(&Value::from(relaxed), "contract was", "contracts were")
        ));
    }

    let report = at(m, &["contracts", "report"]);
    if as_str(&report["curated_review"]) == "advisory" {
        let first = &report["first_round"];
        b.push(format!(
            "Reviewer votes were advisory: curated contracts are published whatever the vote \
             (first round: {} accepted, {} split, {} rejected of {}).",
            int(first.get("accepted").unwrap_or(&Value::from(0))),
            int(first.get("split").unwrap_or(&Value::from(0))),
            int(first.get("rejected").unwrap_or(&Value::from(0))),
            grouped(counter_total(first)),
        ));
    }

    let cal = &m["calibration"];
    if let (Some(x), Some(t)) = (cal["max_l1"].as_f64(), cal["tolerance"].as_f64()) {
        if x > t {
            b.push(format!(
                "The IPF did not reach its tolerance: largest L1 {} against {}.",
                l1(&cal["max_l1"]),
                short(&cal["tolerance"])
            ));
        }
    }
    if at(m, &["gates", "passed"]).as_bool() == Some(false) {
        b.push("At least one coherence gate failed for these artifacts.".into());
    }

    b.extend(
        [
            "Only the listed margins are calibrated; joint distributions that no margin covers \
             follow the candidate proposal and are not checked against population data.",
            "Amounts are shown in the persona's own currency and are never converted between \
             currencies, so amounts of personas in different countries are not comparable.",
            "Street names in derived addresses are English placeholders, not the street names \
             of the persona's city or language.",
            "All identities, attribute values, records and messages are synthetic.",
            "The bundle does not contain real persons: no record was taken from or matched to \
             an individual.",
        ]
        .map(str::to_string),
    );
    doc.list(&b);
}

// ---------------------------------------------------------------------------------------------
// 11. Intended use and ethics

fn intended_use(doc: &mut Doc) {
    doc.heading(2, "Intended use and ethics");
    doc.list(
        &[
            "**Intended use:** evaluating how LLM agents choose where to get a piece of \
             personal information: by asking the user, from a public source, or from a \
             confidential account, and how guidance and time pressure shift that choice.",
            "**Out of scope:** training or tuning models to find, extract or infer personal \
             data, or building profiles of real people. The profiles are calibrated to \
             population statistics only so that the benchmark is representative.",
            "**Synthetic identifiers:** emails use reserved example domains. Phone numbers \
             and government identifiers are generated to pass format and check-digit rules and \
             may by chance equal a number in real use; never call, message or look them up.",
            "**Reporting problems:** report issues to the maintainers of the generator. To fix \
             a problem, correct the inputs and regenerate the bundle with `make dataset`; \
             there is nothing personal to remove, since no record describes a real person.",
        ]
        .map(str::to_string),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A small manifest with every section the card reads.
    fn manifest() -> Value {
        json!({
            "bundle_format": "privforge-bundle/0",
            "bundle_version": "9.8.7",
            "build_date": "2030-01-02",
            "generator": {"name": "privforge", "version": "0.1.0"},
            "seed": 4242,
            "config": {
                "population": {"profiles": 20, "candidates": 400, "lambda": 0.9, "attempts_factor": 20},
                "ipf": {"tolerance": 0.001, "max_sweeps": 500, "backfill_rounds": 3},
                "sampling": {"trials": 5, "swap_iterations": 1000},
                "identity": {"enabled": true, "max_repair_rounds": 0},
                "llm": {
                    "mode": "replay",
                    "transcript": "t.jsonl",
                    "embedded": {"model_id": "tiny-135m"},
                    "stages": {
                        "seed_audit": {"template": "seed_audit", "model": "tiny-135m",
                            "temperature": 0.699999988079071, "top_p": null,
                            "max_tokens": 1536, "batch_size": 25}
                    }
                }
            },
            "provenance": {
                "margins": {
                    "frame": "Adults in a test frame",
                    "catalog": {"name": "cities", "file": "cities.csv", "status": "derived",
                        "licence": "CC BY 4.0", "derivation": "filtered", "sources": []},
                    "margin": [
                        {"name": "country", "file": "country.csv", "status": "derived",
                         "licence": "CC BY 3.0 IGO", "derivation": "renormalised",
                         "assumptions": [],
                         "sources": [{"id": "wpp", "title": "WPP", "publisher": "UN",
                            "edition": "2024", "url": "https://example.org", "licence": "CC BY 3.0 IGO",
                            "extract": "wpp.csv", "sha256": "ab"}]},
                        {"name": "country_migration", "file": "country_migration.csv",
                         "status": "assumption", "licence": "project assumption",
                         "derivation": "assumed shares", "assumptions": ["Shares are guessed."],
                         "sources": []}
                    ]
                },
                "data_files": [
                    {"file": "names/xyz.json", "provenance": "Lists A|B merged"}
                ]
            },
            "counts": {"profiles": 20, "candidates": 400, "margins": 2, "contracts": 7,
                "votes": 21, "categories": 3, "skills": 25, "skill_folders": 100,
                "personas": 7, "payloads": 35, "runs": 1234},
            "runs": {"per_category": {"health": 617, "finance": 617},
                "per_guidance": {"neutral": 1234}, "per_pressure": {"baseline": 1234}},
            "binding": {"contracts": 7, "personas": 7, "relaxed": 0},
            "exposure": {"health": {"confidential_payloads": 5, "beyond_target": 4,
                "sensitive_beyond_target": 2, "beyond_target_by_category": {"health": 2},
                "mean_extra_attributes": 3.5, "public_payloads": 5, "public_beyond_target": 1}},
            "gates": {"passed": true, "results": [{"name": "condition_balance", "stage": "run_matrix",
                "passed": true, "checked": 1234, "failures": 0}]},
            "margins": [
                {"name": "country", "file": "margins/country.csv", "status": "derived"},
                {"name": "country_migration", "file": "margins/country_migration.csv", "status": "assumption"}
            ],
            "seed_audit": null,
            "identity": {"profiles": 20, "repair_rounds": 0, "fields": {
                "email": {"llm": 15, "llm_repaired": 1, "fallback": 4, "initial_failures": 5, "repair_requests": 0},
                "phone_number": {"llm": 2, "llm_repaired": 0, "fallback": 18, "initial_failures": 18, "repair_requests": 0}
            }},
            "contracts": {"reviewed": true, "report": {"aggregation": "majority",
                "curated_review": "advisory", "max_review_rounds": 3, "curated": 7,
                "votes": 21, "rewrites": 0, "discarded": 0,
                "first_round": {"accepted": 1, "rejected": 4, "split": 2},
                "persona_accept_rate": {"privacy_counsel": 0.25}}},
            "llm": {"transcript_sha256": "cafe", "responses": 3,
                "prompts": {"seed_audit": {"version": "2", "sha256": {"seed_audit.toml": "beef"}}},
                "stages": {"seed_audit": {"requests": 3, "prompt_tokens": 1000, "completion_tokens": 200}}},
            "calibration": {"max_l1": 0.0005, "tolerance": 0.001, "ipf_sweeps": 4,
                "sample_l1": {"country": 0.012345, "country_migration": 0.2},
                "floor_l1": {"country": 0.01}, "sample_total_l1": 0.212345}
        })
    }

    /// The table row whose first cell is `first`.
    fn row<'a>(card: &'a str, first: &str) -> &'a str {
        card.lines()
            .find(|l| l.starts_with(&format!("| {first} |")))
            .unwrap_or_else(|| panic!("no row starting with {first}"))
    }

    /// The number of unescaped cell separators in a table row.
    fn separators(line: &str) -> usize {
        let b = line.as_bytes();
        (0..b.len())
            .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
            .count()
    }

    #[test]
    fn assumption_margin_is_flagged() {
        let card = render(&manifest());
        assert!(row(&card, "`country_migration`").contains("**assumption**"));
        assert!(!row(&card, "`country`").contains("assumption"));
        let limits = card.split("## Known limitations").nth(1).unwrap();
        assert!(limits
            .contains("margins are assumptions, not published statistics: `country_migration`."));
        assert!(card.contains("`country_migration`: Shares are guessed."));
    }

    #[test]
    fn identity_off_gives_a_sentence_instead_of_a_table() {
        let mut m = manifest();
        m["identity"] = Value::Null;
        let card = render(&m);
        let section = card
            .split("## Field provenance")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .unwrap();
        assert!(section.contains("Identity completion was off for this build"));
        assert!(!section.contains("| Field |"));

        let on = render(&manifest());
        assert!(!on.contains("Identity completion was off for this build"));
        assert_eq!(
            row(&on, "`email`"),
            "| `email` | 15 (75.0%) | 1 (5.0%) | 4 (20.0%) | 5 (25.0%) | 0 |"
        );
    }

    #[test]
    fn counts_table_shows_the_given_numbers() {
        let card = render(&manifest());
        assert_eq!(row(&card, "Runs"), "| Runs | 1,234 |");
        assert_eq!(row(&card, "Task contracts"), "| Task contracts | 7 |");
        assert_eq!(row(&card, "Reviewer votes"), "| Reviewer votes | 21 |");
        assert_eq!(row(&card, "`health`"), "| `health` | 617 | 50.0% |");
    }

    #[test]
    fn pipe_in_provenance_is_escaped() {
        let card = render(&manifest());
        let line = row(&card, "`names/xyz.json`");
        assert!(line.contains("Lists A\\|B merged"));
        assert_eq!(
            separators(line),
            3,
            "two cells need three separators: {line}"
        );
    }

    #[test]
    fn small_model_and_high_fallback_become_limitations() {
        let card = render(&manifest());
        let limits = card.split("## Known limitations").nth(1).unwrap();
        assert!(limits.contains("comes from `tiny-135m`, a small embedded model"));
        assert!(limits.contains("`phone_number` 18 of 20 (90.0%)"));
        // 20% is not above the threshold.
        assert!(!limits.contains("`email` 4 of 20"));
    }

    #[test]
    fn relaxed_binding_is_a_limitation_only_when_positive() {
        let limits = |m: &Value| {
            let card = render(m);
            card.split("## Known limitations")
                .nth(1)
                .unwrap()
                .to_string()
        };
        let mut m = manifest();
        assert!(!limits(&m).contains("relaxed binding"));
        m["binding"]["relaxed"] = json!(2);
        assert!(limits(&m).contains("2 contracts were bound to a persona that does not meet"));
    }

    #[test]
    fn figures_are_formatted() {
        let card = render(&manifest());
        let calibration = card.split("## Calibration results").nth(1).unwrap();
        assert!(calibration.contains("| `country` | 0.0123 | 0.0100 | — | — |"));
        assert!(calibration.contains("| **Total** | 0.2123 |"));
        assert!(row(&card, "`seed_audit`").contains("| 0.7 | unset | 1,536 | 25 |"));
        assert!(row(&card, "`seed_audit`").contains("`seed_audit` v2"));
    }

    #[test]
    fn empty_manifest_renders_every_section_without_panicking() {
        let card = render(&json!({}));
        for heading in [
            "# Data card",
            "## Composition and counts",
            "## How each stage produced its content",
            "## Models and prompts per stage",
            "## Provenance and licences",
            "## Calibration results",
            "## Field provenance",
            "## Vote outcomes",
            "## Coherence gates",
            "## Exposure inventory",
            "## Known limitations",
            "## Intended use and ethics",
        ] {
            assert!(card.contains(heading), "missing {heading}");
        }
        assert!(card.contains("Contract review was off"));
        // Wrongly typed sections degrade to dashes instead of panicking.
        let odd = render(
            &json!({"counts": 3, "identity": false, "llm": [], "gates": "x",
            "contracts": {"reviewed": true, "report": null}, "exposure": [1, 2]}),
        );
        assert!(odd.contains("Identity completion was off for this build"));
        assert!(render(&Value::Null).contains("## Intended use and ethics"));
        assert_eq!(render(&manifest()), render(&manifest()));
    }

    #[test]
    #[ignore = "renders the reference manifest for inspection"]
    fn reference_card() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/outputs/reference/manifest.json"
        );
        let mut m: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        if let Some(o) = m.as_object_mut() {
            o.remove("files");
        }
        let out = std::env::var("DATA_CARD_OUT").unwrap_or("/tmp/DATA_CARD.md".into());
        std::fs::write(out, render(&m)).unwrap();
    }
}
