//! `calibration.html`: one self-contained page (inline SVG, no external assets) showing,
//! per margin, target against achieved shares, and the IPF convergence.

use crate::bundle::{CalibrationReport, MarginResult};
use serde_json::Value;
use std::fmt::Write;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn f(x: f64) -> String {
    format!("{x:.4}")
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
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" role="img" aria-label="target vs achieved for {name}" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#,
        name = esc(&m.name),
        w = label_w + plot_w + 130.0,
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
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="chart" role="img" aria-label="target vs achieved for {name}" width="{w}" height="{w}" viewBox="0 0 {w} {w}"><line x1="{pad}" y1="{b}" x2="{e}" y2="{pad}" class="diag"/><line x1="{pad}" y1="{b}" x2="{e}" y2="{b}" class="axis"/><line x1="{pad}" y1="{b}" x2="{pad}" y2="{pad}" class="axis"/><text x="{mid}" y="{lb}" text-anchor="middle" class="lbl">target share (max {mx})</text><text x="12" y="{mid}" transform="rotate(-90 12 {mid})" text-anchor="middle" class="lbl">achieved share</text>"#,
        name = esc(&m.name),
        w = size + 2.0 * pad,
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
        r#"<svg class="chart" role="img" aria-label="IPF convergence" width="{w}" height="{h}" viewBox="0 0 {w} {h}"><line x1="{pad}" x2="{e}" y1="{ty:.1}" y2="{ty:.1}" class="tol"/><text x="{e}" y="{tl:.1}" text-anchor="end" class="lbl">tolerance {tol}</text><polyline points="{pts}" class="line"/><text x="{pad}" y="{hy}" class="lbl">1e{hi}</text><text x="{pad}" y="{ly}" class="lbl">1e{lo}</text><text x="{mid}" y="{by}" text-anchor="middle" class="lbl">sweep (1..{len})</text></svg>"#,
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

pub fn render(manifest: &Value, report: &CalibrationReport) -> String {
    let mut s = String::new();
    let title = format!(
        "PrivForge bundle {} — calibration",
        manifest["bundle_version"].as_str().unwrap_or("?")
    );
    let _ = write!(
        s,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{t}</title><style>
body{{font-family:system-ui,sans-serif;margin:2rem;color:#222;max-width:1100px}}
table{{border-collapse:collapse;margin:1rem 0}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#f3f3f3}}td:first-child{{text-align:left}}
.chart{{display:block;margin:.5rem 0 1.5rem}}.lbl{{font-size:10px;fill:#333}}.val{{font-size:10px;fill:#666}}
.target{{fill:none;stroke:#1f4e79;stroke-width:1}}.sample{{fill:#7fb3d5}}.pool{{stroke:#c0392b;stroke-width:1.5;fill:none}}
.dot{{fill:#1f77b4;opacity:.7}}.diag{{stroke:#999;stroke-dasharray:4 3}}.axis{{stroke:#333}}.line{{fill:none;stroke:#1f77b4;stroke-width:1.5}}.tol{{stroke:#c0392b;stroke-dasharray:4 3}}
.status-assumption{{color:#a04000}}.status-derived{{color:#1e6b30}}
</style></head><body><h1>{t}</h1>"#,
        t = esc(&title)
    );
    let c = &manifest["calibration"];
    let _ = write!(
        s,
        "<p>Seed {seed}, build date {date}. {np} profiles sampled from a calibrated pool of {pool} candidates ({bf} added by backfill in {br} rounds).</p>\
         <p>IPF: {sw} sweeps, max L1 of the weighted pool <b>{ml}</b> (tolerance {tol}); effective sample size {ess:.0}; max ideal inclusion probability {mip:.3}.</p>\
         <p>Sample: total L1 over margins <b>{fin}</b> (before the seed audit's replacements {st}); best of {tr} weighted draws {bt}; a plain single weighted draw {pt}; rounding floor {ft}.</p>",
        fin = f(report.final_total_l1),
        seed = manifest["seed"],
        date = esc(manifest["build_date"].as_str().unwrap_or("")),
        np = manifest["counts"]["profiles"],
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
    let _ = c;
    s.push_str("<h2>IPF convergence</h2>");
    s.push_str(&convergence(
        &report.ipf.per_sweep_max_l1,
        report.ipf.tolerance,
    ));
    s.push_str("<h2>Margins</h2><table id=\"margins\"><tr><th>margin</th><th>status</th><th>cells</th><th>pool L1</th><th>sample L1</th><th>plain draw L1</th><th>floor L1</th></tr>");
    for m in &report.margins {
        let st = serde_json::to_value(&m.status).unwrap();
        let st = st.as_str().unwrap_or("");
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
    for m in &report.margins {
        let _ = write!(
            s,
            "<h3 id=\"m-{n}\">{n} <small>({fields})</small></h3>",
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
    s.push_str("</body></html>\n");
    s
}
