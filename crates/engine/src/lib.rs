//! wirerate engine
