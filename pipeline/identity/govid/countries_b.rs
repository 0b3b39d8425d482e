//! Identifier schemes, group B.

use super::Scheme;

pub fn schemes() -> Vec<&'static dyn Scheme> {
    vec![]
}
