//! One module per subcommand: its clap arguments and its `run`.

pub mod findmax;
pub mod lab;
pub mod run;
pub mod serve;
pub mod ttcp;
pub mod wire;
