//! Identity fields of a profile (name, email, phone number, government identifier): their
//! deterministic validators and the generators that are valid by construction.

pub mod govid;
