pub mod double;
pub mod fixture;
