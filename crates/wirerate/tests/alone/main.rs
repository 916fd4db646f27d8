//! The end-to-end tests whose verdicts read the whole host (its CPUs' load, the traffic on
//! lo), in a test binary apart from `it`: cargo runs test binaries one after another, so no
//! test of `it` loads the host or sends over lo beside them. Their tests take turns among
//! themselves ([`common::heavy`]). The helpers are `it`'s.

#[allow(dead_code)]
#[path = "../it/common/mod.rs"]
mod common;

mod diagnosis;
mod lab_cpu;
