//! wirerate probe
