//! PrivForge: a staged, reproducible generator of privacy benchmark bundles.
//!
//! A build runs these stages in order; each reads the typed artifact the previous one
//! wrote to the work directory and writes its own:
//!
//! 1. [`candidates`]: λ-mixture proposal of candidate seed profiles (`candidates.jsonl`)
//! 2. [`calibration`]: capacity checks, targeted backfill and IPF weights (`calibration.json`)
//! 3. [`sampling`]: selection of the N profiles (`sample.json`)
//! 4. [`seed_audit`]: rule and LLM audit with replacement, lazy or whole-pool (`seed_audit.json`)
//! 5. [`identity_completion`]: LLM identity fields, validation, audit, repair (`identity.json`)
//! 6. [`contract_review`]: contract authoring, persona votes, rewrites (`contracts.json`)
//! 7. [`policy_validation`]: the final contracts against the policies (`validation.json`)
//! 8. [`persona_binding`]: each contract bound to a compatible, least-used persona (`binding.json`)
//! 9. [`data_planning`]: what every environment returns, one world per persona (`planning.json`)
//! 10. [`skill_rendering`]: Agent Skill folders under every guidance condition (`skills.json`)
//! 11. [`run_matrix`]: contract × guidance × pressure × Discovery order (`runs.json`)
//! 12. [`coherence_gates`]: named checks over all of the above; a failure stops the build
//!     (`gates.json`)
//! 13. [`bundle`]: assembly of the versioned bundle, written atomically
//!
//! `build --from <stage>` starts at a stage and reuses the earlier artifacts.
//!
//! Inputs are data: [`taxonomy`] value sets, [`content`] (categories, policies, contracts)
//! and [`margins`] (derived from open statistics by [`margins_build`]); [`config`] holds the run
//! parameters and [`seeding`] turns the run seed into per-decision random streams.

pub mod config;
pub mod fsio;
pub mod seeding;
pub mod taxonomy;

pub mod margins;
pub mod margins_build;

pub mod bundle;
pub mod calibration;
pub mod candidates;
pub mod identity_completion;
pub mod sampling;
pub mod seed_audit;

pub mod content;
pub mod contract_review;
pub mod policy_validation;

pub mod coherence_gates;
pub mod data_planning;
pub mod persona_binding;
pub mod run_matrix;
pub mod skill_rendering;

pub mod croissant;
pub mod data_card;
pub mod report;
pub mod stages;
pub mod verify;

pub mod backend;
pub mod bench;
pub mod e2e;
pub mod identity;
pub mod llm;
pub mod profile;
