//! wirerate proto
