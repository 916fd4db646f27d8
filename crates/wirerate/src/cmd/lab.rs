//! `wirerate lab up|down|status|exec`: emulated Ethernet links between hosts in network
//! namespaces. Flags are validated here (bad ones exit 2); the work is `wirerate_lab`'s.

use std::process::ExitCode;

use wirerate_core::units::format_bps;
use wirerate_core::wire::{self, WireParams, WireProto};
use wirerate_core::{BitRate, Bytes};
use wirerate_lab::{LabError, LabSpec, LabState, LabStatus};

use crate::exit;

/// Writes a line to stdout; a closed pipe becomes an error the caller treats as a clean exit.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!($crate::exit::stdout(), $($arg)*)?;
    }};
}

/// Writes text to stdout as it is.
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!($crate::exit::stdout(), $($arg)*)?;
    }};
}

#[derive(clap::Args)]
#[command(
    after_help = "Emulated Ethernet links: two hosts, each in its own network namespace \
(wr-NAME-HOST), joined by a veth pair shaped by tbf on both egresses so that every frame \
costs what it costs on a real wire (preamble, FCS, inter-frame gap, minimum frame). \
Segmentation offloads are off on both ends. With three to 16 hosts (--hosts a,b,c,d or \
--count N), each host has its own such link to a bridge in a switch namespace (wrs-NAME), \
shaped at the host's egress and at the bridge's port towards it; hosts get 10.77.0.1, \
10.77.0.2, ... in order. Needs root.\n\nRates take K, M, G, T as powers \
of 1000 (10M = 10000000 bit/s); sizes take K, M, G as powers of 1024 (16K = 16384 bytes).\n\n\
A process started with 'lab exec' can find its lab and link rate in \
/run/wirerate/lab/NAME.json."
)]
pub struct Args {
    #[command(subcommand)]
    cmd: LabCmd,
}

#[derive(clap::Subcommand)]
enum LabCmd {
    /// Create a lab: two hosts joined by a shaped link, or up to 16 on a bridge
    Up(UpArgs),
    /// Remove a lab's namespaces (and with them its links and shapers)
    Down(NameArg),
    /// Show labs: hosts, addresses, shaping, and what a delay line did (delay p50/p99,
    /// drops by cause, the most queued)
    Status(StatusArgs),
    /// Run a command on a lab host: wirerate lab exec [--name NAME] HOST -- CMD [ARGS...];
    /// a bare `wirerate` is this very binary, found without PATH
    Exec(ExecArgs),
    /// The delay line of a lab with a path (started by `lab up`, ended by `lab down`)
    #[command(hide = true)]
    DelayLine(NameArg),
}

#[derive(clap::Args)]
struct NameArg {
    /// Lab name: 1 to 16 lowercase letters or digits.
    #[arg(long, default_value = "lab")]
    name: String,
}

#[derive(clap::Args)]
struct UpArgs {
    #[command(flatten)]
    name: NameArg,
    /// Link rate each way, SI prefixes (10M = 10 000 000 bit/s).
    #[arg(
        long,
        default_value = "10M",
        value_name = "RATE",
        allow_hyphen_values = true
    )]
    rate: String,
    /// Queue limit at each egress (the bottleneck's queue): bytes with IEC prefixes
    /// (16K = 16 384 bytes) or the time it holds at the link rate (200ms). Default: 64K, or
    /// 4ms at the rate when that is more (from 131M up); at 10M, 64K lets TCP reach the
    /// model. Small values emulate a NIC with little memory and make TCP lose packets; the
    /// shaper's bucket is then cut to half the queue. At least one frame and a bucket of
    /// one frame (3052 bytes at MTU 1500).
    #[arg(long, value_name = "BYTES|TIME", allow_hyphen_values = true)]
    buffer: Option<String>,
    /// One-way delay added to each direction by the lab's delay line (25ms, 500us), or
    /// AB/BA for each direction (20ms/5ms: a to b, b to a). With three or more hosts, on
    /// every host's link to the bridge (AB: host to switch), so two hosts see the sum.
    #[arg(long, value_name = "TIME[/TIME]")]
    delay: Option<String>,
    /// In a lab of three or more hosts, host HOST's link gets its own one-way delay, each
    /// way, in place of --delay's (h3=40ms); repeat for more hosts
    #[arg(long, value_name = "HOST=TIME")]
    link_delay: Vec<String>,
    /// Each packet's delay moves by a uniform draw within ±TIME; packets keep their order
    #[arg(long, value_name = "TIME[/TIME]")]
    jitter: Option<String>,
    /// Share of packets lost at random, exact over every 10 000 (0.5%)
    #[arg(long, value_name = "PCT[/PCT]")]
    loss: Option<String>,
    /// Share of packets sent at once, overtaking the delayed ones (1%); needs --delay
    #[arg(long, value_name = "PCT[/PCT]")]
    reorder: Option<String>,
    /// Seed of the loss, reordering and jitter draws: the same seed, the same pattern
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// MTU of both ends, bytes (jumbo allowed, up to 65535).
    #[arg(
        long,
        default_value = "1500",
        value_name = "BYTES",
        allow_hyphen_values = true
    )]
    mtu: String,
    /// The hosts' names, comma-separated: two are joined by one shaped link; three to 16
    /// each get their own shaped link to a bridge (in namespace wrs-NAME).
    #[arg(long, default_value = "a,b", value_name = "A,B,...")]
    hosts: String,
    /// N hosts named h1 to hN (2 to 16), instead of --hosts.
    #[arg(long, value_name = "N")]
    count: Option<usize>,
}

impl UpArgs {
    fn hosts_given(&self) -> bool {
        self.hosts != "a,b"
    }
}

#[derive(clap::Args)]
struct StatusArgs {
    /// Only this lab.
    #[arg(long, conflicts_with = "here")]
    name: Option<String>,
    /// The lab host this command runs on (run it with 'lab exec'); exit 1 outside a lab.
    #[arg(long)]
    here: bool,
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ExecArgs {
    #[command(flatten)]
    name: NameArg,
    /// The host to run on (a name given to 'lab up --hosts').
    node: String,
    /// The command and its arguments, after '--'.
    #[arg(last = true, required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.cmd {
        LabCmd::Up(a) => up(a),
        LabCmd::Down(a) => down(&a.name),
        LabCmd::Status(a) => status(a),
        LabCmd::Exec(a) => exec(a),
        LabCmd::DelayLine(a) => delay_line(&a.name),
    }
}

/// Runs the delay line of lab `name` from its record, until it is ended.
fn delay_line(name: &str) -> anyhow::Result<ExitCode> {
    let Some(state) =
        wirerate_lab::state::load(std::path::Path::new(wirerate_lab::STATE_DIR), name)
    else {
        anyhow::bail!("lab {name} has no record");
    };
    let Some(spec) = state.spec().filter(|s| s.hosts.len() >= 2) else {
        anyhow::bail!("lab {name} has not two hosts");
    };
    let links = spec.delay_line_links();
    let report = wirerate_lab::ops::path_report_path(name);
    let bottleneck = wirerate_lab::path::Bottleneck {
        rate_bps: state.link_bps,
        queue_bytes: state.buffer_bytes,
        overhead_bytes: state.overhead_bytes,
        min_bytes: state.mpu_bytes,
    };
    wirerate_lab::delayline::run(&links, Some(bottleneck), state.mtu, &report)?;
    Ok(ExitCode::SUCCESS)
}

/// The path flags, each for both directions or AB/BA.
fn path_spec(a: &UpArgs) -> anyhow::Result<wirerate_lab::path::PathSpec> {
    use wirerate_lab::path::{parse_duration_us, parse_percent, per_direction, PathSpec};
    let mut p = PathSpec {
        seed: a.seed,
        ..Default::default()
    };
    fn flag<T>(
        name: &str,
        r: Result<T, wirerate_lab::path::PathError>,
    ) -> Result<T, exit::UsageError> {
        r.map_err(|e| exit::UsageError(format!("--{name}: {e}")))
    }
    if let Some(v) = &a.delay {
        (p.ab.delay_us, p.ba.delay_us) = flag("delay", per_direction(v, parse_duration_us))?;
    }
    if let Some(v) = &a.jitter {
        (p.ab.jitter_us, p.ba.jitter_us) = flag("jitter", per_direction(v, parse_duration_us))?;
    }
    if let Some(v) = &a.loss {
        (p.ab.loss, p.ba.loss) = flag("loss", per_direction(v, parse_percent))?;
    }
    if let Some(v) = &a.reorder {
        (p.ab.reorder, p.ba.reorder) = flag("reorder", per_direction(v, parse_percent))?;
    }
    Ok(p)
}

/// `--link-delay HOST=TIME`, each given once.
fn link_delays(given: &[String]) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
    let mut out = std::collections::BTreeMap::new();
    for g in given {
        let Some((host, time)) = g.split_once('=') else {
            return exit::usage(format!("--link-delay: '{g}' is not HOST=TIME"));
        };
        let us = wirerate_lab::path::parse_duration_us(time.trim())
            .map_err(|e| exit::UsageError(format!("--link-delay {host}: {e}")))?;
        if out.insert(host.trim().to_string(), us).is_some() {
            return exit::usage(format!("--link-delay: host '{host}' is given twice"));
        }
    }
    Ok(out)
}

/// `--buffer`: bytes, or the time the queue holds at the link rate.
fn buffer_bytes(given: &str, link_bps: f64) -> anyhow::Result<u64> {
    let t = given.trim();
    let is_time = t.ends_with("ms")
        || t.ends_with("us")
        || t.ends_with("µs")
        || (t.ends_with('s') && !t.ends_with("Bs"));
    if is_time {
        let us = wirerate_lab::path::parse_duration_us(t)
            .map_err(|e| exit::UsageError(format!("--buffer: {e}")))?;
        return Ok((link_bps / 8.0 * us as f64 / 1e6).round() as u64);
    }
    match Bytes::parse(t) {
        Ok(b) => Ok(b.get()),
        Err(e) => exit::usage(format!("--buffer: {e}")),
    }
}

/// Bad input is a usage error (exit 2); everything else a runtime failure (exit 1).
fn lab_err<T>(e: LabError) -> anyhow::Result<T> {
    match e {
        LabError::Invalid(msg) => exit::usage(msg),
        other => Err(other.into()),
    }
}

fn up_spec(a: &UpArgs) -> anyhow::Result<LabSpec> {
    let link_bps = match BitRate::parse(&a.rate) {
        Ok(r) => r.bps(),
        Err(e) => return exit::usage(format!("--rate: {e}")),
    };
    let mtu = match Bytes::parse(&a.mtu)
        .ok()
        .and_then(|b| u32::try_from(b.get()).ok())
    {
        Some(m) => m,
        None => return exit::usage(format!("--mtu: '{}' is not a size in bytes", a.mtu)),
    };
    let buffer_bytes = match &a.buffer {
        Some(b) => buffer_bytes(b, link_bps)?,
        None => wirerate_lab::spec::default_buffer_bytes(link_bps, mtu),
    };
    let hosts: Vec<String> = match &a.count {
        Some(n) if a.hosts_given() => {
            return exit::usage(format!("give --hosts or --count, not both (--count {n})"))
        }
        Some(n) if !(2..=wirerate_lab::spec::MAX_HOSTS).contains(n) => {
            return exit::usage(format!(
                "--count: a lab has 2 to {} hosts, not {n}",
                wirerate_lab::spec::MAX_HOSTS
            ))
        }
        Some(n) => (0..*n).map(|i| format!("h{}", i + 1)).collect(),
        None => a.hosts.split(',').map(|h| h.trim().to_string()).collect(),
    };
    if hosts.len() < 2 {
        return exit::usage(format!(
            "--hosts: give two or more names separated by commas, not '{}'",
            a.hosts
        ));
    }
    let spec = LabSpec {
        name: a.name.name.clone(),
        hosts,
        link_bps,
        buffer_bytes,
        mtu,
        path: path_spec(a)?,
        link_delay_us: link_delays(&a.link_delay)?,
    };
    if let Err(e) = spec.validate() {
        return lab_err(e);
    }
    Ok(spec)
}

fn up(a: UpArgs) -> anyhow::Result<ExitCode> {
    let spec = up_spec(&a)?;
    let state = match wirerate_lab::up(&spec) {
        Ok(s) => s,
        Err(e) => return lab_err(e),
    };
    say_raw!("{}", describe(&state));
    let me = invoked_as();
    let first = state.hosts.first().map_or("HOST", |h| h.name.as_str());
    say!(
        "run a command on a host: {me} lab exec --name {} {first} -- CMD",
        state.name
    );
    if let [a, b, ..] = state.hosts.as_slice() {
        let server = wirerate_lab::host_ipv4(&state, &a.name).unwrap_or("ADDRESS");
        say!("a test across the lab, from {} to {}:", b.name, a.name);
        say!(
            "  {me} lab exec --name {} {} -- wirerate serve &",
            state.name,
            a.name
        );
        say!(
            "  {me} lab exec --name {} {} -- wirerate run {server}",
            state.name,
            b.name
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// How to invoke this binary from a shell: `wirerate` when that name on PATH is this very
/// file, else its full path.
fn invoked_as() -> String {
    let Some(me) = this_binary().and_then(|p| p.canonicalize().ok()) else {
        return "wirerate".into();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .filter_map(|dir| dir.join("wirerate").canonicalize().ok())
            .next()
            .is_some_and(|found| found == me)
    });
    if on_path {
        "wirerate".into()
    } else {
        me.display().to_string()
    }
}

/// The running binary, so that `lab exec HOST -- wirerate …` needs no PATH and runs the
/// same version as the lab.
fn this_binary() -> Option<std::path::PathBuf> {
    std::env::current_exe().ok()
}

/// One direction of a path in words.
fn path_words(d: &wirerate_lab::path::PathDir) -> String {
    format!(
        "delay {:.3} ms, jitter ±{:.3} ms (uniform, in order), loss {}%, reordering {}%",
        d.delay_us as f64 / 1e3,
        d.jitter_us as f64 / 1e3,
        d.loss * 100.0,
        d.reorder * 100.0
    )
}

/// What the delay line achieved in one direction.
fn path_report_words(dir: &str, d: &wirerate_lab::path::DirStats) -> String {
    let q = |x| {
        d.delay
            .quantile_us(x)
            .map_or("-".to_string(), |us| format!("{:.3}", us / 1e3))
    };
    format!(
        "    {dir}: {} packets, {} forwarded; queue and delay p50 {} p99 {} ms; dropped {} as asked, {} at the full queue (at most {} bytes queued), {} over the line's {} MiB; {} sent ahead\n",
        d.packets,
        d.forwarded,
        q(0.5),
        q(0.99),
        d.dropped_loss,
        d.dropped_queue,
        d.max_queue_bytes,
        d.dropped_full,
        wirerate_lab::delayline::MAX_HELD_BYTES >> 20,
        d.reordered,
    )
}

/// A lab's link, its hosts and what the model says the link carries.
fn describe(s: &LabState) -> String {
    let mut out = format!(
        "lab {}: {} each way, MTU {}, queue {} bytes, burst {} bytes, tbf overhead {} mpu {}\n",
        s.name,
        format_bps(s.link_bps),
        s.mtu,
        s.buffer_bytes,
        s.burst_bytes,
        s.overhead_bytes,
        s.mpu_bytes
    );
    for h in &s.hosts {
        out += &format!(
            "  {:<12} {:<24} {:<16} {}\n",
            h.name, h.netns, h.ipv4, h.ipv6
        );
    }
    if let Some(sw) = &s.switch_netns {
        if s.path.is_plain() && s.link_delay_us.is_empty() {
            out += &format!(
                "  {} hosts on bridge {} in {sw}, each link shaped at both ends\n",
                s.hosts.len(),
                wirerate_lab::spec::BRIDGE
            );
        } else {
            let dirs = if s.hosts.len() > 2 {
                out += &format!(
                    "  each host's link to bridge {} runs through the delay line in {sw}; \
                     two hosts see the sum of their links\n",
                    wirerate_lab::spec::BRIDGE
                );
                [("host to switch", s.path.ab), ("switch to host", s.path.ba)]
            } else {
                out += &format!("  path through the delay line in {sw}\n");
                [("a to b", s.path.ab), ("b to a", s.path.ba)]
            };
            for (dir, d) in dirs {
                out += &format!("    {dir}: {}\n", path_words(&d));
            }
            for (host, us) in &s.link_delay_us {
                out += &format!(
                    "    {host}'s link: delay {:.3} ms each way\n",
                    *us as f64 / 1e3
                );
            }
            out += &format!("    seed {}\n", s.path.seed);
        }
    }
    let goodput = |proto| {
        let p = WireParams {
            mtu: s.mtu,
            ..WireParams::ethernet(s.link_bps, proto)
        };
        wire::model(&p)
            .map(|m| format_bps(m.goodput_bps))
            .unwrap_or_else(|_| "n/a".into())
    };
    out += &format!(
        "  model goodput: TCP {} (timestamps), UDP {}\n",
        goodput(WireProto::Tcp),
        goodput(WireProto::Udp)
    );
    out
}

fn down(name: &str) -> anyhow::Result<ExitCode> {
    let report = match wirerate_lab::down(name) {
        Ok(r) => r,
        Err(e) => return lab_err(e),
    };
    if report.removed_netns.is_empty() {
        say!("lab {name}: nothing to remove");
    } else {
        say!("lab {name}: removed {}", report.removed_netns.join(", "));
    }
    for (ns, pids) in &report.left_running {
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        eprintln!(
            "wirerate: processes still run in {ns} (pids {}); it goes when they exit",
            pids.join(" ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    if a.here {
        return here(a.json);
    }
    let labs = match wirerate_lab::status(a.name.as_deref()) {
        Ok(l) => l,
        Err(e) => return lab_err(e),
    };
    if a.json {
        say!("{}", serde_json::to_string_pretty(&labs)?);
        return Ok(ExitCode::SUCCESS);
    }
    if labs.is_empty() {
        say!("no labs");
    }
    for lab in &labs {
        say_raw!("{}", status_text(lab));
    }
    Ok(ExitCode::SUCCESS)
}

/// Where this process runs: the lab host and its link, from the lab's record.
fn here(json: bool) -> anyhow::Result<ExitCode> {
    let Some(link) = wirerate_lab::current_lab() else {
        anyhow::bail!("this process does not run on a lab host");
    };
    if json {
        say!("{}", serde_json::to_string_pretty(&link)?);
    } else {
        say!("host {} ({}) of:", link.host.name, link.host.netns);
        say_raw!("{}", describe(&link.lab));
    }
    Ok(ExitCode::SUCCESS)
}

fn status_text(lab: &LabStatus) -> String {
    let mut out = match &lab.state {
        Some(s) => describe(s),
        None => format!(
            "lab {}: no record (made by hand or half removed)\n",
            lab.name
        ),
    };
    let n = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
    for h in &lab.hosts {
        out += &format!(
            "  {} ({}): {}\n    {}\n    sent {} bytes in {} packets, {} dropped at the queue limit\n",
            h.host,
            h.netns,
            h.addresses.join(" "),
            h.qdisc,
            n(h.sent_bytes),
            n(h.sent_packets),
            n(h.dropped_packets)
        );
        if let Some(p) = h.switch_port.as_ref().filter(|_| lab.path.is_none()) {
            out += &format!(
                "    switch port {}: {}\n    sent {} bytes in {} packets to the host, {} dropped at the queue limit\n",
                p.ifname,
                p.qdisc,
                n(p.sent_bytes),
                n(p.sent_packets),
                n(p.dropped_packets)
            );
        }
    }
    if let Some(p) = &lab.path {
        out += &format!("  delay line (pid {}, {:.0} s):\n", p.pid, p.seconds);
        if p.links.is_empty() {
            out += &path_report_words("a to b", &p.ab);
            out += &path_report_words("b to a", &p.ba);
        }
        for l in &p.links {
            out += &path_report_words(&format!("{} to switch", l.host), &l.up);
            out += &path_report_words(&format!("switch to {}", l.host), &l.down);
        }
    }
    out
}

fn exec(a: ExecArgs) -> anyhow::Result<ExitCode> {
    let Some((program, rest)) = a.cmd.split_first() else {
        return exit::usage("give a command after '--'");
    };
    // a bare `wirerate` is this binary (found without PATH, and the same version)
    let me = (program == "wirerate")
        .then(this_binary)
        .flatten()
        .map(|p| p.display().to_string());
    let program = me.as_deref().unwrap_or(program);
    let mut cmd = match wirerate_lab::exec_command(&a.name.name, &a.node, program, rest) {
        Ok(c) => c,
        Err(e) => return lab_err(e),
    };
    // Become the command, so its exit status and signals are the caller's to see and send.
    use std::os::unix::process::CommandExt;
    let e = cmd.exec();
    Err(wirerate_lab::sh::spawn_error("ip", e).into())
}
