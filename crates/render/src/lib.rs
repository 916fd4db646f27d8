//! wirerate render
pub mod ttcp;
