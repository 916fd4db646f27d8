//! Golden tests of the ttcp lines. The first ones rebuild lines published in old mailing-list
//! reports from figures that produce them, so the arithmetic is pinned to real logs.

use super::*;
use wirerate_core::result::{CpuSummary, Env, IoStats, IoSummary, Summary, Tool, WireSummary};
use wirerate_core::result::{StreamResult, StreamSide};
use wirerate_core::spec::End;
use wirerate_core::TestSpec;

fn tv(sec: i64, usec: i64) -> Timeval {
    Timeval { sec, usec }
}

fn transfer(bytes: u64, calls: u64, real: Timeval, user: Timeval, sys: Timeval) -> Transfer {
    let start = Sample {
        clock: tv(1000, 0),
        usage: Usage::default(),
    };
    let mut end = start;
    end.clock = tv(1000 + real.sec, real.usec);
    end.usage.user = user;
    end.usage.sys = sys;
    Transfer {
        bytes,
        calls,
        start,
        end,
    }
}

fn plain(side: Side, transfer: Transfer) -> Report {
    Report {
        side,
        transfer,
        unit: RateUnit::KByte,
        verbose: false,
        buffer_addr: 0,
        fields: UsageFields::Bsd,
    }
}

#[test]
fn localhost_run_of_1993_is_reproduced() {
    // "ttcp performance to localhost", a 486DX2/66, June 1993 (the headline there is from an
    // older ttcp that printed the offset as "+0").
    let mut t = transfer(16_777_216, 2048, tv(5, 399_206), tv(0, 0), tv(3, 300_000));
    t.end.usage.voluntary_csw = 2536;
    t.end.usage.involuntary_csw = 43;
    let mut out = headline(&Headline {
        side: Side::Transmit,
        buflen: 8192,
        nbuf: 2048,
        align: 16384,
        offset: 0,
        port: 5001,
        sockbufsize: None,
        udp: false,
        host: Some("localhost"),
    });
    out += &message(Side::Transmit, "socket");
    out += &message(Side::Transmit, "connect");
    out += &report(&plain(Side::Transmit, t));
    assert_eq!(
        out,
        "ttcp-t: buflen=8192, nbuf=2048, align=16384/0, port=5001  tcp  -> localhost\n\
         ttcp-t: socket\n\
         ttcp-t: connect\n\
         ttcp-t: 16777216 bytes in 5.40 real seconds = 3034.52 KB/sec +++\n\
         ttcp-t: 2048 I/O calls, msec/call = 2.70, calls/sec = 379.32\n\
         ttcp-t: 0.0user 3.3sys 0:05real 61% 0i+0d 0maxrss 0+0pf 2536+43csw\n"
    );
}

#[test]
fn kernel_regression_report_of_1996_is_reproduced() {
    // Two of the 64 MB runs of the "Tx TCP rates down > 20%" report, May 1996.
    let mut fast = transfer(
        67_108_864,
        8192,
        tv(59, 30_300),
        tv(0, 60_000),
        tv(16, 550_000),
    );
    fast.end.usage.minor_faults = 2;
    assert_eq!(
        report(&plain(Side::Transmit, fast)),
        "ttcp-t: 67108864 bytes in 59.03 real seconds = 1110.21 KB/sec +++\n\
         ttcp-t: 8192 I/O calls, msec/call = 7.38, calls/sec = 138.78\n\
         ttcp-t: 0.0user 16.5sys 0:59real 28% 0i+0d 0maxrss 0+2pf 0+0csw\n"
    );
    let mut slow = transfer(
        67_108_864,
        8192,
        tv(79, 819_800),
        tv(0, 100_000),
        tv(7, 900_000),
    );
    slow.end.usage.minor_faults = 1;
    assert_eq!(
        report(&plain(Side::Transmit, slow)),
        "ttcp-t: 67108864 bytes in 79.82 real seconds = 821.05 KB/sec +++\n\
         ttcp-t: 8192 I/O calls, msec/call = 9.98, calls/sec = 102.63\n\
         ttcp-t: 0.1user 7.9sys 1:19real 10% 0i+0d 0maxrss 0+1pf 0+0csw\n"
    );
}

#[test]
fn msec_per_call_uses_1024() {
    // The embedded-board example: 1024 × 1.58 / 2048 = 0.79, where 1000 would give 0.77.
    let t = transfer(16_777_216, 2048, tv(1, 577_530), tv(0, 0), tv(1, 500_000));
    assert_eq!(
        report(&plain(Side::Transmit, t)),
        "ttcp-t: 16777216 bytes in 1.58 real seconds = 10385.86 KB/sec +++\n\
         ttcp-t: 2048 I/O calls, msec/call = 0.79, calls/sec = 1298.23\n\
         ttcp-t: 0.0user 1.5sys 0:01real 95% 0i+0d 0maxrss 0+0pf 0+0csw\n"
    );
}

#[test]
fn rate_letters_are_powers_of_1024() {
    let mib_per_s = 1_048_576.0;
    let cases = [
        ('K', "1024.00 KB"),
        ('k', "8192.00 Kbit"),
        ('M', "1.00 MB"),
        ('m', "8.00 Mbit"),
        ('G', "0.00 GB"),
        ('g', "0.01 Gbit"),
    ];
    for (letter, want) in cases {
        let unit = RateUnit::from_letter(letter).unwrap();
        assert_eq!(rate(unit, mib_per_s), want, "-f {letter}");
    }
}

#[test]
fn empty_transfer_is_clamped_not_divided_by_zero() {
    let t = transfer(0, 0, tv(0, 0), tv(0, 0), tv(0, 0));
    assert_eq!(
        report(&plain(Side::Receive, t)),
        "ttcp-r: 0 bytes in 0.00 real seconds = 0.00 KB/sec +++\n\
         ttcp-r: 0 I/O calls, msec/call = inf, calls/sec = 0.00\n\
         ttcp-r: 0.0user 0.0sys 0:00real 0% 0i+0d 0maxrss 0+0pf 0+0csw\n"
    );
}

#[test]
fn usage_parts_are_truncated_separately() {
    // user time 1.995 -> 2.003 s: 8 ms, printed as 0.0, but counted as one hundredth because
    // the seconds and microseconds are truncated apart; wall 0.02 s, so 1/2 = 50 %.
    let mut start = Sample::default();
    start.usage.user = tv(1, 995_000);
    let mut end = start;
    end.usage.user = tv(2, 3_000);
    end.clock = tv(0, 20_000);
    end.usage.maxrss_kib = 4000;
    assert_eq!(
        usage_line(&start, &end, UsageFields::Bsd),
        "0.0user 0.0sys 0:00real 50% 0i+0d 2000maxrss 0+0pf 0+0csw"
    );
    assert_eq!(
        usage_line(&start, &end, UsageFields::SysV),
        "0.0user 0.0sys 0:00real 50%"
    );
}

#[test]
fn elapsed_time_grows_hours() {
    assert_eq!(elapsed(0), "0:00");
    assert_eq!(elapsed(79), "1:19");
    assert_eq!(elapsed(3599), "59:59");
    assert_eq!(elapsed(3725), "1:02:05");
}

#[test]
fn verbose_adds_cpu_rate_and_buffer_address() {
    let t = transfer(1_048_576, 128, tv(1, 0), tv(0, 250_000), tv(0, 250_000));
    let mut r = plain(Side::Receive, t);
    r.verbose = true;
    r.buffer_addr = 0x5566_0000;
    r.unit = RateUnit::Mbit;
    assert_eq!(
        report(&r),
        "ttcp-r: 1048576 bytes in 1.00 real seconds = 8.00 Mbit/sec +++\n\
         ttcp-r: 1048576 bytes in 0.50 CPU seconds = 16.00 Mbit/cpu sec\n\
         ttcp-r: 128 I/O calls, msec/call = 8.00, calls/sec = 128.00\n\
         ttcp-r: 0.2user 0.2sys 0:01real 50% 0i+0d 0maxrss 0+0pf 0+0csw\n\
         ttcp-r: buffer address 0x55660000\n"
    );
}

#[test]
fn headlines_of_both_sides() {
    let mut h = Headline {
        side: Side::Receive,
        buflen: 1024,
        nbuf: 10,
        align: 16384,
        offset: 8,
        port: 5002,
        sockbufsize: Some(65536),
        udp: true,
        host: Some("ignored"),
    };
    assert_eq!(
        headline(&h),
        "ttcp-r: buflen=1024, nbuf=10, align=16384/8, port=5002, sockbufsize=65536  udp\n"
    );
    h.side = Side::Transmit;
    h.host = Some("::1");
    assert_eq!(
        headline(&h),
        "ttcp-t: buflen=1024, nbuf=10, align=16384/8, port=5002, sockbufsize=65536  udp  -> ::1\n"
    );
}

fn sample_run() -> RunResult {
    let io = |calls| {
        Some(IoStats {
            calls,
            ..IoStats::default()
        })
    };
    RunResult {
        schema_version: 1,
        tool: Tool {
            name: "wirerate".into(),
            version: "0".into(),
        },
        started_unix_s: 0.0,
        spec: TestSpec {
            len_bytes: 8192,
            end: End::Blocks { blocks: 2048 },
            ..TestSpec::default()
        },
        summary: Summary {
            goodput_bps: 0.0,
            sender_bps: 0.0,
            bytes: 16_777_216,
            sender_bytes: 16_777_216,
            seconds: 1.0,
            sender_seconds: 0.98,
            io: IoSummary {
                sender: io(2048),
                receiver: io(4000),
            },
            cpu: CpuSummary {
                local: Some(CpuSide {
                    user_s: 0.01,
                    sys_s: 0.5,
                    ..CpuSide::default()
                }),
                remote: None,
            },
            pi: None,
            tcp: None,
            udp: None,
            wire: WireSummary::default(),
            flows: vec![],
            diagnosis: None,
            rr: None,
            fairness: None,
        },
        intervals: vec![],
        streams: vec![],
        env: Env {
            server_addr: "127.0.0.1:5201".into(),
            ..Env::default()
        },
        evidence: Default::default(),
        interrupted: false,
        sweep: None,
        rpm: None,
        inband: Vec::new(),
    }
}

#[test]
fn run_result_renders_as_ttcp_lines() {
    assert_eq!(
        run_result_lines(&sample_run()),
        "ttcp-t: buflen=8192, nbuf=2048, align=0/0, port=5201  tcp  -> 127.0.0.1\n\
         ttcp-t: 16777216 bytes in 0.98 real seconds = 16718.37 KB/sec +++\n\
         ttcp-t: 2048 I/O calls, msec/call = 0.49, calls/sec = 2089.80\n\
         ttcp-t: 0.0user 0.5sys 0:00real 52%\n\
         ttcp-r: buflen=8192, nbuf=2048, align=0/0, port=5201  tcp\n\
         ttcp-r: 16777216 bytes in 1.00 real seconds = 16384.00 KB/sec +++\n\
         ttcp-r: 4000 I/O calls, msec/call = 0.26, calls/sec = 4000.00\n"
    );
}

#[test]
fn run_result_reverse_swaps_cpu_sides() {
    let mut r = sample_run();
    r.spec.direction = wirerate_core::Direction::Reverse;
    r.env.server_addr = "[::1]:6000".into();
    let text = run_result_lines(&r);
    assert!(text.starts_with("ttcp-t: buflen=8192, nbuf=2048, align=0/0, port=6000  tcp  -> ::1\n"));
    // the client's CPU now belongs to the receiver
    assert!(
        text.ends_with("ttcp-r: 0.0user 0.5sys 0:01real 51%\n"),
        "{text}"
    );
    assert!(!text.contains("ttcp-t: 0.0user"));
}

#[test]
fn addresses_split_into_host_and_port() {
    assert_eq!(split_addr("127.0.0.1:5201"), ("127.0.0.1".into(), 5201));
    assert_eq!(split_addr("[::1]:5201"), ("::1".into(), 5201));
    assert_eq!(split_addr("::1"), ("::1".into(), 0));
    assert_eq!(split_addr(""), ("".into(), 0));
    assert_eq!(split_addr("host:notaport"), ("host".into(), 0));
}

#[test]
fn bidirectional_run_gives_a_pair_of_blocks_per_flow() {
    let mut r = sample_run();
    r.spec.direction = wirerate_core::Direction::Bidir;
    r.spec.end = End::Time { seconds: 1.0 };
    let side = |bytes, calls, seconds| StreamSide {
        bytes,
        counted_bytes: bytes,
        calls,
        seconds,
        ..StreamSide::default()
    };
    let stream = |id, flow, tx: StreamSide, rx: StreamSide| StreamResult {
        id,
        flow,
        sender: tx,
        receiver: rx,
        goodput_bps: 0.0,
        tcp_sender: None,
        tcp_receiver: None,
    };
    r.streams = vec![
        stream(
            1,
            Flow::ClientToServer,
            side(8192, 1, 0.5),
            side(8192, 2, 0.5),
        ),
        stream(
            2,
            Flow::ServerToClient,
            side(16384, 2, 0.25),
            side(16384, 3, 0.25),
        ),
    ];
    let text = run_result_lines(&r);
    let heads: Vec<&str> = text.lines().filter(|l| l.contains("buflen=")).collect();
    assert_eq!(heads.len(), 4, "{text}");
    assert!(text.contains("ttcp-t: 8192 bytes in 0.50 real seconds = 16.00 KB/sec +++\n"));
    assert!(text.contains("ttcp-r: 16384 bytes in 0.25 real seconds = 64.00 KB/sec +++\n"));
    assert!(text.contains("ttcp-t: buflen=8192, nbuf=2, align=0/0, port=5201  tcp  -> 127.0.0.1\n"));
    // the client sends the first flow and receives the second: its CPU appears twice
    assert_eq!(text.matches("0.0user 0.5sys").count(), 2, "{text}");
}
