//! Command-line entry point of PrivForge.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "privforge",
    version,
    about = "Builds reproducible, population-calibrated privacy benchmark bundles"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every stage and write the bundle named in the config.
    Build {
        #[arg(long, default_value = "configs/reference.toml")]
        config: PathBuf,
        /// Where LLM answers come from (default: the config's llm.mode).
        #[arg(long, value_enum)]
        llm: Option<privforge::config::LlmMode>,
        /// Start at this stage, reusing the earlier stages' artifacts in the work directory
        /// (for example after editing one of them by hand).
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(privforge::stages::STAGES))]
        from: Option<String>,
    },
    /// Check the task content: taxonomy, domains, guidance and pressure policies, contracts.
    Validate {
        #[arg(long, default_value = "configs/reference.toml")]
        config: PathBuf,
    },
    /// Check a bundle: hashes, schemas, counts and recomputed calibration figures.
    Verify {
        bundle: PathBuf,
        /// A sha256sum-style list the bundle must match exactly.
        #[arg(long)]
        expected: Option<PathBuf>,
        /// Print the bundle's sha256sum-style list instead of checking against one.
        #[arg(long)]
        print_sums: bool,
    },
    /// Serve a bundle's payloads on loopback for its skill scripts (until Ctrl-C).
    Backend {
        #[arg(long)]
        bundle: PathBuf,
        /// 0 picks a free port.
        #[arg(long, default_value_t = 8477)]
        port: u16,
        /// Where the access log (one JSON line per request) goes.
        #[arg(long, default_value = "backend-access.jsonl")]
        log: PathBuf,
    },
    /// Run every skill script of a sample of runs against the reference backend, as an agent
    /// would, and check what they return.
    E2e {
        #[arg(long)]
        bundle: PathBuf,
        #[arg(long, default_value = "python3")]
        python: String,
        /// Scripts run at a time (default: the number of CPUs).
        #[arg(long)]
        jobs: Option<usize>,
        /// The backend's access log (default: beside the bundle).
        #[arg(long)]
        log: Option<PathBuf>,
        /// Check only the first N categories (a quick trial; the default covers all).
        #[arg(long)]
        categories: Option<usize>,
    },
    /// Population margins.
    Margins {
        #[command(subcommand)]
        command: MarginsCommand,
    },
    /// LLM endpoints and transcripts.
    Llm {
        #[command(subcommand)]
        command: LlmCommand,
    },
    /// Transcripts of LLM answers.
    Transcript {
        #[command(subcommand)]
        command: TranscriptCommand,
    },
    /// Benchmarks that print figures.
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Subcommand)]
enum MarginsCommand {
    /// Derive the margins from the statistical extracts in --sources.
    Build {
        #[arg(long)]
        sources: PathBuf,
        #[arg(long, default_value = "population-margins")]
        out: PathBuf,
        #[arg(long, default_value = "taxonomy")]
        taxonomy: PathBuf,
    },
}

#[derive(Subcommand)]
enum LlmCommand {
    /// One small structured request per configured endpoint: model, latency, whether the
    /// JSON Schema was honoured.
    Check {
        #[arg(long, default_value = "configs/reference.toml")]
        config: PathBuf,
    },
}

#[derive(Subcommand)]
enum TranscriptCommand {
    /// Write the answers the last build used, sorted by key, to --out (what `make record` commits).
    Export {
        #[arg(long, default_value = "configs/reference.toml")]
        config: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Deterministic identity validation throughput.
    Validate {
        #[arg(long, default_value = "configs/reference.toml")]
        config: PathBuf,
        #[arg(long, default_value_t = 100_000)]
        profiles: usize,
    },
    /// IPF on the reference margins against the Python ipfn package.
    Ipf {
        #[arg(long, default_value = "configs/reference.toml")]
        config: PathBuf,
        #[arg(long, default_value_t = 100_000)]
        candidates: usize,
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Where the problem is exported for the peer.
        #[arg(long, default_value = "outputs/work/bench-ipf")]
        export: PathBuf,
        /// Python interpreter with ipfn installed; omit to time only PrivForge.
        #[arg(long)]
        python: Option<PathBuf>,
        #[arg(long, default_value = "bench/ipfn_peer.py")]
        peer_script: PathBuf,
    },
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Build { config, llm, from } => {
            let out = privforge::stages::build(&config, llm, from.as_deref())?;
            println!("built {}", out.display());
        }
        Command::Validate { config } => {
            let cfg = privforge::config::Config::load(&config)?;
            let s = privforge::policy_validation::validate_dir(&cfg.paths.taxonomy)?;
            println!("{s}");
        }
        Command::Verify {
            bundle,
            expected,
            print_sums,
        } => {
            let s = privforge::verify::verify(&bundle)?;
            if print_sums {
                print!("{}", privforge::verify::sha256sums(&bundle)?);
                return Ok(());
            }
            println!(
                "{}: OK ({} files, {} profiles)",
                bundle.display(),
                s.files,
                s.profiles
            );
            if let Some(exp) = expected {
                let n = privforge::verify::check_expected(&bundle, &exp)?;
                println!(
                    "{}: identical to {} ({n} files)",
                    bundle.display(),
                    exp.display()
                );
            }
        }
        Command::Backend { bundle, port, log } => {
            let file = std::fs::File::create(&log)
                .with_context(|| format!("cannot create {}", log.display()))?;
            let b = privforge::backend::Backend::load(&bundle, Box::new(file))?;
            let server = privforge::backend::start(b, port)?;
            println!(
                "serving {} on {} (access log {}); Ctrl-C stops",
                bundle.display(),
                server.url(),
                log.display()
            );
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(tokio::signal::ctrl_c())?;
            drop(server);
        }
        Command::E2e {
            bundle,
            python,
            jobs,
            log,
            categories,
        } => {
            let log = log.unwrap_or_else(|| privforge::e2e::default_log(&bundle));
            let jobs = jobs.unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(2)
            });
            let r = privforge::e2e::run(&bundle, &python, jobs, &log, categories)?;
            println!(
                "e2e: {} runs ({} contracts, {} categories, {} guidance, {} pressure, {} orders); \
                 {} scripts; {} acquisitions returned the value, {} the unavailability message; \
                 {} executions accepted the value, {} rejected a wrong one; {} access log lines",
                r.runs,
                r.contracts,
                r.categories,
                r.guidance_conditions,
                r.pressure_conditions,
                r.orders,
                r.scripts_run,
                r.acquisitions_returned_value,
                r.acquisitions_unavailable,
                r.executions_accepted,
                r.wrong_values_rejected,
                r.log_lines
            );
            if !r.failures.is_empty() {
                for f in r.failures.iter().take(20) {
                    eprintln!("  {f}");
                }
                anyhow::bail!("e2e: {} failures", r.failures.len());
            }
        }
        Command::Llm {
            command: LlmCommand::Check { config },
        } => {
            let cfg = privforge::config::Config::load(&config)?;
            let rows = privforge::llm::check::run(&cfg)?;
            let mut failed = false;
            for r in &rows {
                println!("{r}");
                failed |= !r.ok;
            }
            if failed {
                anyhow::bail!("at least one endpoint failed the check");
            }
        }
        Command::Transcript {
            command: TranscriptCommand::Export { config, out },
        } => {
            let cfg = privforge::config::Config::load(&config)?;
            let n = privforge::llm::export_used(&cfg.paths.work, &out)?;
            println!("{}: {n} records", out.display());
        }
        Command::Margins {
            command:
                MarginsCommand::Build {
                    sources,
                    out,
                    taxonomy,
                },
        } => {
            let s = privforge::margins_build::build(&sources, &out, &taxonomy)?;
            for (name, cells, status) in &s.margins {
                println!("{name:<24} {cells:>5} cells  {status:?}");
            }
            println!(
                "city catalog: {} cities ({} duplicate names dropped); WPP vs Table 5 max abs diff {:.2e}",
                s.cities, s.dropped_duplicate_cities, s.wpp_vs_table5_max_abs_diff
            );
        }
        Command::Bench {
            command: BenchCommand::Validate { config, profiles },
        } => {
            privforge::bench::validate(&config, profiles)?;
        }
        Command::Bench {
            command:
                BenchCommand::Ipf {
                    config,
                    candidates,
                    repeat,
                    export,
                    python,
                    peer_script,
                },
        } => {
            let opts = privforge::bench::IpfBenchOptions {
                config: &config,
                candidates,
                repeat,
                export: &export,
                python: python.as_deref(),
                peer_script: &peer_script,
            };
            privforge::bench::ipf(&opts)?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
