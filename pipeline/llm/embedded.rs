//! Placeholder replaced by the embedded provider implementation.
