//! wirerate engine
pub mod ttcp;
