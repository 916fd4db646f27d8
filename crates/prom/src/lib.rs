//! Prometheus for wirerate: the text exposition format written by the rules (base units,
//! `_total` counters, 0–1 ratios, `_info` metadata), a small blocking HTTP/1.1 server for
//! `/probe` and `/metrics`, and the metrics of one test's result.
//!
//! Promise: like the renderers, this crate reads the result model and computes nothing but
//! unit conversions (bits to bytes, percent to ratio, ms to s).

#![forbid(unsafe_code)]

pub mod expo;
pub mod http;
pub mod probe;
pub mod rpm;

pub use expo::{Exposition, Kind, MetricSource};
