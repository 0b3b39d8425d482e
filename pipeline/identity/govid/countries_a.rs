//! Identifier schemes, group A.

use super::Scheme;

pub fn schemes() -> Vec<&'static dyn Scheme> {
    vec![]
}
