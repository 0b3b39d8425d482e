//! `report.html`: the one page a person opens first. It is rendered from the manifest, with the
//! per-cell calibration charts from `calibration.json`, and is self-contained (inline CSS and
//! SVG, no script, nothing fetched) so it reads the same offline and in any archive.

use crate::bundle::{CalibrationReport, MarginResult};
use serde_json::Value;
use std::fmt::Write;

/// Section ids and headings of `report.html`, in page order; tests and the nav use them.
pub const SECTIONS: [(&str, &str); 6] = [
    ("summary", "Summary"),
    ("calibration-charts", "Calibration"),
    ("gates", "Coherence gates"),
    ("balance", "Category and condition balance"),
    ("exposure", "Exposure inventory"),
    ("provenance", "Identity provenance, binding and votes"),
];

/// `manifest.counts` keys, in the order the summary lists them.
const COUNT_KEYS: [&str; 11] = [
    "profiles",
    "candidates",
    "margins",
    "contracts",
    "votes",
    "categories",
    "skills",
    "skill_folders",
    "personas",
    "payloads",
    "runs",
];

const MISSING: &str = r#"<p class="missing">Not in this bundle.</p>"#;

/// Shown when `manifest.identity` is null, i.e. identity completion was off.
const NO_IDENTITY: &str = r#"<p class="missing">Identity completion was off for this bundle: no identity field came from the LLM; personas carry a deterministic identity, valid by construction.</p>"#;

/// Chart and table styling shared by both pages.
const CSS: &str = "
body{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}
.chart{display:block;margin:.5rem 0 1.5rem}.lbl{font-size:10px;fill:#333}.val{font-size:10px;fill:#666}
.target{fill:none;stroke:#1f4e79;stroke-width:1}.sample{fill:#7fb3d5}.pool{stroke:#c0392b;stroke-width:1.5;fill:none}
.dot{fill:#1f77b4;opacity:.7}.diag{stroke:#999;stroke-dasharray:4 3}.axis{stroke:#333}.line{fill:none;stroke:#1f77b4;stroke-width:1.5}.tol{stroke:#c0392b;stroke-dasharray:4 3}
.status-assumption{color:#a04000}.status-derived{color:#1e6b30}
";

/// Additions for `report.html`: navigation, text cells, pass/fail marks, the generic bars.
const REPORT_CSS: &str = "nav a{margin-right:1rem}section{margin:2.5rem 0}th[scope=row],thead th:first-child{text-align:left}td.t{text-align:left}td.pass,td.fail{white-space:nowrap}
.pass{color:#1e6b30}.fail{color:#b00020;font-weight:bold}.missing{color:#666;font-style:italic}
.bar{fill:#5b8db8}.p0{fill:#1f77b4}.p1{fill:#ff7f0e}.p2{fill:#9e9e9e}.cols{display:flex;flex-wrap:wrap;gap:0 2.5rem}
";

/// HTML-escapes text for element content and quoted attribute values.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn f(x: f64) -> String {
    format!("{x:.4}")
}

/// A number as a person reads it: integers without a fraction, others to at most 4 decimals.
fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A manifest value as plain (unescaped) text; objects flatten to `key: value, …`.
fn txt(v: &Value) -> String {
    match v {
        Value::Null => "—".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => n.as_f64().map(num).unwrap_or_default(),
        Value::Array(a) => a.iter().map(txt).collect::<Vec<_>>().join(", "),
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| format!("{k}: {}", txt(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// A table of text cells, escaped here so no caller can forget; the first cell of a row is its
/// header, and cells that are not numbers are left-aligned.
fn table(id: Option<&str>, headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = match id {
        Some(id) => format!(r#"<table id="{}">"#, esc(id)),
        None => "<table>".into(),
    };
    s.push_str("<thead><tr>");
    for h in headers {
        let _ = write!(s, r#"<th scope="col">{}</th>"#, esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for row in rows {
        s.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let _ = match (i, c.parse::<f64>().is_ok()) {
                (0, _) => write!(s, r#"<th scope="row">{}</th>"#, esc(c)),
                (_, true) => write!(s, "<td>{}</td>", esc(c)),
                (_, false) => write!(s, r#"<td class="t">{}</td>"#, esc(c)),
            };
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// Two-column table of a JSON object (`name → value`), or the missing note.
fn map_table(key: &str, value: &str, obj: &Value) -> String {
    match obj.as_object() {
        Some(o) => {
            let rows: Vec<Vec<String>> = o.iter().map(|(k, v)| vec![k.clone(), txt(v)]).collect();
            table(None, &[key, value], &rows)
        }
        None => MISSING.into(),
    }
}

/// Opens an inline SVG with an accessible name (`aria-label` and `<title>`).
fn svg_open(label: &str, w: f64, h: f64) -> String {
    format!(
        r#"<svg class="chart" role="img" aria-label="{l}" width="{w}" height="{h}" viewBox="0 0 {w} {h}"><title>{l}</title>"#,
        l = esc(label)
    )
}

/// Width of the label column for these labels (10px text), so long category names still fit.
fn label_width<'a>(labels: impl Iterator<Item = &'a str>) -> f64 {
    let longest = labels.map(|l| l.chars().count()).max().unwrap_or(0);
    (longest as f64 * 6.0 + 10.0).clamp(60.0, 280.0)
}

/// Horizontal bars, one per item, with the value at the bar's end.
fn hbars(label: &str, items: &[(String, f64)]) -> String {
    const ROW: f64 = 18.0;
    const PLOT: f64 = 360.0;
    let lw = label_width(items.iter().map(|(l, _)| l.as_str()));
    let max = items.iter().map(|(_, v)| *v).fold(0.0, f64::max);
    let mut s = svg_open(label, lw + PLOT + 60.0, ROW * items.len() as f64 + 8.0);
    for (i, (l, v)) in items.iter().enumerate() {
        let y = 4.0 + i as f64 * ROW;
        let bw = if max > 0.0 { v / max * PLOT } else { 0.0 };
        let _ = write!(
            s,
            r#"<text x="{lx}" y="{ty}" text-anchor="end" class="lbl">{l}</text><rect x="{lw}" y="{y}" width="{bw:.1}" height="{bh}" class="bar"><title>{l}: {v}</title></rect><text x="{vx:.1}" y="{ty}" class="val">{v}</text>"#,
            lx = lw - 6.0,
            ty = y + 12.0,
            bh = ROW - 4.0,
            vx = lw + bw + 4.0,
            l = esc(l),
            v = num(*v),
        );
    }
    s.push_str("</svg>");
    s
}

/// One bar per row split into parts (class `p0`, `p1`, …) that make up the row's whole, with a
/// legend; bars share one scale so unequal totals stay visible.
fn stacked_bars(label: &str, parts: &[&str], rows: &[(String, Vec<f64>)]) -> String {
    const ROW: f64 = 18.0;
    const PLOT: f64 = 400.0;
    let lw = label_width(rows.iter().map(|(l, _)| l.as_str()));
    let max = rows
        .iter()
        .map(|(_, v)| v.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let legend_y = 4.0 + ROW * rows.len() as f64 + 14.0;
    let mut s = svg_open(label, lw + PLOT + 20.0, legend_y + 10.0);
    for (i, (l, vals)) in rows.iter().enumerate() {
        let y = 4.0 + i as f64 * ROW;
        let _ = write!(
            s,
            r#"<text x="{lx}" y="{ty}" text-anchor="end" class="lbl">{l}</text>"#,
            lx = lw - 6.0,
            ty = y + 12.0,
            l = esc(l),
        );
        let mut x = lw;
        for (j, v) in vals.iter().enumerate() {
            let w = if max > 0.0 { v / max * PLOT } else { 0.0 };
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{y}" width="{w:.1}" height="{bh}" class="p{j}"><title>{l}, {p}: {v}</title></rect>"#,
                bh = ROW - 4.0,
                l = esc(l),
                p = esc(parts.get(j).copied().unwrap_or("")),
                v = num(*v),
            );
            x += w;
        }
    }
    let mut x = lw;
    for (j, p) in parts.iter().enumerate() {
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{ry}" width="10" height="10" class="p{j}"/><text x="{tx}" y="{legend_y}" class="lbl">{p}</text>"#,
            ry = legend_y - 9.0,
            tx = x + 14.0,
            p = esc(p),
        );
        x += 24.0 + p.chars().count() as f64 * 6.0;
    }
    s.push_str("</svg>");
    s
}

/// Horizontal bars: target (outline) and sample (filled) per cell; pool as a tick.
fn bar_chart(m: &MarginResult) -> String {
    let row_h = 16.0;
    let label_w = 260.0;
    let plot_w = 420.0;
    let h = row_h * m.cells.len() as f64 + 30.0;
    let max = m
        .cells
        .iter()
        .map(|c| c.target.max(c.sample).max(c.pool))
        .fold(0.0, f64::max)
        .max(1e-9);
    let mut s = svg_open(
        &format!("target vs achieved for {}", m.name),
        label_w + plot_w + 130.0,
        h,
    );
    for (i, c) in m.cells.iter().enumerate() {
        let y = 20.0 + i as f64 * row_h;
        let tw = c.target / max * plot_w;
        let sw = c.sample / max * plot_w;
        let px = label_w + c.pool / max * plot_w;
        let _ = write!(
            s,
            r#"<text x="{lx}" y="{ty}" text-anchor="end" class="lbl">{label}</text><rect x="{label_w}" y="{y1}" width="{sw:.2}" height="{bh}" class="sample"><title>sample {sv}</title></rect><rect x="{label_w}" y="{y0}" width="{tw:.2}" height="{th}" class="target"><title>target {tv}</title></rect><line x1="{px:.2}" x2="{px:.2}" y1="{y0}" y2="{y2}" class="pool"><title>weighted pool {pv}</title></line><text x="{vx}" y="{ty}" class="val">{tv} / {sv}</text>"#,
            lx = label_w - 6.0,
            ty = y + 11.0,
            label = esc(&c.cell.join(" | ")),
            y0 = y + 1.0,
            y1 = y + 4.0,
            y2 = y + row_h - 1.0,
            bh = row_h - 8.0,
            th = row_h - 2.0,
            vx = label_w + plot_w + 4.0,
            tv = f(c.target),
            sv = f(c.sample),
            pv = f(c.pool),
        );
    }
    s.push_str("</svg>");
    s
}

/// Scatter of target (x) against sample (dots) and weighted pool (crosses) for big margins.
fn scatter(m: &MarginResult) -> String {
    let size = 320.0;
    let pad = 40.0;
    let max = m
        .cells
        .iter()
        .map(|c| c.target.max(c.sample).max(c.pool))
        .fold(0.0, f64::max)
        .max(1e-9);
    let sc = |v: f64| v / max * size;
    let w = size + 2.0 * pad;
    let mut s = svg_open(&format!("target vs achieved for {}", m.name), w, w);
    let _ = write!(
        s,
        r#"<line x1="{pad}" y1="{b}" x2="{e}" y2="{pad}" class="diag"/><line x1="{pad}" y1="{b}" x2="{e}" y2="{b}" class="axis"/><line x1="{pad}" y1="{b}" x2="{pad}" y2="{pad}" class="axis"/><text x="{mid}" y="{lb}" text-anchor="middle" class="lbl">target share (max {mx})</text><text x="12" y="{mid}" transform="rotate(-90 12 {mid})" text-anchor="middle" class="lbl">achieved share</text>"#,
        b = size + pad,
        e = size + pad,
        mid = pad + size / 2.0,
        lb = size + pad + 28.0,
        mx = f(max),
    );
    for c in &m.cells {
        let x = pad + sc(c.target);
        let ys = pad + size - sc(c.sample);
        let yp = pad + size - sc(c.pool);
        let _ = write!(
            s,
            r#"<path d="M{a:.1} {yp:.1}h6M{x:.1} {c0:.1}v6" class="pool"/><circle cx="{x:.1}" cy="{ys:.1}" r="2.5" class="dot"><title>{l}: target {t}, sample {sv}, pool {pv}</title></circle>"#,
            a = x - 3.0,
            c0 = yp - 3.0,
            l = esc(&c.cell.join(" | ")),
            t = f(c.target),
            sv = f(c.sample),
            pv = f(c.pool),
        );
    }
    s.push_str("</svg>");
    s
}

/// IPF convergence: max L1 per sweep on a log scale.
fn convergence(history: &[f64], tol: f64) -> String {
    let w = 520.0;
    let h = 200.0;
    let pad = 40.0;
    let lo = history
        .iter()
        .copied()
        .chain([tol])
        .fold(f64::INFINITY, f64::min)
        .max(1e-12)
        .log10()
        .floor();
    let hi = history
        .iter()
        .copied()
        .fold(tol, f64::max)
        .log10()
        .ceil()
        .max(lo + 1.0);
    let n = history.len().max(2) as f64;
    let x = |i: usize| pad + i as f64 / (n - 1.0) * (w - 2.0 * pad);
    let y = |v: f64| pad + (hi - v.max(1e-12).log10()) / (hi - lo) * (h - 2.0 * pad);
    let pts: Vec<String> = history
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
        .collect();
    format!(
        r#"{open}<line x1="{pad}" x2="{e}" y1="{ty:.1}" y2="{ty:.1}" class="tol"/><text x="{e}" y="{tl:.1}" text-anchor="end" class="lbl">tolerance {tol}</text><polyline points="{pts}" class="line"/><text x="{pad}" y="{hy}" class="lbl">1e{hi}</text><text x="{pad}" y="{ly}" class="lbl">1e{lo}</text><text x="{mid}" y="{by}" text-anchor="middle" class="lbl">sweep (1..{len})</text></svg>"#,
        open = svg_open("IPF convergence", w, h),
        e = w - pad,
        ty = y(tol),
        tl = y(tol) - 4.0,
        pts = pts.join(" "),
        hy = pad - 6.0,
        ly = h - pad + 14.0,
        mid = w / 2.0,
        by = h - 6.0,
        len = history.len(),
    )
}

/// The calibration text and charts, under level-3 headings inside their section.
fn calibration_body(s: &mut String, manifest: &Value, report: &CalibrationReport) {
    let h = 3;
    let _ = write!(
        s,
        "<p>Seed {seed}, build date {date}. {np} profiles sampled from a calibrated pool of {pool} candidates ({bf} added by backfill in {br} rounds).</p>\
         <p>IPF: {sw} sweeps, max L1 of the weighted pool <b>{ml}</b> (tolerance {tol}); effective sample size {ess:.0}; max ideal inclusion probability {mip:.3}.</p>\
         <p>Sample: total L1 over margins <b>{fin}</b> (before the seed audit's replacements {st}); best of {tr} weighted draws {bt}; a plain single weighted draw {pt}; rounding floor {ft}.</p>",
        fin = f(report.final_total_l1),
        seed = esc(&manifest["seed"].to_string()),
        date = esc(manifest["build_date"].as_str().unwrap_or("")),
        np = esc(&manifest["counts"]["profiles"].to_string()),
        pool = report.pool_size,
        bf = report.candidates.backfill,
        br = report.backfill_rounds,
        sw = report.ipf.sweeps,
        ml = f(report.ipf.max_l1),
        tol = report.ipf.tolerance,
        ess = report.ipf.effective_sample_size,
        mip = report.ipf.max_ideal_inclusion_probability,
        st = f(report.sampling.sample_total_l1),
        tr = report.sampling.trials,
        bt = f(report.sampling.best_trial_total_l1),
        pt = f(report.sampling.plain_draw_total_l1),
        ft = f(report.sampling.floor_total_l1),
    );
    let _ = write!(s, "<h{h}>IPF convergence</h{h}>");
    s.push_str(&convergence(
        &report.ipf.per_sweep_max_l1,
        report.ipf.tolerance,
    ));
    let _ = write!(s, "<h{h}>Margins</h{h}><table id=\"margins\"><tr>");
    for c in [
        "margin",
        "status",
        "cells",
        "pool L1",
        "sample L1",
        "plain draw L1",
        "floor L1",
    ] {
        let _ = write!(s, "<th scope=\"col\">{c}</th>");
    }
    s.push_str("</tr>");
    for m in &report.margins {
        let st = serde_json::to_value(&m.status)
            .ok()
            .and_then(|v| v.as_str().map(esc))
            .unwrap_or_default();
        let _ = write!(
            s,
            "<tr><td><a href=\"#m-{n}\">{n}</a></td><td class=\"status-{st}\">{st}</td><td>{c}</td><td>{a}</td><td>{b}</td><td>{p}</td><td>{fl}</td></tr>",
            n = esc(&m.name),
            c = m.cells.len(),
            a = f(m.pool_l1),
            b = f(m.sample_l1),
            p = f(m.plain_draw_l1),
            fl = f(m.floor_l1),
        );
    }
    s.push_str("</table>");
    let h3 = h + 1;
    for m in &report.margins {
        let _ = write!(
            s,
            "<h{h3} id=\"m-{n}\">{n} <small>({fields})</small></h{h3}>",
            n = esc(&m.name),
            fields = esc(&m.fields.join(" × "))
        );
        if m.cells.len() <= 60 {
            s.push_str("<p>Outlined bar: target; filled bar: the sample; red tick: the IPF-weighted pool.</p>");
            s.push_str(&bar_chart(m));
        } else {
            s.push_str("<p>One point per cell: dots are the sample, red crosses the IPF-weighted pool; the dashed diagonal is a perfect fit.</p>");
            s.push_str(&scatter(m));
        }
    }
}

/// Document head and `<h1>` for a page titled `title` with extra CSS.
fn page_open(title: &str, extra_css: &str) -> String {
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{t}</title><style>{CSS}{extra_css}</style></head><body><h1>{t}</h1>"#,
        t = esc(title)
    )
}

/// `report.html`: summary, calibration charts, gates, balance, exposure and provenance, each a
/// `<section>` with an id from [`SECTIONS`]. Absent manifest parts read "Not in this bundle".
pub fn render_report(manifest: &Value, report: &CalibrationReport) -> String {
    let title = format!(
        "PrivForge bundle {} — report",
        manifest["bundle_version"].as_str().unwrap_or("?")
    );
    let mut s = page_open(&title, REPORT_CSS);
    s.push_str(r#"<nav aria-label="sections">"#);
    for (id, heading) in SECTIONS {
        let _ = write!(s, r##"<a href="#{id}">{heading}</a>"##);
    }
    s.push_str("</nav><main>");
    let bodies = [
        summary(manifest),
        calibration(manifest, report),
        gates(manifest),
        balance(manifest),
        exposure(manifest),
        provenance(manifest),
    ];
    for ((id, heading), body) in SECTIONS.iter().zip(bodies) {
        let _ = write!(
            s,
            r#"<section id="{id}" aria-labelledby="{id}-h"><h2 id="{id}-h">{heading}</h2>{body}</section>"#
        );
    }
    s.push_str("</main></body></html>\n");
    s
}

fn summary(m: &Value) -> String {
    let generator = format!(
        "{} {}",
        txt(&m["generator"]["name"]),
        txt(&m["generator"]["version"])
    );
    let mut s = table(
        None,
        &["bundle", "value"],
        &[
            vec!["format".into(), txt(&m["bundle_format"])],
            vec!["version".into(), txt(&m["bundle_version"])],
            vec!["build date".into(), txt(&m["build_date"])],
            vec!["seed".into(), txt(&m["seed"])],
            vec!["generator".into(), generator],
        ],
    );
    s.push_str(&gate_status(&m["gates"]));
    s.push_str("<h3>Counts</h3>");
    match m["counts"].as_object() {
        Some(c) => {
            let extra = c.keys().filter(|k| !COUNT_KEYS.contains(&k.as_str()));
            let rows: Vec<Vec<String>> = COUNT_KEYS
                .iter()
                .map(|k| k.to_string())
                .chain(extra.cloned())
                .map(|k| {
                    let v = txt(&c.get(&k).cloned().unwrap_or(Value::Null));
                    vec![k, v]
                })
                .collect();
            s.push_str(&table(None, &["item", "count"], &rows));
        }
        None => s.push_str(MISSING),
    }
    s
}

fn calibration(m: &Value, report: &CalibrationReport) -> String {
    let sp = &report.sampling;
    let rows = [
        ("sample (in the bundle)", report.final_total_l1),
        ("sample before the seed audit", sp.sample_total_l1),
        ("best weighted draw", sp.best_trial_total_l1),
        ("plain weighted draw", sp.plain_draw_total_l1),
        ("rounding floor", sp.floor_total_l1),
    ]
    .map(|(k, v)| vec![k.to_string(), f(v)]);
    let mut s = String::from("<h3>Total L1 over all margins</h3>");
    s.push_str(&table(Some("l1-totals"), &["draw", "total L1"], &rows));
    calibration_body(&mut s, m, report);
    s
}

/// One line saying whether every gate passed, from `gates.passed`.
fn gate_status(g: &Value) -> String {
    let results = g["results"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    match g["passed"].as_bool() {
        Some(true) => format!(
            r#"<p class="pass">✓ All {} coherence gates passed.</p>"#,
            results.len()
        ),
        Some(false) => {
            let failed: Vec<String> = results
                .iter()
                .filter(|r| r["passed"].as_bool() != Some(true))
                .map(|r| txt(&r["name"]))
                .collect();
            format!(
                r#"<p class="fail">✗ Coherence gates failed ({} of {}): {}.</p>"#,
                failed.len(),
                results.len(),
                esc(&failed.join(", "))
            )
        }
        None => r#"<p class="missing">Coherence gates: not in this bundle.</p>"#.into(),
    }
}

fn gates(m: &Value) -> String {
    let Some(results) = m["gates"]["results"].as_array() else {
        return MISSING.into();
    };
    let mut s = gate_status(&m["gates"]);
    s.push_str(r#"<table id="gate-table"><thead><tr>"#);
    for h in [
        "gate",
        "stage",
        "description",
        "checked",
        "failures",
        "passed",
    ] {
        let _ = write!(s, r#"<th scope="col">{h}</th>"#);
    }
    s.push_str("</tr></thead><tbody>");
    for g in results {
        let (class, mark) = match g["passed"].as_bool() {
            Some(true) => ("pass", "✓ passed"),
            Some(false) => ("fail", "✗ failed"),
            None => ("missing", "not recorded"),
        };
        let _ = write!(
            s,
            r#"<tr><th scope="row">{}</th><td class="t">{}</td><td class="t">{}</td><td>{}</td><td>{}</td><td class="{class}">{mark}</td></tr>"#,
            esc(&txt(&g["name"])),
            esc(&txt(&g["stage"])),
            esc(&txt(&g["description"])),
            esc(&txt(&g["checked"])),
            esc(&txt(&g["failures"])),
        );
    }
    s.push_str("</tbody></table>");
    s
}

/// Runs per contract when every contract has the same number of runs (the run matrix crosses
/// each contract with every condition): `counts.runs / counts.contracts`, if exact.
fn runs_per_contract(m: &Value) -> Option<u64> {
    let contracts = m["counts"]["contracts"].as_u64().filter(|&c| c > 0)?;
    let runs = m["counts"]["runs"].as_u64()?;
    (runs % contracts == 0 && runs > 0).then_some(runs / contracts)
}

fn balance(m: &Value) -> String {
    let runs = &m["runs"];
    if !runs.is_object() {
        return MISSING.into();
    }
    let mut s = String::from("<h3>Runs per category</h3>");
    match runs["per_category"].as_object() {
        Some(pc) => {
            let per = runs_per_contract(m);
            // Contracts per category = category runs / runs per contract, shown only when exact.
            let contracts: Option<Vec<u64>> = per.and_then(|per| {
                pc.values()
                    .map(|v| v.as_u64().filter(|r| r % per == 0).map(|r| r / per))
                    .collect()
            });
            let mut headers = vec!["category", "runs"];
            if contracts.is_some() {
                headers.push("contracts");
            }
            let rows: Vec<Vec<String>> = pc
                .iter()
                .enumerate()
                .map(|(i, (k, v))| {
                    let mut row = vec![k.clone(), txt(v)];
                    if let Some(c) = &contracts {
                        row.push(c[i].to_string());
                    }
                    row
                })
                .collect();
            s.push_str(&table(Some("category-table"), &headers, &rows));
            if let (Some(per), Some(_)) = (per, &contracts) {
                let _ = write!(
                    s,
                    "<p>Contracts per category = runs in the category ÷ {per} runs per contract ({} runs ÷ {} contracts).</p>",
                    esc(&txt(&m["counts"]["runs"])),
                    esc(&txt(&m["counts"]["contracts"])),
                );
            }
            let items: Vec<(String, f64)> = pc
                .iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0)))
                .collect();
            s.push_str(&hbars("runs per category", &items));
        }
        None => s.push_str(MISSING),
    }
    s.push_str(r#"<div class="cols">"#);
    for (key, heading, col) in [
        ("per_guidance", "Runs per guidance condition", "guidance"),
        ("per_pressure", "Runs per pressure condition", "pressure"),
        ("per_order", "Runs per Discovery order", "order"),
    ] {
        let _ = write!(
            s,
            "<div><h3>{heading}</h3>{}</div>",
            map_table(col, "runs", &runs[key])
        );
    }
    s.push_str("</div><h3>Source type per Discovery position</h3>");
    s.push_str(&grid_table("position", &runs["source_type_per_position"]));
    s
}

/// Table of an object of objects: outer keys as rows, the union of inner keys as columns.
fn grid_table(row_head: &str, obj: &Value) -> String {
    let Some(o) = obj.as_object() else {
        return MISSING.into();
    };
    let mut cols: Vec<&str> = Vec::new();
    for inner in o.values().filter_map(Value::as_object) {
        for k in inner.keys() {
            if !cols.contains(&k.as_str()) {
                cols.push(k);
            }
        }
    }
    let rows: Vec<Vec<String>> = o
        .iter()
        .map(|(k, inner)| {
            std::iter::once(k.clone())
                .chain(cols.iter().map(|c| txt(&inner[*c])))
                .collect()
        })
        .collect();
    let headers: Vec<&str> = std::iter::once(row_head).chain(cols.clone()).collect();
    table(None, &headers, &rows)
}

fn exposure(m: &Value) -> String {
    let Some(ex) = m["exposure"].as_object() else {
        return MISSING.into();
    };
    const COLS: [(&str, &str); 7] = [
        ("confidential_payloads", "confidential payloads"),
        ("beyond_target", "beyond target"),
        ("sensitive_beyond_target", "sensitive beyond target"),
        ("mean_extra_attributes", "mean extra attributes"),
        ("beyond_target_by_category", "beyond target, by category"),
        ("public_payloads", "public payloads"),
        ("public_beyond_target", "public beyond target"),
    ];
    let headers: Vec<&str> = std::iter::once("category")
        .chain(COLS.iter().map(|c| c.1))
        .collect();
    let rows: Vec<Vec<String>> = ex
        .iter()
        .map(|(k, v)| {
            std::iter::once(k.clone())
                .chain(COLS.iter().map(|c| txt(&v[c.0])))
                .collect()
        })
        .collect();
    let items: Vec<(String, f64)> = ex
        .iter()
        .map(|(k, v)| {
            let n = v["sensitive_beyond_target"].as_f64().unwrap_or(0.0);
            (k.clone(), n)
        })
        .collect();
    let mut s = String::from("<p>Per contract category: how many payloads reveal persona attributes beyond the task's target, and how many of those reveal attributes of another sensitive category.</p>");
    s.push_str(&table(Some("exposure-table"), &headers, &rows));
    s.push_str("<h3>Confidential payloads revealing another sensitive category</h3>");
    s.push_str(&hbars(
        "sensitive payloads beyond target per category",
        &items,
    ));
    s
}

fn provenance(m: &Value) -> String {
    let mut s = String::from("<h3>Identity fields</h3>");
    match m.get("identity") {
        Some(Value::Null) => s.push_str(NO_IDENTITY),
        Some(id) if id["fields"].is_object() => s.push_str(&identity(id)),
        _ => s.push_str(MISSING),
    }
    s.push_str("<h3>Persona binding</h3>");
    s.push_str(&map_table("binding", "value", &m["binding"]));
    s.push_str("<h3>Contract review votes</h3>");
    let r = &m["contracts"]["report"];
    if r.is_object() {
        let _ = write!(
            s,
            "<p>{} votes, aggregation {}; {} rewrites.</p><h4>First-round outcome</h4>{}",
            esc(&txt(&r["votes"])),
            esc(&txt(&r["aggregation"])),
            esc(&txt(&r["rewrites"])),
            map_table("outcome", "contracts", &r["first_round"]),
        );
        if r["persona_accept_rate"].is_object() {
            s.push_str("<h4>Acceptance rate per reviewer persona</h4>");
            s.push_str(&map_table(
                "reviewer",
                "acceptance rate",
                &r["persona_accept_rate"],
            ));
        }
    } else {
        s.push_str(MISSING);
    }
    s
}

/// Where each identity field's values came from: stacked bar and table per field.
fn identity(id: &Value) -> String {
    const PARTS: [&str; 3] = ["llm", "llm_repaired", "fallback"];
    let fields = id["fields"].as_object().into_iter().flatten();
    let mut bars = Vec::new();
    let mut rows = Vec::new();
    for (name, r) in fields {
        bars.push((
            name.clone(),
            PARTS.map(|p| r[p].as_f64().unwrap_or(0.0)).to_vec(),
        ));
        rows.push(
            std::iter::once(name.clone())
                .chain(
                    PARTS
                        .iter()
                        .chain(&["initial_failures"])
                        .map(|p| txt(&r[*p])),
                )
                .collect(),
        );
    }
    let mut s = format!(
        "<p>{} profiles, {} repair rounds. Values that failed a check and were not repaired were replaced by a fallback valid by construction.</p>",
        esc(&txt(&id["profiles"])),
        esc(&txt(&id["repair_rounds"])),
    );
    s.push_str(&stacked_bars(
        "identity field provenance: llm, llm repaired, fallback",
        &PARTS,
        &bars,
    ));
    s.push_str(&table(
        Some("identity-table"),
        &[
            "field",
            "llm",
            "llm_repaired",
            "fallback",
            "initial_failures",
        ],
        &rows,
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn calibration_report() -> CalibrationReport {
        serde_json::from_value(json!({
            "candidates": {"requested": 10, "target_informed": 8, "uniform": 2, "backfill": 0,
                "duplicates_skipped": 0, "rule_rejections": {}, "draws": 10},
            "final_total_l1": 0.25, "pool_size": 10, "backfill_rounds": 0, "deficits_per_round": [],
            "ipf": {"converged": true, "sweeps": 2, "tolerance": 0.001, "per_sweep_max_l1": [0.1, 0.0005],
                "final_l1": {}, "max_l1": 0.0005, "weight_min_positive": 0.5, "weight_max": 2.0,
                "zero_weight_candidates": 0, "effective_sample_size": 9.0,
                "max_ideal_inclusion_probability": 0.4},
            "sampling": {"n": 4, "trials": 2, "best_trial": 1, "swap_iterations": 10, "swaps_accepted": 3,
                "sample_l1": {}, "plain_draw_l1": {}, "best_trial_l1": {}, "floor_l1": {},
                "sample_total_l1": 0.3, "plain_draw_total_l1": 0.9, "best_trial_total_l1": 0.5,
                "floor_total_l1": 0.1},
            "margins": [
                {"name": "country", "file": "country.csv", "fields": ["current_country"], "status": "derived",
                 "pool_l1": 0.001, "sample_l1": 0.1, "plain_draw_l1": 0.3, "floor_l1": 0.05,
                 "cells": [{"cell": ["A"], "target": 0.6, "pool": 0.6, "sample": 0.5},
                           {"cell": ["B"], "target": 0.4, "pool": 0.4, "sample": 0.5}]},
                {"name": "sex", "file": "sex.csv", "fields": ["sex"], "status": "assumption",
                 "pool_l1": 0.0, "sample_l1": 0.15, "plain_draw_l1": 0.2, "floor_l1": 0.05,
                 "cells": [{"cell": ["f"], "target": 0.5, "pool": 0.5, "sample": 0.5}]}
            ]
        }))
        .unwrap()
    }

    fn manifest() -> Value {
        json!({
            "bundle_format": "privforge-bundle/0", "bundle_version": "9.9.9",
            "build_date": "2026-01-02", "generator": {"name": "privforge", "version": "0.1.0"},
            "seed": 7,
            "counts": {"profiles": 4, "candidates": 10, "margins": 2, "contracts": 4, "votes": 12,
                "categories": 2, "skills": 13, "skill_folders": 52, "personas": 4, "payloads": 20,
                "runs": 16},
            "runs": {
                "per_category": {"health": 8, "<script>alert(1)</script>": 8},
                "per_guidance": {"neutral": 8, "label": 8},
                "per_pressure": {"baseline": 16},
                "per_order": {"1": 8, "2": 8},
                "source_type_per_position": {"1": {"public": 8, "user": 8}, "2": {"user": 8, "public": 8}}
            },
            "binding": {"contracts": 4, "personas": 4, "tasks_per_persona": {"1": 4}, "relaxed": 0},
            "exposure": {
                "health": {"confidential_payloads": 2, "beyond_target": 2, "sensitive_beyond_target": 1,
                    "beyond_target_by_category": {"ordinary": 2, "financial_information": 1},
                    "mean_extra_attributes": 3.5, "public_payloads": 2, "public_beyond_target": 2}
            },
            "gates": {"passed": false, "results": [
                {"name": "g_ok", "stage": "run_matrix", "description": "fine", "passed": true, "checked": 5, "failures": 0},
                {"name": "g_bad", "stage": "data_planning", "description": "x <script>alert(2)</script>", "passed": false, "checked": 5, "failures": 2},
                {"name": "g_ok2", "stage": "run_matrix", "description": "fine too", "passed": true, "checked": 1, "failures": 0}
            ]},
            "identity": {"profiles": 4, "repair_rounds": 1, "fields": {
                "name": {"llm": 3, "llm_repaired": 0, "fallback": 1, "initial_failures": 1, "repair_requests": 1},
                "email": {"llm": 2, "llm_repaired": 1, "fallback": 1, "initial_failures": 2, "repair_requests": 2}
            }},
            "contracts": {"reviewed": true, "report": {"aggregation": "majority", "votes": 12, "rewrites": 1,
                "first_round": {"accepted": 2, "rejected": 1, "split": 1},
                "persona_accept_rate": {"privacy_counsel": 0.5}}}
        })
    }

    /// The text of the element that starts at `open` up to the first `close` after it.
    fn slice<'a>(html: &'a str, open: &str, close: &str) -> &'a str {
        let start = html
            .find(open)
            .unwrap_or_else(|| panic!("{open} not found"));
        let end = start + html[start..].find(close).unwrap();
        &html[start..end]
    }

    #[test]
    fn every_section_is_present_once() {
        let html = render_report(&manifest(), &calibration_report());
        assert!(html.starts_with("<!doctype html><html lang=\"en\">"));
        for (id, _) in SECTIONS {
            let tag = format!(r#"<section id="{id}""#);
            assert_eq!(html.matches(&tag).count(), 1, "{id}");
        }
        assert!(!html.contains("Not in this bundle"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("http"), "no external references");
        // One chart per margin plus the convergence chart.
        let cal = slice(&html, r#"<section id="calibration-charts""#, "</section>");
        assert_eq!(cal.matches("<svg").count(), 3);
        assert!(cal.contains(r#"aria-label="target vs achieved for sex""#));
        assert!(cal.contains("<td>0.2500</td>") && cal.contains("<td>0.1000</td>"));
        // Contracts per category derived from 16 runs / 4 contracts = 4 runs per contract.
        let cat = slice(&html, r#"<table id="category-table""#, "</table>");
        assert!(cat.contains("<td>8</td><td>2</td>"), "{cat}");
    }

    #[test]
    fn gate_table_has_a_row_per_gate_and_marks_failures() {
        let html = render_report(&manifest(), &calibration_report());
        let t = slice(&html, r#"<table id="gate-table""#, "</table>");
        let body = slice(t, "<tbody>", "</tbody>");
        assert_eq!(body.matches("<tr>").count(), 3);
        let bad = slice(body, "g_bad", "</tr>");
        assert!(bad.contains(r#"class="fail">✗"#), "{bad}");
        assert_eq!(body.matches(r#"class="pass""#).count(), 2);
        let gates = slice(&html, r#"<section id="gates""#, "</section>");
        assert!(gates.contains(r#"<p class="fail">✗ Coherence gates failed (1 of 3): g_bad.</p>"#));
    }

    #[test]
    fn text_is_escaped() {
        let html = render_report(&manifest(), &calibration_report());
        assert!(!html.contains("<script>"));
        assert!(html.contains("x &lt;script&gt;alert(2)&lt;/script&gt;"));
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn identity_provenance_or_the_fallback_sentence() {
        let cal = calibration_report();
        let html = render_report(&manifest(), &cal);
        let prov = slice(&html, r#"<section id="provenance""#, "</section>");
        assert!(!prov.contains("Identity completion was off"));
        assert_eq!(
            prov.matches(r#"class="p2""#).count(),
            3,
            "two fallback bars and a legend key"
        );
        assert!(
            prov.contains("<th scope=\"row\">email</th><td>2</td><td>1</td><td>1</td><td>2</td>")
        );

        let mut m = manifest();
        m["identity"] = Value::Null;
        let html = render_report(&m, &cal);
        let prov = slice(&html, r#"<section id="provenance""#, "</section>");
        assert!(prov.contains(NO_IDENTITY));
        assert!(!prov.contains("<svg"));
    }

    #[test]
    fn missing_parts_say_so_without_panicking() {
        let html = render_report(&json!({}), &calibration_report());
        for (id, _) in SECTIONS {
            assert!(html.contains(&format!(r#"<section id="{id}""#)), "{id}");
        }
        for id in ["gates", "balance", "exposure"] {
            let sec = slice(&html, &format!(r#"<section id="{id}""#), "</section>");
            assert!(sec.contains(MISSING), "{id}");
        }
        let prov = slice(&html, r#"<section id="provenance""#, "</section>");
        assert_eq!(prov.matches(MISSING).count(), 3);
        let summary = slice(&html, r#"<section id="summary""#, "</section>");
        assert!(summary.contains(MISSING));
    }

    /// Renders the committed reference bundle; set PRIVFORGE_REPORT_OUT to keep the page.
    #[test]
    #[ignore = "reads outputs/reference"]
    fn reference_bundle() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("outputs/reference");
        let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
        let m: Value = serde_json::from_slice(&read("manifest.json")).unwrap();
        let cal: CalibrationReport = serde_json::from_slice(&read("calibration.json")).unwrap();
        let html = render_report(&m, &cal);
        assert_eq!(html, render_report(&m, &cal));
        for (id, _) in SECTIONS {
            assert!(html.contains(&format!(r#"<section id="{id}""#)), "{id}");
        }
        assert!(!html.contains("Not in this bundle"));
        let body = slice(&html, r#"<table id="gate-table""#, "</tbody>");
        assert_eq!(
            body.matches("<tr>").count(),
            m["gates"]["results"].as_array().unwrap().len() + 1
        );
        let charts = slice(&html, r#"<section id="calibration-charts""#, "</section>");
        assert_eq!(charts.matches("<svg").count(), cal.margins.len() + 1);
        eprintln!("report.html for the reference bundle: {} bytes", html.len());
        if let Some(out) = std::env::var_os("PRIVFORGE_REPORT_OUT") {
            std::fs::write(out, &html).unwrap();
        }
    }
}
