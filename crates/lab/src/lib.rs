//! Emulated Ethernet links: two hosts, each in its own network namespace (`wr-LAB-HOST`),
//! joined by a veth pair whose both egresses are shaped by tbf to behave like a
//! full-duplex Ethernet wire of a given rate; or three to 16 hosts, each with such a wire
//! to a bridge in a switch namespace (`wrs-LAB`).
//!
//! Promises:
//! - The shaper charges every packet what a frame costs on a real wire: tbf's `overhead`
//!   adds preamble, FCS and inter-frame gap (24 bytes) to the packet's length (MAC header
//!   included) and its `mpu` charges at least a minimum frame (84 bytes with preamble and
//!   gap). Segmentation offloads are off on both ends, so the shaper sees real frames. With
//!   this, `wirerate_core::wire::model` predicts what a test on the lab can reach.
//! - Addresses (10.77.0.1…/24, fd77::1…/64, one per host in order) exist only inside the
//!   lab's namespaces.
//! - `up` either finishes or removes what it made; `down` removes only namespaces named
//!   with the lab's prefix and ends no process.
//! - A process inside a lab host finds its link with [`current_lab`] (the lab records
//!   itself in `/run/wirerate/lab/NAME.json`).
//!
//! Everything here needs root and says so ([`LabError::NotRoot`]); it shells out to `ip`,
//! `tc` and `ethtool`, and a failing command is reported with what it printed.

pub mod delayline;
pub mod ops;
pub mod path;
pub mod sh;
pub mod spec;
pub mod state;

pub use ops::{
    down, exec_command, host_ipv4, is_root, status, up, DownReport, HostStatus, LabStatus,
    PortStatus,
};
pub use spec::LabSpec;
pub use state::{
    current_lab, current_netns_name, lab_for_netns, lab_rate_for_netns, LabHost, LabLink, LabState,
    STATE_DIR,
};

/// Why a lab operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error(
        "lab needs root: it creates network namespaces, veth links and tc qdiscs (run it as root)"
    )]
    NotRoot,
    #[error("{0}")]
    Invalid(String),
    #[error("lab '{0}' already exists (remove it with 'wirerate lab down --name {0}')")]
    Exists(String),
    #[error("lab '{lab}' has no host '{host}' (see 'wirerate lab status')")]
    NoSuchHost { lab: String, host: String },
    #[error("'{program}' was not found; install {package}")]
    Missing {
        program: String,
        package: &'static str,
    },
    #[error("cannot start '{program}'")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("'{command}' failed: {detail}")]
    Failed { command: String, detail: String },
    #[error("cannot write the lab record under {path}")]
    State {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
