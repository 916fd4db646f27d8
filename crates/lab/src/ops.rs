//! Making, inspecting and removing labs. `up` either finishes or removes what it made;
//! `down` removes only namespaces named with the lab prefix and ends no process but the
//! lab's own delay line (by the pid its record holds, checked to be the delay line).

use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::sh::run;
use crate::spec::{addr_of, ipv4_cidr, ipv6_cidr, parse_netns, LabSpec, IFNAME};
use crate::spec::{TBF_MPU_BYTES, TBF_OVERHEAD_BYTES};
use crate::state::{self, LabHost, LabState, NETNS_DIR, STATE_DIR};
use crate::LabError;

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn require_root() -> Result<(), LabError> {
    if is_root() {
        Ok(())
    } else {
        Err(LabError::NotRoot)
    }
}

/// Namespaces that exist for lab `name`.
fn namespaces_of(name: &str) -> Vec<String> {
    state::lab_namespaces(Path::new(NETNS_DIR))
        .into_iter()
        .filter(|ns| parse_netns(ns).is_some_and(|(lab, _)| lab == name))
        .collect()
}

/// Creates the lab: two namespaces, a veth pair between them, addresses, offloads off and a
/// tbf shaper on each egress. On any failure, removes what it made and returns the error.
pub fn up(spec: &LabSpec) -> Result<LabState, LabError> {
    spec.validate()?;
    require_root()?;
    if !namespaces_of(&spec.name).is_empty() || switch_exists(&spec.name) {
        return Err(LabError::Exists(spec.name.clone()));
    }
    let mut made = Vec::new();
    let built = if spec.delayed() {
        build_delayed(spec, &mut made)
    } else if spec.bridged() {
        build_bridged(spec, &mut made)
    } else {
        build(spec, &mut made)
    };
    match built {
        Ok(state) => Ok(state),
        Err(e) => {
            if let Some(s) = state::load(Path::new(STATE_DIR), &spec.name) {
                end_delay_line(&s);
            }
            for ns in made.iter().rev() {
                let _ = run("ip", &["netns", "del", ns.as_str()]);
            }
            let _ = state::remove(Path::new(STATE_DIR), &spec.name);
            Err(e)
        }
    }
}

/// Two hosts whose link runs through the delay line in the switch namespace, or three or
/// more whose links each run through it to the bridge (the commands are
/// [`LabSpec::delayed_commands`]); the delay line is started and waited for.
fn build_delayed(spec: &LabSpec, made: &mut Vec<String>) -> Result<LabState, LabError> {
    for (program, args) in spec.delayed_commands() {
        run(program, &args)?;
        if args.first().map(String::as_str) == Some("netns")
            && args.get(1).map(String::as_str) == Some("add")
        {
            made.extend(args.get(2).cloned());
        }
    }
    let hosts = (0..spec.hosts.len()).map(|i| lab_host(spec, i)).collect();
    let mut state = LabState {
        switch_netns: Some(spec.switch_netns()),
        ..lab_state(spec, hosts)
    };
    state::save(Path::new(STATE_DIR), &state)?;
    state.delay_line_pid = Some(start_delay_line(spec)?);
    state::save(Path::new(STATE_DIR), &state)?;
    Ok(state)
}

/// What the delay line of lab `name` last reported; None without one.
pub fn read_path_report(name: &str) -> Option<crate::delayline::PathReport> {
    let text = std::fs::read(path_report_path(name)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Where the delay line of lab `name` writes what it did.
pub fn path_report_path(name: &str) -> std::path::PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.path.json"))
}

/// Starts `wirerate lab delay-line --name NAME` (this very binary) in the switch namespace,
/// in a process group of its own so a terminal's Ctrl-C does not reach it, and waits until
/// it has opened its ports and written its first report.
fn start_delay_line(spec: &LabSpec) -> Result<u32, LabError> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe()
        .map_err(|e| LabError::Invalid(format!("cannot find this program: {e}")))?;
    let report = path_report_path(&spec.name);
    let _ = std::fs::remove_file(&report);
    let log = std::fs::File::create(Path::new(STATE_DIR).join(format!("{}.path.log", spec.name)))
        .map_err(|e| LabError::Invalid(format!("cannot write the delay line's log: {e}")))?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", &spec.switch_netns()])
        .arg(exe)
        .args(["lab", "delay-line", "--name", &spec.name])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .map_err(|e| LabError::Invalid(format!("cannot start the delay line: {e}")))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let why = std::fs::read_to_string(
                Path::new(STATE_DIR).join(format!("{}.path.log", spec.name)),
            )
            .unwrap_or_default();
            return Err(LabError::Invalid(format!(
                "the delay line ended at once ({status}): {}",
                why.trim()
            )));
        }
        if report.exists() {
            return Ok(child.id());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(LabError::Invalid(
        "the delay line did not start within 5 s".into(),
    ))
}

/// Ends a lab's delay line, by the pid its record holds, if that process is still the
/// delay line (a pid can be reused once it is gone).
fn end_delay_line(s: &LabState) {
    let Some(pid) = s.delay_line_pid else { return };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let ours = String::from_utf8_lossy(&cmdline).contains("delay-line");
    if !ours {
        return;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill takes two integers; the pid was checked to be the lab's delay line.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    for _ in 0..100 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Whether lab `name` has a switch namespace.
fn switch_exists(name: &str) -> bool {
    Path::new(NETNS_DIR)
        .join(crate::spec::switch_netns_name(name))
        .exists()
}

/// Three or more hosts: each joined by its own shaped veth to a bridge in the switch
/// namespace (the commands are [`LabSpec::bridge_commands`]).
fn build_bridged(spec: &LabSpec, made: &mut Vec<String>) -> Result<LabState, LabError> {
    for (program, args) in spec.bridge_commands() {
        run(program, &args)?;
        if args.first().map(String::as_str) == Some("netns")
            && args.get(1).map(String::as_str) == Some("add")
        {
            made.extend(args.get(2).cloned());
        }
    }
    let hosts = (0..spec.hosts.len()).map(|i| lab_host(spec, i)).collect();
    let state = LabState {
        switch_netns: Some(spec.switch_netns()),
        ..lab_state(spec, hosts)
    };
    state::save(Path::new(STATE_DIR), &state)?;
    Ok(state)
}

fn lab_host(spec: &LabSpec, i: usize) -> LabHost {
    LabHost {
        name: spec.hosts[i].clone(),
        netns: spec.netns(i),
        ifname: IFNAME.to_string(),
        ipv4: ipv4_cidr(i),
        ipv6: ipv6_cidr(i),
    }
}

fn lab_state(spec: &LabSpec, hosts: Vec<LabHost>) -> LabState {
    LabState {
        name: spec.name.clone(),
        link_bps: spec.link_bps,
        mtu: spec.mtu,
        buffer_bytes: spec.buffer_bytes,
        burst_bytes: spec.burst_bytes(),
        overhead_bytes: TBF_OVERHEAD_BYTES,
        mpu_bytes: TBF_MPU_BYTES,
        hosts,
        switch_netns: None,
        path: spec.path,
        link_delay_us: spec.link_delay_us.clone(),
        delay_line_pid: None,
    }
}

fn build(spec: &LabSpec, made: &mut Vec<String>) -> Result<LabState, LabError> {
    let ns = [spec.netns(0), spec.netns(1)];
    for n in &ns {
        run("ip", &["netns", "add", n.as_str()])?;
        made.push(n.clone());
    }
    // Both ends are born inside their namespaces, so no name is ever taken in the host's.
    run(
        "ip",
        &[
            "link", "add", IFNAME, "netns", &ns[0], "type", "veth", "peer", "name", IFNAME,
            "netns", &ns[1],
        ],
    )?;
    let mtu = spec.mtu.to_string();
    let mut hosts = Vec::new();
    for (i, n) in ns.iter().enumerate() {
        run("ip", &["-n", n, "link", "set", "lo", "up"])?;
        run("ip", &["-n", n, "link", "set", IFNAME, "mtu", &mtu])?;
        // Without this the shaper sees 64 KB super-frames and charges them as one packet.
        run(
            "ip",
            &[
                "netns", "exec", n, "ethtool", "-K", IFNAME, "tso", "off", "gso", "off", "gro",
                "off",
            ],
        )?;
        run(
            "ip",
            &["-n", n, "addr", "add", &ipv4_cidr(i), "dev", IFNAME],
        )?;
        run(
            "ip",
            &[
                "-n",
                n,
                "-6",
                "addr",
                "add",
                &ipv6_cidr(i),
                "dev",
                IFNAME,
                "nodad",
            ],
        )?;
        run("tc", &spec.tbf_args(n))?;
        hosts.push(lab_host(spec, i));
    }
    for n in &ns {
        run("ip", &["-n", n, "link", "set", IFNAME, "up"])?;
    }
    let state = lab_state(spec, hosts);
    state::save(Path::new(STATE_DIR), &state)?;
    Ok(state)
}

/// What `down` did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DownReport {
    pub removed_netns: Vec<String>,
    /// Processes still running in a removed namespace; they keep it alive until they exit.
    pub left_running: Vec<(String, Vec<u32>)>,
}

/// Removes lab `name`: its namespaces (which takes the veth pair and shapers with them) and
/// its record. A lab that does not exist is not an error: the report is empty.
pub fn down(name: &str) -> Result<DownReport, LabError> {
    require_root()?;
    if let Some(s) = state::load(Path::new(STATE_DIR), name) {
        end_delay_line(&s);
    }
    let _ = std::fs::remove_file(path_report_path(name));
    let _ = std::fs::remove_file(Path::new(STATE_DIR).join(format!("{name}.path.log")));
    let mut report = DownReport::default();
    let mut first_error = None;
    let mut all = namespaces_of(name);
    if switch_exists(name) {
        all.push(crate::spec::switch_netns_name(name));
    }
    for ns in all {
        let pids: Vec<u32> = run("ip", &["netns", "pids", ns.as_str()])
            .map(|out| {
                out.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        match run("ip", &["netns", "del", ns.as_str()]) {
            Ok(_) => {
                if !pids.is_empty() {
                    report.left_running.push((ns.clone(), pids));
                }
                report.removed_netns.push(ns);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    state::remove(Path::new(STATE_DIR), name)?;
    match first_error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// One host as it is now: its namespace, its addresses and its shaper, read live.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostStatus {
    pub netns: String,
    pub host: String,
    pub addresses: Vec<String>,
    /// The shaper as tc shows it.
    pub qdisc: String,
    /// What left this host's egress, and what its queue limit dropped.
    pub sent_bytes: Option<u64>,
    pub sent_packets: Option<u64>,
    pub dropped_packets: Option<u64>,
    /// In a lab on a bridge: the switch's port towards this host, its shaper and what it
    /// sent to the host and dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_port: Option<PortStatus>,
}

/// The switch's port towards one host of a lab on a bridge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortStatus {
    pub ifname: String,
    pub qdisc: String,
    pub sent_bytes: Option<u64>,
    pub sent_packets: Option<u64>,
    pub dropped_packets: Option<u64>,
}

/// Reads the first qdisc of `tc -s qdisc show`: its description line, then the counters
/// of its `Sent N bytes N pkt (dropped N, …)` line. Missing counters are None.
pub fn parse_qdisc_stats(text: &str) -> (String, Option<u64>, Option<u64>, Option<u64>) {
    let mut lines = text.lines();
    let head = lines.next().unwrap_or("").trim().to_string();
    let Some(sent) = lines.map(str::trim).find(|l| l.starts_with("Sent ")) else {
        return (head, None, None, None);
    };
    let words: Vec<&str> = sent
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(')
        .collect();
    let after = |key: &str| -> Option<u64> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1)?.parse().ok()
    };
    let before = |key: &str| -> Option<u64> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    (head, before("bytes"), before("pkt"), after("dropped"))
}

/// A lab as it is now: its record (None when missing) and its hosts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabStatus {
    pub name: String,
    pub state: Option<LabState>,
    pub hosts: Vec<HostStatus>,
    /// What the delay line did, for a lab with a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<crate::delayline::PathReport>,
}

/// Every lab that has a namespace, or only lab `only`.
pub fn status(only: Option<&str>) -> Result<Vec<LabStatus>, LabError> {
    require_root()?;
    let mut labs: Vec<LabStatus> = Vec::new();
    for ns in state::lab_namespaces(Path::new(NETNS_DIR)) {
        let Some((lab, host)) = parse_netns(&ns) else {
            continue;
        };
        if only.is_some_and(|o| o != lab) {
            continue;
        }
        let addresses = run(
            "ip",
            &["-n", ns.as_str(), "-br", "addr", "show", "dev", IFNAME],
        )
        .map(|out| out.split_whitespace().skip(2).map(str::to_string).collect())
        .unwrap_or_default();
        let stats = run(
            "tc",
            &["-n", ns.as_str(), "-s", "qdisc", "show", "dev", IFNAME],
        )
        .unwrap_or_default();
        let (qdisc, sent_bytes, sent_packets, dropped_packets) = parse_qdisc_stats(&stats);
        let sw = crate::spec::switch_netns_name(lab);
        let switch_port = switch_exists(lab).then(|| {
            let ifname = crate::spec::port_name(host);
            let text = run(
                "tc",
                &["-n", sw.as_str(), "-s", "qdisc", "show", "dev", &ifname],
            )
            .unwrap_or_default();
            let (qdisc, sent_bytes, sent_packets, dropped_packets) = parse_qdisc_stats(&text);
            PortStatus {
                ifname,
                qdisc,
                sent_bytes,
                sent_packets,
                dropped_packets,
            }
        });
        let entry = HostStatus {
            switch_port,
            netns: ns.clone(),
            host: host.to_string(),
            addresses,
            qdisc,
            sent_bytes,
            sent_packets,
            dropped_packets,
        };
        match labs.iter_mut().find(|l| l.name == lab) {
            Some(l) => l.hosts.push(entry),
            None => labs.push(LabStatus {
                name: lab.to_string(),
                state: state::load(Path::new(STATE_DIR), lab),
                hosts: vec![entry],
                path: read_path_report(lab),
            }),
        }
    }
    Ok(labs)
}

/// A command that runs `program args…` on host `host` of lab `lab`. The caller decides how
/// to run it (inherit stdio, capture, spawn and wait with a deadline).
pub fn exec_command(
    lab: &str,
    host: &str,
    program: &str,
    args: &[String],
) -> Result<Command, LabError> {
    require_root()?;
    let ns = crate::spec::netns_name(lab, host);
    if !namespaces_of(lab).contains(&ns) {
        return Err(LabError::NoSuchHost {
            lab: lab.to_string(),
            host: host.to_string(),
        });
    }
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns.as_str(), program]).args(args);
    Ok(cmd)
}

/// The IPv4 address (without prefix) of `host` in a lab's record.
pub fn host_ipv4<'a>(state: &'a LabState, host: &str) -> Option<&'a str> {
    state
        .hosts
        .iter()
        .find(|h| h.name == host)
        .map(|h| addr_of(&h.ipv4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qdisc_counters() {
        let text =
            "qdisc tbf 8026: root refcnt 3 rate 10Mbit burst 18100b lat 90.4ms overhead 24 \n \
                    Sent 7638274 bytes 876 pkt (dropped 158, overlimits 2038 requeues 0) \n \
                    backlog 0b 0p requeues 0\n";
        let (head, bytes, pkts, dropped) = parse_qdisc_stats(text);
        assert!(head.starts_with("qdisc tbf 8026:") && head.ends_with("overhead 24"));
        assert_eq!(
            (bytes, pkts, dropped),
            (Some(7_638_274), Some(876), Some(158))
        );
        assert_eq!(parse_qdisc_stats(""), (String::new(), None, None, None));
        let odd = parse_qdisc_stats("qdisc x\n Sent lots bytes\n");
        assert_eq!((odd.1, odd.2, odd.3), (None, None, None));
    }
}
