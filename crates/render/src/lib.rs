//! Renderers of wirerate results: the human report, JSON, classic ttcp lines, and later CSV;
//! `export` puts each format behind one trait for every command's output.
//!
//! Promise: renderers read the result model and compute nothing; every figure they print
//! was derived in `wirerate-core`. Output decisions never reach the measurement code.

pub mod brief;
pub mod export;
pub mod intervals;
pub mod json;
pub mod latency;
pub mod rpm;
pub mod stats;
pub mod text;
pub mod ttcp;
