//! Synthetic results for tests (feature `synth`): realistic shapes, values chosen by the
//! test, and a seeded normal generator so samples look like noisy machines. Shared by the
//! store's tests and the command-line tests.

use crate::result::{
    CpuSide, CpuSummary, Env, HostEnv, InterfaceDelta, Interval, IoSummary, Summary, TcpSummary,
    Tool, WireSummary, SCHEMA_VERSION,
};
use crate::spec::Flow;
use crate::{RunResult, TestSpec};

/// A ten-second TCP run of `goodput_bps`, numbered `n` (which sets its start time), with
/// `intervals` one-second interval reports (more makes the JSON, and the write, larger).
pub fn run(n: u64, goodput_bps: f64, intervals: usize) -> RunResult {
    let seconds = 10.0;
    let bytes = (goodput_bps * seconds / 8.0) as u64;
    let host = |name: &str| HostEnv {
        hostname: Some(name.to_string()),
        kernel: Some("6.8.0-test".to_string()),
        cpu_model: Some("Test CPU @ 3.0GHz".to_string()),
        cores: Some(8),
        interfaces: vec![InterfaceDelta {
            name: "veth0".to_string(),
            mtu_bytes: Some(1500),
            speed_bps: Some(10e9),
            tx_packets: Some(bytes / 1448),
            ..Default::default()
        }],
        socket_buffers: None,
    };
    RunResult {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "wirerate".to_string(),
            version: "0.1.0".to_string(),
        },
        started_unix_s: 1_700_000_000.0 + n as f64 * 11.0,
        spec: TestSpec::default(),
        summary: Summary {
            goodput_bps,
            sender_bps: goodput_bps * 1.001,
            bytes,
            sender_bytes: bytes,
            seconds,
            sender_seconds: seconds,
            io: IoSummary::default(),
            cpu: CpuSummary {
                local: Some(CpuSide {
                    system_percent: Some(20.0 + (n % 5) as f64),
                    ..Default::default()
                }),
                remote: Some(CpuSide {
                    system_percent: Some(25.0),
                    ..Default::default()
                }),
            },
            pi: Some(goodput_bps / 1e6 / 25.0 * goodput_bps / 1e6 / 10_000.0),
            tcp: Some(TcpSummary {
                retransmits: Some(n % 3),
                ..Default::default()
            }),
            udp: None,
            wire: WireSummary {
                link_bps: Some(10e9),
                mtu_bytes: Some(1500),
                ..Default::default()
            },
            flows: vec![],
            diagnosis: None,
            rr: None,
            fairness: None,
        },
        intervals: (0..intervals)
            .map(|i| Interval {
                flow: Flow::ClientToServer,
                stream: None,
                start_s: i as f64,
                end_s: i as f64 + 1.0,
                bytes: bytes / 10,
                bps: goodput_bps,
                omitted: false,
                packets: None,
                loss_percent: None,
                jitter_ms: None,
                tcp: None,
                bottleneck: None,
                rr: None,
            })
            .collect(),
        streams: vec![],
        env: Env {
            client: host("alpha"),
            server: host("beta"),
            embedded_server: false,
            server_addr: "127.0.0.1:5201".to_string(),
        },
        evidence: Default::default(),
        interrupted: false,
        sweep: None,
        rpm: None,
        inband: Vec::new(),
    }
}

/// A small seeded generator (splitmix64) with normal deviates by Box–Muller: repeatable
/// "noisy machine" samples without a dependency.
pub struct Noise(u64);

impl Noise {
    pub fn new(seed: u64) -> Noise {
        Noise(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A draw from N(mean, sd).
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// `count` runs whose goodput is drawn from N(mean, sd) bit/s, numbered from `first`.
pub fn sample(first: u64, count: u64, mean: f64, sd: f64, seed: u64) -> Vec<RunResult> {
    let mut noise = Noise::new(seed);
    (first..first + count)
        .map(|n| run(n, noise.normal(mean, sd), 3))
        .collect()
}
