//! The end-to-end tests of the `wirerate` binary, in one test binary: each module is the
//! tests of one area (`run`, `rr`, `lab`, …) and `common` their shared helpers. One binary
//! is linked once instead of once a file; its tests of every area run at once, so a test
//! that builds a lab or that a host's load could sway takes [`common::heavy`] first.

mod common;

mod agent_auth;
mod auth;
mod breaker;
mod changes;
mod completions;
mod deadline_strikes;
mod exporter;
mod fleet;
mod formats;
mod habits;
mod held_logins;
mod history_io;
mod hostile;
mod iperf3;
mod lab;
mod lab_bridge;
mod lab_compare;
mod lab_findmax;
mod lab_paths;
mod lab_rpm;
mod limits;
mod monitoring;
mod parallel;
mod plan;
mod plan_rounds;
mod postgres;
mod repeat;
mod report;
mod results_cli;
mod rpm;
mod rr;
mod run;
mod server;
mod serverlog;
mod sockopts;
mod tls;
mod ttcp;
mod udp;
mod window;
mod wire;
mod workers;
