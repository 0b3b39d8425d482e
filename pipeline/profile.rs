//! The profile record shared by every stage: 13 seed fields plus derived fields that the
//! margins refer to. Derived fields are computed from seed fields, never sampled.

use crate::margins::CityCatalog;
use crate::taxonomy::Taxonomy;
use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Person {
    pub candidate_id: String,
    /// Which part of the proposal produced the candidate: target, uniform or backfill.
    pub proposal: String,
    pub age: u8,
    pub sex: String,
    pub ethnicity: String,
    pub citizenship: String,
    pub current_location: String,
    pub birth_location: String,
    pub education_level: String,
    pub income_level: String,
    pub relationship_status: String,
    pub religious_belief: String,
    pub occupation: String,
    pub physical_condition: String,
    pub mental_condition: String,
    pub age_group: String,
    pub current_country: String,
    pub birth_country: String,
    pub current_city_size: String,
    pub occupation_group: String,
}

/// Fields whose value is computed from the seed fields.
pub const DERIVED_FIELDS: &[&str] = &[
    "age_group",
    "current_country",
    "birth_country",
    "current_city_size",
    "occupation_group",
];

impl Person {
    /// Value of a categorical field by name (seed or derived).
    pub fn get(&self, field: &str) -> Option<&str> {
        Some(match field {
            "sex" => &self.sex,
            "ethnicity" => &self.ethnicity,
            "citizenship" => &self.citizenship,
            "current_location" => &self.current_location,
            "birth_location" => &self.birth_location,
            "education_level" => &self.education_level,
            "income_level" => &self.income_level,
            "relationship_status" => &self.relationship_status,
            "religious_belief" => &self.religious_belief,
            "occupation" => &self.occupation,
            "physical_condition" => &self.physical_condition,
            "mental_condition" => &self.mental_condition,
            "age_group" => &self.age_group,
            "current_country" => &self.current_country,
            "birth_country" => &self.birth_country,
            "current_city_size" => &self.current_city_size,
            "occupation_group" => &self.occupation_group,
            _ => return None,
        })
    }

    /// The 13 seed values; two candidates with equal keys are duplicates.
    pub fn seed_key(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
            self.age,
            self.sex,
            self.ethnicity,
            self.citizenship,
            self.current_location,
            self.birth_location,
            self.education_level,
            self.income_level,
            self.relationship_status,
            self.religious_belief,
            self.occupation,
            self.physical_condition,
            self.mental_condition
        )
    }

    /// Recomputes the derived fields from the seed fields.
    pub fn derive(&mut self, tax: &Taxonomy, cities: &CityCatalog) -> Result<()> {
        self.age_group = tax
            .band_of("age_group", self.age as u64)
            .ok_or_else(|| anyhow!("age {} is outside every age group", self.age))?
            .to_string();
        let cur = cities.get(&self.current_location).ok_or_else(|| {
            anyhow!(
                "current_location {:?} is not in the city catalog",
                self.current_location
            )
        })?;
        self.current_country = cur.country.clone();
        self.current_city_size = cur.size_class.clone();
        let birth = cities.get(&self.birth_location).ok_or_else(|| {
            anyhow!(
                "birth_location {:?} is not in the city catalog",
                self.birth_location
            )
        })?;
        self.birth_country = birth.country.clone();
        self.occupation_group = tax
            .occupation_group_of(&self.occupation)
            .ok_or_else(|| anyhow!("occupation {:?} is not in the taxonomy", self.occupation))?
            .to_string();
        Ok(())
    }
}

/// Identity fields added by the identity completion stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdentityFields {
    pub date_of_birth: String,
    pub name: String,
    pub email: String,
    pub phone_number: String,
    pub government_id: String,
    pub government_id_document: String,
    /// Per identity field: `llm`, `llm_repaired` or `fallback`.
    pub identity_provenance: std::collections::BTreeMap<String, String>,
}

/// A sampled profile as written to `profiles.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Profile {
    pub profile_id: String,
    #[serde(flatten)]
    pub person: Person,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityFields>,
}
