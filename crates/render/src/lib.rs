//! wirerate render
