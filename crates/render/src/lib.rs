//! wirerate render
pub mod stats;
