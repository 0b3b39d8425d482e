//! `privforge bench ipf`: times this crate's IPF on the reference margins and a fresh
//! candidate pool, then the Python `ipfn` package (dataframe mode) on the identical problem,
//! and prints both times and their ratio.

use crate::calibration::{self, EncodedMargin};
use crate::candidates;
use crate::fsio::write_atomic;
use crate::profile::Person;
use crate::stages::Inputs;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

pub struct IpfBenchOptions<'a> {
    pub config: &'a Path,
    pub candidates: usize,
    pub repeat: usize,
    pub export: &'a Path,
    /// Python interpreter with ipfn installed; `None` skips the peer.
    pub python: Option<&'a Path>,
    pub peer_script: &'a Path,
}

/// Writes the problem in the directory format the peer script reads.
fn export(dir: &Path, inp: &Inputs, pool: &[Person], tol: f64, max_sweeps: usize) -> Result<()> {
    let mut fields: Vec<String> = Vec::new();
    for m in &inp.margins.margins {
        for f in &m.fields {
            if !fields.contains(f) {
                fields.push(f.clone());
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&fields)?;
    for p in pool {
        w.write_record(fields.iter().map(|f| p.get(f).unwrap_or("")))?;
    }
    write_atomic(&dir.join("candidates.csv"), &w.into_inner()?)?;
    for m in &inp.margins.margins {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut h = m.fields.clone();
        h.push("share".into());
        w.write_record(&h)?;
        for (cell, s) in m.cells.iter().zip(&m.shares) {
            let mut r = cell.clone();
            r.push(format!("{s}"));
            w.write_record(&r)?;
        }
        write_atomic(
            &dir.join("margins").join(format!("{}.csv", m.name)),
            &w.into_inner()?,
        )?;
    }
    write_atomic(
        &dir.join("problem.json"),
        serde_json::to_string_pretty(&json!({"tolerance": tol, "max_sweeps": max_sweeps}))?
            .as_bytes(),
    )
}

pub fn ipf(opts: &IpfBenchOptions) -> Result<Value> {
    let inp = Inputs::load(opts.config)?;
    let cfg = &inp.config;
    let (pool, _) = candidates::generate(
        cfg.seed,
        opts.candidates,
        cfg.population.lambda,
        cfg.population.attempts_factor,
        &inp.taxonomy,
        &inp.margins,
        &|_| {},
    )?;
    let enc: Vec<EncodedMargin> = calibration::encode(&inp.margins, &pool);
    let mut best = f64::INFINITY;
    let mut fit = None;
    for _ in 0..opts.repeat.max(1) {
        let t = Instant::now();
        let f = calibration::ipf(
            &enc,
            cfg.population.profiles,
            cfg.ipf.tolerance,
            cfg.ipf.max_sweeps,
        )?;
        best = best.min(t.elapsed().as_secs_f64());
        fit = Some(f);
    }
    let fit = fit.unwrap();
    let ours = json!({
        "seconds": best,
        "sweeps": fit.report.sweeps,
        "max_l1": fit.report.max_l1,
    });
    println!(
        "privforge IPF: {} candidates x {} margins, {} sweeps, max L1 {:.6} (tolerance {}), best of {}: {:.4} s",
        pool.len(),
        enc.len(),
        fit.report.sweeps,
        fit.report.max_l1,
        cfg.ipf.tolerance,
        opts.repeat.max(1),
        best
    );
    let mut result = json!({"candidates": pool.len(), "margins": enc.len(), "tolerance": cfg.ipf.tolerance, "privforge": ours});
    let Some(python) = opts.python else {
        return Ok(result);
    };
    export(
        opts.export,
        &inp,
        &pool,
        cfg.ipf.tolerance,
        cfg.ipf.max_sweeps,
    )?;
    let out = std::process::Command::new(python)
        .arg(opts.peer_script)
        .arg(opts.export)
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !out.status.success() {
        bail!("ipfn peer failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let peer: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        anyhow!(
            "ipfn peer printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    let ps = peer["seconds"]
        .as_f64()
        .ok_or_else(|| anyhow!("ipfn peer reported no seconds"))?;
    println!(
        "ipfn {} (dataframe mode): {:.3} s, max L1 {:.6}, tolerance met: {}",
        peer["ipfn_version"].as_str().unwrap_or("?"),
        ps,
        peer["max_l1"].as_f64().unwrap_or(f64::NAN),
        peer["met_tolerance"]
    );
    println!(
        "speed-up: {:.1}x (ipfn seconds / privforge seconds)",
        ps / best
    );
    result["ipfn"] = peer;
    result["ratio"] = json!(ps / best);
    Ok(result)
}

/// `privforge bench validate`: deterministic validation throughput over `n` profiles with
/// identities (fallback identities; every check of every field, plus uniqueness).
pub fn validate(config: &Path, n: usize) -> Result<Value> {
    use crate::identity::{email, govid::Date, validate, Holder};
    let cfg = crate::config::Config::load(config)?;
    let reference = Date::parse(&cfg.date)
        .ok_or_else(|| anyhow!("config date {:?} is not a date", cfg.date))?;
    let t_gen = Instant::now();
    let (tax, rows) = crate::identity::sample_with_fallbacks(
        &cfg.paths.taxonomy,
        &cfg.paths.margins,
        n,
        cfg.seed,
        reference,
    )?;
    let gen_secs = t_gen.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let mut problems = 0usize;
    let mut emails = std::collections::HashSet::with_capacity(n);
    let mut phones = std::collections::HashSet::with_capacity(n);
    let mut ids = std::collections::HashSet::with_capacity(n);
    for (p, dob, id) in &rows {
        let h = Holder {
            person: p,
            date_of_birth: *dob,
            reference,
        };
        problems += validate(&tax, &h, id).0.len();
        problems += usize::from(!emails.insert(email::unique_key(&id.email)));
        problems += usize::from(!phones.insert(id.phone_number.clone()));
        problems += usize::from(!ids.insert(id.government_id.clone()));
    }
    let secs = t0.elapsed().as_secs_f64();
    // Where the time goes, field by field.
    let mut per_field = Vec::new();
    let t = Instant::now();
    for (p, _, id) in &rows {
        let regions: Vec<&str> = [&p.citizenship, &p.current_country]
            .iter()
            .filter_map(|c| tax.country_by_name(c).map(|c| c.iso2.as_str()))
            .collect();
        let _ = crate::identity::phone::check(&id.phone_number, &regions);
    }
    per_field.push(("phone_number", t.elapsed().as_secs_f64()));
    let t = Instant::now();
    for (p, _, id) in &rows {
        if let Some(s) = tax
            .country_by_name(&p.citizenship)
            .and_then(|c| crate::identity::govid::for_country(&c.iso3))
        {
            let _ = s.decode(&id.government_id);
        }
    }
    per_field.push(("government_id", t.elapsed().as_secs_f64()));
    let t = Instant::now();
    for (p, _, id) in &rows {
        let scripts =
            crate::identity::name::scripts_for(&tax, &[&p.citizenship, &p.current_country]);
        let _ = crate::identity::name::check(&id.name, &scripts);
        let _ = email::check(&id.email);
    }
    per_field.push(("name+email", t.elapsed().as_secs_f64()));
    for (f, s) in &per_field {
        println!("  {f}: {:.0} profiles/s", n as f64 / s);
    }
    println!(
        "validation: {n} profiles (name, email, phone, government id with decoding and agreement, uniqueness) in {secs:.2} s = {:.0} profiles/s on one thread; {problems} problems found (duplicates among random fallbacks included); generating them took {gen_secs:.1} s",
        n as f64 / secs
    );
    Ok(
        json!({"profiles": n, "seconds": secs, "profiles_per_second": n as f64 / secs, "problems": problems}),
    )
}
