//! wirerate probe

pub mod link;
