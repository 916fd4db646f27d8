//! One module per subcommand: its clap arguments and its `run`.

pub mod compare;
pub mod completions;
pub mod daemon;
pub mod findmax;
pub mod habits;
pub mod history;
pub mod import;
pub mod lab;
pub mod live;
pub mod matrix;
pub mod migrate;
pub mod plan;
pub mod repeat;
pub mod report;
pub mod results;
pub mod rpm;
pub mod rr;
pub mod run;
pub mod serve;
pub mod show;
pub mod spool;
pub mod sweep;
pub mod tls;
pub mod ttcp;
pub mod user;
pub mod wire;
