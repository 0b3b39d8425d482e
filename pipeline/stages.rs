//! Runs a build: validates every input first, then the stages in order, each reading the
//! previous stage's artifact from the work directory and writing its own.

use crate::calibration::{self, Deficit, IpfReport};
use crate::candidates::{self, CandidateReport};
use crate::config::{Config, LlmMode};
use crate::fsio::{to_json_pretty, write_atomic};
use crate::margins::MarginSet;
use crate::profile::Person;
use crate::sampling::{self, SamplingReport};
use crate::taxonomy::Taxonomy;
use anyhow::{anyhow, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Everything a build reads, loaded and validated before any output is touched.
pub struct Inputs {
    pub config_path: PathBuf,
    pub config: Config,
    pub taxonomy: Taxonomy,
    pub margins: MarginSet,
    pub content: crate::content::Content,
}

impl Inputs {
    /// Loads and validates every input; content that fails the policy validation stops the
    /// build here, before anything is written.
    pub fn load(config_path: &Path) -> Result<Self> {
        let config = Config::load(config_path)?;
        let taxonomy = Taxonomy::load(&config.paths.taxonomy)?;
        let margins = MarginSet::load(&config.paths.margins, &taxonomy)?;
        let content = crate::content::Content::load(&config.paths.taxonomy)?;
        let findings = crate::policy_validation::validate(&content);
        if !findings.is_empty() {
            return Err(crate::policy_validation::findings_error(
                "content validation",
                &findings,
            ));
        }
        Ok(Self {
            config_path: config_path.to_path_buf(),
            config,
            taxonomy,
            margins,
            content,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalibrationArtifact {
    pub pool_size: usize,
    pub candidates: CandidateReport,
    pub backfill_rounds: usize,
    /// Deficits found in each round before its backfill.
    pub deficits_per_round: Vec<usize>,
    pub ipf: IpfReport,
    pub weights: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SampleArtifact {
    pub selected_candidate_ids: Vec<String>,
    pub report: SamplingReport,
}

fn stage_bar(name: &str, len: u64) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {msg}")
            .unwrap()
            .progress_chars("=> "),
    );
    pb.set_prefix(name.to_string());
    pb
}

pub fn write_jsonl<T: Serialize>(path: &Path, items: &[T]) -> Result<()> {
    let mut buf = BufWriter::new(Vec::new());
    for it in items {
        serde_json::to_writer(&mut buf, it)?;
        buf.write_all(b"\n")?;
    }
    write_atomic(path, &buf.into_inner()?)
}

pub fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line?;
        out.push(
            serde_json::from_str(&line)
                .map_err(|e| anyhow!("{}:{}: {e}", path.display(), i + 1))?,
        );
    }
    Ok(out)
}

/// Pool indices of candidate ids named by an artifact.
pub fn resolve_ids(pool: &[Person], ids: &[String]) -> Result<Vec<usize>> {
    let by_id: std::collections::HashMap<&str, usize> = pool
        .iter()
        .enumerate()
        .map(|(i, p)| (p.candidate_id.as_str(), i))
        .collect();
    ids.iter()
        .map(|id| {
            by_id
                .get(id.as_str())
                .copied()
                .ok_or_else(|| anyhow!("work artifact names unknown candidate {id}"))
        })
        .collect()
}

/// The calibrated pool: the base candidates followed by the backfilled ones.
pub fn read_pool(work: &Path) -> Result<Vec<Person>> {
    let mut pool: Vec<Person> = read_jsonl(&work.join("candidates.jsonl"))?;
    pool.extend(read_jsonl::<Person>(&work.join("backfill.jsonl"))?);
    Ok(pool)
}

/// A typed work artifact, with an error naming the file.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: unexpected content", path.display()))
}

/// Stage 1.
pub fn run_candidates(inp: &Inputs, work: &Path) -> Result<()> {
    let c = &inp.config;
    let pb = stage_bar("candidates", c.population.candidates as u64);
    let (pool, report) = candidates::generate(
        c.seed,
        c.population.candidates,
        c.population.lambda,
        c.population.attempts_factor,
        &inp.taxonomy,
        &inp.margins,
        &|n| pb.set_position(n),
    )?;
    pb.finish_and_clear();
    write_jsonl(&work.join("candidates.jsonl"), &pool)?;
    write_atomic(
        &work.join("candidates.report.json"),
        &to_json_pretty(&report)?,
    )?;
    eprintln!(
        "candidates: {} unique ({} target-informed, {} uniform), {} duplicates skipped",
        pool.len(),
        report.target_informed,
        report.uniform,
        report.duplicates_skipped
    );
    Ok(())
}

/// Stage 2.
pub fn run_calibration(inp: &Inputs, work: &Path) -> Result<()> {
    let c = &inp.config;
    let mut pool: Vec<Person> = read_jsonl(&work.join("candidates.jsonl"))?;
    let mut report: CandidateReport = read_json(&work.join("candidates.report.json"))?;
    let base_len = pool.len();
    let mut seen: HashSet<String> = pool.iter().map(|p| p.seed_key()).collect();
    let n = c.population.profiles;
    let mut deficits_per_round = Vec::new();
    let mut rounds = 0;
    loop {
        let deficits = calibration::capacity_deficits(&inp.margins, &pool, n);
        deficits_per_round.push(deficits.len());
        if deficits.is_empty() {
            break;
        }
        if rounds == c.ipf.backfill_rounds {
            let list: Vec<String> = deficits
                .iter()
                .take(10)
                .map(|(_, _, d): &(usize, usize, Deficit)| {
                    format!(
                        "{} [{}] needs {} candidates, has {}",
                        d.margin,
                        d.cell.join(" | "),
                        d.required,
                        d.available
                    )
                })
                .collect();
            return Err(anyhow!(
                "capacity check failed after {rounds} backfill rounds: {} cells lack candidates: {}{}",
                deficits.len(),
                list.join("; "),
                if deficits.len() > 10 { "; ..." } else { "" }
            ));
        }
        rounds += 1;
        for (mi, ci, d) in &deficits {
            candidates::backfill_cell(
                c.seed,
                rounds,
                &inp.margins.margins[*mi],
                *ci,
                d.required - d.available,
                c.population.attempts_factor,
                &inp.taxonomy,
                &inp.margins,
                &mut pool,
                &mut seen,
                &mut report,
            )?;
        }
    }
    let pb = ProgressBar::new_spinner();
    pb.set_message("calibration: IPF");
    let enc = calibration::encode(&inp.margins, &pool);
    let fit = calibration::ipf(&enc, n, c.ipf.tolerance, c.ipf.max_sweeps)?;
    pb.finish_and_clear();
    eprintln!(
        "calibration: pool {} (backfill {} in {rounds} rounds), IPF {} sweeps, max L1 {:.6}, ESS {:.0}",
        pool.len(),
        report.backfill,
        fit.report.sweeps,
        fit.report.max_l1,
        fit.report.effective_sample_size
    );
    write_jsonl(&work.join("backfill.jsonl"), &pool[base_len..])?;
    let art = CalibrationArtifact {
        pool_size: pool.len(),
        candidates: report,
        backfill_rounds: rounds,
        deficits_per_round,
        ipf: fit.report,
        weights: fit.weights,
    };
    write_atomic(&work.join("calibration.json"), &to_json_pretty(&art)?)
}

const POOL_AUDIT: &str = "seed_audit.pool.json";

fn whole_pool(c: &Config) -> bool {
    c.seed_audit.enabled && c.seed_audit.mode == crate::seed_audit::AuditMode::WholePool
}

/// The whole-pool audit: every candidate's verdict and the calibration refitted on the
/// accepted ones (rejected candidates keep weight 0).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolAuditArtifact {
    pub verdicts: Vec<crate::seed_audit::Verdict>,
    pub report: crate::seed_audit::AuditReport,
    pub accepted: usize,
    pub ipf: IpfReport,
    pub weights: Vec<f64>,
    pub llm: crate::llm::LlmSummary,
}

/// Stage 2b, whole-pool seed audit only: audits every calibrated candidate, then refits the
/// IPF on the accepted ones. The capacity check is repeated on them, so a build whose audit
/// empties a cell fails naming it.
pub fn run_pool_audit(inp: &Inputs, work: &Path, mode: LlmMode) -> Result<()> {
    let c = &inp.config;
    if !whole_pool(c) {
        let _ = std::fs::remove_file(work.join(POOL_AUDIT));
        return Ok(());
    }
    let pool = read_pool(work)?;
    let settings = &c.llm.stages["seed_audit"];
    let template = crate::llm::prompts::Template::load(&c.llm.prompts, &settings.template)?;
    let session = LlmSession::start(
        c,
        mode,
        work,
        crate::seed_audit::STAGE,
        "seed audit (whole pool)",
    )?;
    let client = &session.client;
    let outcome = session.rt.block_on(crate::seed_audit::run_pool(
        client,
        crate::seed_audit::Auditor {
            tax: &inp.taxonomy,
            pool: &pool,
            seed: c.seed,
            settings,
            template: &template,
        },
    ));
    let outcome = session.finish(outcome)?;
    let kept: Vec<Person> = pool
        .iter()
        .zip(&outcome.accepted)
        .filter(|(_, &a)| a)
        .map(|(p, _)| p.clone())
        .collect();
    let n = c.population.profiles;
    let deficits = calibration::capacity_deficits(&inp.margins, &kept, n);
    if !deficits.is_empty() {
        let list: Vec<String> = deficits
            .iter()
            .take(10)
            .map(|(_, _, d)| {
                format!(
                    "{} [{}] needs {}, {} accepted",
                    d.margin,
                    d.cell.join(" | "),
                    d.required,
                    d.available
                )
            })
            .collect();
        return Err(anyhow!(
            "whole-pool seed audit: {} cells lack accepted candidates: {}",
            deficits.len(),
            list.join("; ")
        ));
    }
    let fit = calibration::ipf(
        &calibration::encode(&inp.margins, &kept),
        n,
        c.ipf.tolerance,
        c.ipf.max_sweeps,
    )
    .context("refitting the calibration on the audited pool")?;
    let mut kept_weights = fit.weights.into_iter();
    let weights: Vec<f64> = outcome
        .accepted
        .iter()
        .map(|&a| {
            if a {
                kept_weights.next().unwrap_or(0.0)
            } else {
                0.0
            }
        })
        .collect();
    eprintln!(
        "seed audit (whole pool): {} audited, {} accepted; IPF refit {} sweeps, max L1 {:.6}",
        outcome.report.audited,
        kept.len(),
        fit.report.sweeps,
        fit.report.max_l1
    );
    let mut report = outcome.report;
    report.refit_ipf = Some(fit.report.clone());
    let art = PoolAuditArtifact {
        verdicts: outcome.verdicts,
        report,
        accepted: kept.len(),
        ipf: fit.report,
        weights,
        llm: crate::llm::summary(client, &[&template])?,
    };
    write_atomic(&work.join(POOL_AUDIT), &to_json_pretty(&art)?)
}

/// Stage 3.
pub fn run_sampling(inp: &Inputs, work: &Path) -> Result<()> {
    let c = &inp.config;
    let pool = read_pool(work)?;
    let weights = if whole_pool(c) {
        read_json::<PoolAuditArtifact>(&work.join(POOL_AUDIT))?.weights
    } else {
        read_json::<CalibrationArtifact>(&work.join("calibration.json"))?.weights
    };
    if weights.len() != pool.len() {
        return Err(anyhow!(
            "work artifacts disagree: {} weights for {} candidates",
            weights.len(),
            pool.len()
        ));
    }
    let pb = ProgressBar::new_spinner();
    pb.set_message("sampling: weighted draws and refinement");
    let enc = calibration::encode(&inp.margins, &pool);
    let sel = sampling::select(
        &enc,
        &weights,
        c.population.profiles,
        c.seed,
        c.sampling.trials,
        c.sampling.swap_iterations,
    )?;
    pb.finish_and_clear();
    eprintln!(
        "sampling: total L1 {:.4} (best of {} draws {:.4}, plain draw {:.4}, floor {:.4}); {} swaps",
        sel.report.sample_total_l1,
        c.sampling.trials,
        sel.report.best_trial_total_l1,
        sel.report.plain_draw_total_l1,
        sel.report.floor_total_l1,
        sel.report.swaps_accepted
    );
    let art = SampleArtifact {
        selected_candidate_ids: sel
            .selected
            .iter()
            .map(|&i| pool[i].candidate_id.clone())
            .collect(),
        report: sel.report,
    };
    write_atomic(&work.join("sample.json"), &to_json_pretty(&art)?)
}

/// The selection the bundle is built from, after the seed audit (or the sampling stage's
/// selection when the audit is off).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditArtifact {
    pub enabled: bool,
    pub selected_candidate_ids: Vec<String>,
    pub verdicts: Vec<crate::seed_audit::Verdict>,
    pub report: Option<crate::seed_audit::AuditReport>,
    pub llm: Option<crate::llm::LlmSummary>,
}

/// The client and runtime of one LLM stage.
struct LlmSession {
    rt: tokio::runtime::Runtime,
    client: crate::llm::client::LlmClient,
    pb: ProgressBar,
    work: PathBuf,
    stage: &'static str,
}

impl LlmSession {
    fn start(
        c: &Config,
        mode: LlmMode,
        work: &Path,
        stage: &'static str,
        label: &str,
    ) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let client = crate::llm::connect(c, mode, work)?;
        let pb = ProgressBar::new_spinner();
        pb.set_message(format!("{label} ({})", client.provider_name()));
        Ok(Self {
            rt,
            client,
            pb,
            work: work.to_path_buf(),
            stage,
        })
    }

    /// Flushes the transcript and keeps this run's statistics whatever the outcome; on
    /// success also records which stored answers the stage used (`llm-used-<stage>.jsonl`).
    fn finish<T>(&self, result: Result<T>) -> Result<T> {
        self.client.sync()?;
        self.pb.finish_and_clear();
        crate::llm::write_run_stats(&self.client, &self.work)?;
        let value = result?;
        write_atomic(
            &crate::llm::used_path(&self.work, self.stage),
            &crate::llm::transcript::canonical_bytes(&self.client.used_records())?,
        )?;
        Ok(value)
    }
}

/// Stage 4.
pub fn run_seed_audit(inp: &Inputs, work: &Path, mode: LlmMode) -> Result<()> {
    let c = &inp.config;
    let sample: SampleArtifact = read_json(&work.join("sample.json"))?;
    if !c.seed_audit.enabled {
        let _ = std::fs::remove_file(crate::llm::used_path(work, crate::seed_audit::STAGE));
        let art = AuditArtifact {
            enabled: false,
            selected_candidate_ids: sample.selected_candidate_ids,
            verdicts: vec![],
            report: None,
            llm: None,
        };
        return write_atomic(&work.join("seed_audit.json"), &to_json_pretty(&art)?);
    }
    let pool = read_pool(work)?;
    let selected = resolve_ids(&pool, &sample.selected_candidate_ids)?;
    if whole_pool(c) {
        // The sample was drawn from accepted candidates only; the audit is already done.
        let pa: PoolAuditArtifact = read_json(&work.join(POOL_AUDIT))?;
        if let Some(&i) = selected.iter().find(|&&i| pa.weights[i] <= 0.0) {
            return Err(anyhow!(
                "work artifacts disagree: sampled candidate {} was not accepted by the audit",
                pool[i].candidate_id
            ));
        }
        let enc = calibration::encode(&inp.margins, &pool);
        let l1 = sampling::sample_l1(&enc, &selected);
        let mut report = pa.report;
        report.sample_total_l1_after_replacement = l1.iter().sum();
        report.sample_l1_after_replacement = enc.iter().map(|m| m.name.clone()).zip(l1).collect();
        let art = AuditArtifact {
            enabled: true,
            selected_candidate_ids: sample.selected_candidate_ids,
            verdicts: pa.verdicts,
            report: Some(report),
            llm: Some(pa.llm),
        };
        return write_atomic(&work.join("seed_audit.json"), &to_json_pretty(&art)?);
    }
    let cal: CalibrationArtifact = read_json(&work.join("calibration.json"))?;
    let settings = &c.llm.stages["seed_audit"];
    let template = crate::llm::prompts::Template::load(&c.llm.prompts, &settings.template)?;
    let enc = calibration::encode(&inp.margins, &pool);
    let session = LlmSession::start(c, mode, work, crate::seed_audit::STAGE, "seed audit")?;
    let client = &session.client;
    let outcome = session.rt.block_on(crate::seed_audit::run(
        client,
        crate::seed_audit::AuditInput {
            auditor: crate::seed_audit::Auditor {
                tax: &inp.taxonomy,
                pool: &pool,
                seed: c.seed,
                settings,
                template: &template,
            },
            margins: &enc,
            weights: &cal.weights,
            selected,
            n: c.population.profiles,
            swap_iterations: c.sampling.swap_iterations,
            max_rounds: c.seed_audit.max_rounds,
        },
    ));
    let outcome = session.finish(outcome)?;
    let report = &outcome.report;
    eprintln!(
        "seed audit: {} audited in {} rounds, {} rejected by rules, {} by the LLM; total L1 after replacement {:.4}",
        report.audited,
        report.rounds,
        report.rule_rejections.values().sum::<usize>(),
        report.llm_rejections.values().sum::<usize>(),
        report.sample_total_l1_after_replacement
    );
    let art = AuditArtifact {
        enabled: true,
        selected_candidate_ids: outcome
            .selected
            .iter()
            .map(|&i| pool[i].candidate_id.clone())
            .collect(),
        verdicts: outcome.verdicts,
        report: Some(outcome.report),
        llm: Some(crate::llm::summary(client, &[&template])?),
    };
    write_atomic(&work.join("seed_audit.json"), &to_json_pretty(&art)?)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdentityArtifact {
    pub enabled: bool,
    pub identities: Vec<crate::identity_completion::CompletedIdentity>,
    pub report: Option<crate::identity_completion::IdentityReport>,
    pub llm: Option<crate::llm::LlmSummary>,
}

/// Stage 5.
pub fn run_identity(inp: &Inputs, work: &Path, mode: LlmMode) -> Result<()> {
    use crate::identity_completion as ic;
    let c = &inp.config;
    let used = crate::llm::used_path(work, ic::STAGE);
    if !c.identity.enabled {
        let _ = std::fs::remove_file(&used);
        let art = IdentityArtifact {
            enabled: false,
            identities: vec![],
            report: None,
            llm: None,
        };
        return write_atomic(&work.join("identity.json"), &to_json_pretty(&art)?);
    }
    let pool = read_pool(work)?;
    let audit: AuditArtifact = read_json(&work.join("seed_audit.json"))?;
    let selected = resolve_ids(&pool, &audit.selected_candidate_ids)?;
    let reference = crate::identity::govid::Date::parse(&c.date)
        .ok_or_else(|| anyhow!("config date {:?} is not a calendar date", c.date))?;
    let names = crate::identity::name::NameLists::load(&inp.taxonomy)?;
    let st = &c.llm.stages;
    let load = |name: &str| crate::llm::prompts::Template::load(&c.llm.prompts, &st[name].template);
    let templates = ic::Templates {
        completion: load(ic::STAGE)?,
        repair: load(ic::REPAIR_STAGE)?,
        audit: load(ic::AUDIT_STAGE)?,
    };
    let settings = ic::Settings {
        completion: &st[ic::STAGE],
        repair: &st[ic::REPAIR_STAGE],
        audit: &st[ic::AUDIT_STAGE],
        max_repair_rounds: c.identity.max_repair_rounds,
    };
    let session = LlmSession::start(c, mode, work, ic::STAGE, "identity completion")?;
    let client = &session.client;
    let result = session.rt.block_on(ic::run(
        client,
        ic::Input {
            tax: &inp.taxonomy,
            cities: &inp.margins.cities,
            names: &names,
            people: selected.iter().map(|&i| &pool[i]).collect(),
            reference,
            seed: c.seed,
            syntax_hints: c.identity.syntax_hints,
        },
        &templates,
        &settings,
    ));
    let (identities, report) = session.finish(result)?;
    for (f, r) in &report.fields {
        eprintln!(
            "identity {f}: {} llm, {} repaired, {} fallback ({} failed the first check)",
            r.llm, r.llm_repaired, r.fallback, r.initial_failures
        );
    }
    let art = IdentityArtifact {
        enabled: true,
        identities,
        report: Some(report),
        llm: Some(crate::llm::summary(
            client,
            &[&templates.completion, &templates.repair, &templates.audit],
        )?),
    };
    write_atomic(&work.join("identity.json"), &to_json_pretty(&art)?)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContractsArtifact {
    pub reviewed: bool,
    pub contracts: Vec<crate::contract_review::ReviewedContract>,
    pub votes: Vec<crate::contract_review::Vote>,
    pub discarded: Vec<crate::contract_review::Discarded>,
    pub report: Option<crate::contract_review::ContractsReport>,
    pub llm: Option<crate::llm::LlmSummary>,
}

/// Stage 6: contract authoring and the reviewer personas' votes (with rewrites).
pub fn run_contracts(inp: &Inputs, work: &Path, mode: LlmMode) -> Result<()> {
    use crate::contract_review as cr;
    let c = &inp.config;
    let used = crate::llm::used_path(work, cr::REVIEW_STAGE);
    if !c.contracts.enabled {
        let _ = std::fs::remove_file(&used);
        let art = ContractsArtifact {
            reviewed: false,
            contracts: inp
                .content
                .contracts
                .iter()
                .map(|l| cr::ReviewedContract {
                    contract: l.item.clone(),
                    review: None,
                })
                .collect(),
            votes: vec![],
            discarded: vec![],
            report: None,
            llm: None,
        };
        return write_atomic(&work.join("contracts.json"), &to_json_pretty(&art)?);
    }
    let st = &c.llm.stages;
    let load = |name: &str| crate::llm::prompts::Template::load(&c.llm.prompts, &st[name].template);
    let templates = cr::Templates {
        review: load(cr::REVIEW_STAGE)?,
        rewrite: load(cr::REWRITE_STAGE)?,
        authoring: load(cr::AUTHORING_STAGE)?,
    };
    let settings = cr::Settings {
        review: &st[cr::REVIEW_STAGE],
        rewrite: &st[cr::REWRITE_STAGE],
        authoring: &st[cr::AUTHORING_STAGE],
        stage: &c.contracts,
        seed: c.seed,
    };
    let session = LlmSession::start(c, mode, work, cr::REVIEW_STAGE, "contract review")?;
    let client = &session.client;
    let result = session
        .rt
        .block_on(cr::run(client, &inp.content, &templates, &settings));
    let outcome = session.finish(result)?;
    let r = &outcome.report;
    eprintln!(
        "contracts: {} kept ({} curated, {} of {} generated), {} discarded; {} votes, {} rewrites; first round {:?}",
        outcome.contracts.len(),
        r.curated,
        r.generated_kept,
        r.generated_requested,
        r.discarded,
        r.votes,
        r.rewrites,
        r.first_round
    );
    let art = ContractsArtifact {
        reviewed: true,
        contracts: outcome.contracts,
        votes: outcome.votes,
        discarded: outcome.discarded,
        report: Some(outcome.report),
        llm: Some(crate::llm::summary(
            client,
            &[&templates.review, &templates.rewrite, &templates.authoring],
        )?),
    };
    write_atomic(&work.join("contracts.json"), &to_json_pretty(&art)?)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ValidationArtifact {
    pub contracts: usize,
    pub curated: usize,
    pub generated: usize,
    pub categories: usize,
    pub guidance_conditions: usize,
    pub pressure_conditions: usize,
    pub domains: usize,
}

/// Stage 7: policy validation of the final contract set (curated and generated) together
/// with the policies it will be shown under.
pub fn run_policy_validation(inp: &Inputs, work: &Path) -> Result<()> {
    use crate::content::Located;
    let art: ContractsArtifact = read_json(&work.join("contracts.json"))?;
    let generated_file = work.join("contracts.json");
    let located: Vec<Located<crate::content::Contract>> = art
        .contracts
        .iter()
        .map(|rc| Located {
            file: inp
                .content
                .contracts
                .iter()
                .find(|l| l.item.id == rc.contract.id)
                .map(|l| l.file.clone())
                .unwrap_or_else(|| generated_file.clone()),
            item: rc.contract.clone(),
        })
        .collect();
    let refs: Vec<&Located<crate::content::Contract>> = located.iter().collect();
    let mut findings = Vec::new();
    crate::policy_validation::validate_policies(&inp.content, &mut findings);
    crate::policy_validation::validate_contract_set(&inp.content, &refs, true, &mut findings);
    findings.sort();
    findings.dedup();
    if !findings.is_empty() {
        return Err(crate::policy_validation::findings_error(
            "policy validation of the reviewed contracts",
            &findings,
        ));
    }
    let generated = art
        .contracts
        .iter()
        .filter(|c| c.contract.origin == "generated")
        .count();
    let v = ValidationArtifact {
        contracts: art.contracts.len(),
        curated: art.contracts.len() - generated,
        generated,
        categories: inp.content.categories.len(),
        guidance_conditions: inp.content.guidance.len(),
        pressure_conditions: inp.content.pressure.len(),
        domains: inp.content.domains.len(),
    };
    eprintln!(
        "policy validation: {} contracts ({} generated) under {} guidance and {} pressure conditions: OK",
        v.contracts, v.generated, v.guidance_conditions, v.pressure_conditions
    );
    write_atomic(&work.join("validation.json"), &to_json_pretty(&v)?)
}

/// The bundle's profiles: the audited sample in order, with their completed identities.
pub fn assemble_profiles(inp: &Inputs, work: &Path) -> Result<Vec<crate::profile::Profile>> {
    use crate::profile::{IdentityFields, Profile};
    let pool = read_pool(work)?;
    let audit: AuditArtifact = read_json(&work.join("seed_audit.json"))?;
    let sel = resolve_ids(&pool, &audit.selected_candidate_ids)?;
    let ident: IdentityArtifact = read_json(&work.join("identity.json"))?;
    let by_candidate: std::collections::HashMap<
        &str,
        &crate::identity_completion::CompletedIdentity,
    > = ident
        .identities
        .iter()
        .map(|c| (c.candidate_id.as_str(), c))
        .collect();
    let width = inp.config.population.profiles.to_string().len().max(4);
    Ok(sel
        .iter()
        .enumerate()
        .map(|(k, &i)| Profile {
            profile_id: format!("P{:0width$}", k + 1),
            person: pool[i].clone(),
            identity: by_candidate
                .get(pool[i].candidate_id.as_str())
                .map(|c| IdentityFields {
                    date_of_birth: c.date_of_birth.to_string(),
                    name: c.identity.name.clone(),
                    email: c.identity.email.clone(),
                    phone_number: c.identity.phone_number.clone(),
                    government_id: c.identity.government_id.clone(),
                    government_id_document: c.government_id_document.clone(),
                    identity_provenance: c.provenance.clone(),
                }),
        })
        .collect())
}

/// The final contract set (after review), in bundle order.
pub fn final_contracts(work: &Path) -> Result<Vec<crate::content::Contract>> {
    let art: ContractsArtifact = read_json(&work.join("contracts.json"))?;
    Ok(art.contracts.into_iter().map(|c| c.contract).collect())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BindingArtifact {
    /// Facts of the bound personas only.
    pub personas: Vec<crate::persona_binding::PersonaFacts>,
    pub bindings: Vec<crate::persona_binding::Binding>,
    pub report: crate::persona_binding::BindingReport,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanningArtifact {
    pub payloads: Vec<crate::data_planning::Payload>,
    pub worlds: Vec<crate::data_planning::World>,
    pub exposure: std::collections::BTreeMap<String, crate::data_planning::ExposureSummary>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunsArtifact {
    pub runs: Vec<crate::run_matrix::RunSpec>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GatesArtifact {
    pub passed: bool,
    pub results: Vec<crate::coherence_gates::GateResult>,
}

/// The artifacts of the planning stages as far as they exist, for the gates.
struct Planned {
    contracts: Vec<crate::content::Contract>,
    binding: Option<BindingArtifact>,
    planning: Option<PlanningArtifact>,
    skills: Option<crate::skill_rendering::SkillsArtifact>,
    runs: Option<RunsArtifact>,
}

impl Planned {
    fn load(work: &Path, upto: &str) -> Result<Self> {
        let at = |s: &str| STAGES.iter().position(|x| *x == s).unwrap_or(usize::MAX);
        let reach = at(upto);
        let get = |stage: &str, file: &str| reach >= at(stage) && work.join(file).exists();
        Ok(Self {
            contracts: final_contracts(work)?,
            binding: if get("persona_binding", "binding.json") {
                Some(read_json(&work.join("binding.json"))?)
            } else {
                None
            },
            planning: if get("data_planning", "planning.json") {
                Some(read_json(&work.join("planning.json"))?)
            } else {
                None
            },
            skills: if get("skill_rendering", "skills.json") {
                Some(read_json(&work.join("skills.json"))?)
            } else {
                None
            },
            runs: if get("run_matrix", "runs.json") {
                Some(read_json(&work.join("runs.json"))?)
            } else {
                None
            },
        })
    }

    /// Runs the gates of `stages` (all when `None`) over what is loaded.
    fn gates(
        &self,
        content: &crate::content::Content,
        stages: Option<&[&str]>,
    ) -> Vec<crate::coherence_gates::GateResult> {
        let contracts: Vec<&crate::content::Contract> = self.contracts.iter().collect();
        let personas: std::collections::BTreeMap<String, crate::persona_binding::PersonaFacts> =
            self.binding
                .iter()
                .flat_map(|b| b.personas.iter())
                .map(|p| (p.profile_id.clone(), p.clone()))
                .collect();
        let subject = crate::coherence_gates::Subject {
            content,
            contracts: &contracts,
            bindings: self
                .binding
                .as_ref()
                .map(|b| &b.bindings[..])
                .unwrap_or(&[]),
            personas: &personas,
            payloads: self
                .planning
                .as_ref()
                .map(|p| &p.payloads[..])
                .unwrap_or(&[]),
            worlds: self.planning.as_ref().map(|p| &p.worlds[..]).unwrap_or(&[]),
            skills: self.skills.as_ref(),
            runs: self.runs.as_ref().map(|r| &r.runs[..]).unwrap_or(&[]),
        };
        crate::coherence_gates::run(&subject, stages)
    }
}

/// Runs one stage's gates right after it, so a defect stops the build where it arose.
fn stage_gates(inp: &Inputs, work: &Path, stage: &str) -> Result<()> {
    let planned = Planned::load(work, stage)?;
    let results = planned.gates(&inp.content, Some(&[stage]));
    for r in &results {
        eprintln!(
            "gate {}: {} ({} checked)",
            r.name,
            if r.passed { "passed" } else { "FAILED" },
            r.checked
        );
    }
    match crate::coherence_gates::error(&results, "no bundle was written") {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Stage 9: persona binding.
pub fn run_binding(inp: &Inputs, work: &Path) -> Result<()> {
    use crate::persona_binding as pb;
    let c = &inp.config;
    let profiles = assemble_profiles(inp, work)?;
    let contracts = final_contracts(work)?;
    let names = crate::identity::name::NameLists::load(&inp.taxonomy)?;
    let kit = pb::FallbackKit {
        tax: &inp.taxonomy,
        cities: &inp.margins.cities,
        names: &names,
        reference: crate::identity::govid::Date::parse(&c.date)
            .ok_or_else(|| anyhow!("config date {:?} is not a calendar date", c.date))?,
    };
    let facts: Vec<pb::PersonaFacts> = profiles
        .iter()
        .enumerate()
        .map(|(i, p)| pb::persona_facts(&inp.content.attributes.item, p, i as u32, c.seed, &kit))
        .collect::<Result<_>>()?;
    let refs: Vec<&crate::content::Contract> = contracts.iter().collect();
    let (bindings, report) = pb::bind(
        &refs,
        &facts,
        c.planning.max_tasks_per_persona,
        c.planning.on_unsatisfiable,
        c.seed,
    )?;
    let used: HashSet<&str> = bindings.iter().map(|b| b.profile_id.as_str()).collect();
    eprintln!(
        "persona binding: {} contracts on {} personas ({} with requirements, {} relaxed; fewest compatible profiles {})",
        report.contracts, report.personas, report.with_requirements, report.relaxed, report.min_compatible_profiles
    );
    let art = BindingArtifact {
        personas: facts
            .into_iter()
            .filter(|p| used.contains(p.profile_id.as_str()))
            .collect(),
        bindings,
        report,
    };
    write_atomic(&work.join("binding.json"), &to_json_pretty(&art)?)?;
    stage_gates(inp, work, "persona_binding")
}

/// Stage 10: cross-environment data planning.
pub fn run_planning(inp: &Inputs, work: &Path) -> Result<()> {
    use crate::data_planning as dp;
    let contracts = final_contracts(work)?;
    let refs: Vec<&crate::content::Contract> = contracts.iter().collect();
    let binding: BindingArtifact = read_json(&work.join("binding.json"))?;
    let personas: std::collections::BTreeMap<String, crate::persona_binding::PersonaFacts> =
        binding
            .personas
            .iter()
            .map(|p| (p.profile_id.clone(), p.clone()))
            .collect();
    let planner = dp::Planner {
        content: &inp.content,
        tax: &inp.taxonomy,
        seed: inp.config.seed,
        date: crate::identity::govid::Date::parse(&inp.config.date)
            .ok_or_else(|| anyhow!("config date {:?} is not a calendar date", inp.config.date))?,
    };
    let (payloads, worlds) = planner.plan(&refs, &binding.bindings, &personas)?;
    let exposure = dp::exposure_summary(&refs, &payloads)?;
    eprintln!(
        "data planning: {} payloads for {} tasks across {} persona worlds",
        payloads.len(),
        refs.len(),
        worlds.len()
    );
    let art = PlanningArtifact {
        payloads,
        worlds,
        exposure,
    };
    write_atomic(&work.join("planning.json"), &to_json_pretty(&art)?)?;
    stage_gates(inp, work, "data_planning")
}

/// Stage 11: skill rendering.
pub fn run_skills(inp: &Inputs, work: &Path) -> Result<()> {
    let contracts = final_contracts(work)?;
    let refs: Vec<&crate::content::Contract> = contracts.iter().collect();
    let art = crate::skill_rendering::render(&inp.content, &refs)?;
    eprintln!(
        "skills: {} skills rendered under {} guidance conditions ({} folders)",
        art.skills.len(),
        inp.content.guidance.len(),
        art.rendered.len()
    );
    write_atomic(&work.join("skills.json"), &to_json_pretty(&art)?)?;
    stage_gates(inp, work, "skill_rendering")
}

/// Stage 12: the run matrix.
pub fn run_runs(inp: &Inputs, work: &Path) -> Result<()> {
    let contracts = final_contracts(work)?;
    let refs: Vec<&crate::content::Contract> = contracts.iter().collect();
    let binding: BindingArtifact = read_json(&work.join("binding.json"))?;
    let bound: std::collections::BTreeMap<String, String> = binding
        .bindings
        .iter()
        .map(|b| (b.contract_id.clone(), b.profile_id.clone()))
        .collect();
    let runs = crate::run_matrix::build(&inp.content, &refs, &bound);
    eprintln!("run matrix: {} runs", runs.len());
    write_atomic(
        &work.join("runs.json"),
        &to_json_pretty(&RunsArtifact { runs })?,
    )?;
    stage_gates(inp, work, "run_matrix")
}

/// Stage 13: every coherence gate again, over the artifacts as they are on disk; the report
/// goes into the manifest.
pub fn run_gates(inp: &Inputs, work: &Path) -> Result<()> {
    let planned = Planned::load(work, "coherence_gates")?;
    let results = planned.gates(&inp.content, None);
    let passed = results.iter().all(|r| r.passed);
    eprintln!(
        "coherence gates: {} of {} passed",
        results.iter().filter(|r| r.passed).count(),
        results.len()
    );
    let _ = std::fs::remove_file(work.join("gates.json"));
    if let Some(e) = crate::coherence_gates::error(&results, "no bundle was written") {
        return Err(e);
    }
    write_atomic(
        &work.join("gates.json"),
        &to_json_pretty(&GatesArtifact { passed, results })?,
    )
}

/// The stages of a build, in order (names accepted by `build --from`).
pub const STAGES: [&str; 14] = [
    "candidates",
    "calibration",
    "pool_audit",
    "sampling",
    "seed_audit",
    "identity",
    "contracts",
    "policy_validation",
    "persona_binding",
    "data_planning",
    "skill_rendering",
    "run_matrix",
    "coherence_gates",
    "bundle",
];

/// A whole build: inputs are validated before anything is written; the bundle appears only
/// if every stage succeeded. `mode` overrides the config's `llm.mode`; `from` skips the
/// stages before it and reads their artifacts from the work directory.
pub fn build(config_path: &Path, mode: Option<LlmMode>, from: Option<&str>) -> Result<PathBuf> {
    let inp = Inputs::load(config_path)?;
    let mode = mode.unwrap_or(inp.config.llm.mode);
    let work = inp.config.paths.work.clone();
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let start = match from {
        None => 0,
        Some(f) => STAGES
            .iter()
            .position(|s| *s == f)
            .ok_or_else(|| anyhow!("unknown stage {f:?}; stages are {}", STAGES.join(", ")))?,
    };
    for stage in STAGES.iter().skip(start) {
        match *stage {
            "candidates" => run_candidates(&inp, &work)?,
            "calibration" => run_calibration(&inp, &work)?,
            "pool_audit" => run_pool_audit(&inp, &work, mode)?,
            "sampling" => run_sampling(&inp, &work)?,
            "seed_audit" => run_seed_audit(&inp, &work, mode)?,
            "identity" => run_identity(&inp, &work, mode)?,
            "contracts" => run_contracts(&inp, &work, mode)?,
            "policy_validation" => run_policy_validation(&inp, &work)?,
            "persona_binding" => run_binding(&inp, &work)?,
            "data_planning" => run_planning(&inp, &work)?,
            "skill_rendering" => run_skills(&inp, &work)?,
            "run_matrix" => run_runs(&inp, &work)?,
            "coherence_gates" => run_gates(&inp, &work)?,
            "bundle" => crate::bundle::write(&inp, &work)?,
            other => unreachable!("stage {other} is listed but not dispatched"),
        }
    }
    Ok(inp.config.paths.output.clone())
}
