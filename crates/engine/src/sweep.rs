//! Sweep workers (`wirerate sweep`): NetPIPE's method over one TCP stream. Each trial opens
//! with a header (size, repeats, mode); the client times the repeats and the server mirrors
//! them: ping-pong (echo each message) or stream (take them all, then one byte back).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::time::Instant;

use wirerate_core::side_report::StreamReport;
use wirerate_core::sweep::{limits, schedule, SweepPoint, SweepSide, SweepSpec};
use wirerate_probe::cpu::ThreadTimes;
use wirerate_proto::sweep::{SweepHeader, SWEEP_HEADER_LEN};

use crate::rr::SideMsg;
use crate::stream::{PageBuf, Plan, Tally};

fn sweep_of(plan: &Plan) -> SweepSpec {
    plan.spec.test.sweep().cloned().unwrap_or_default()
}

fn describe(e: &io::Error) -> String {
    match e.kind() {
        _ if crate::net::timed_out(e) => "sweep: the peer was silent for the idle timeout".into(),
        io::ErrorKind::UnexpectedEof => "sweep: the peer closed the connection".into(),
        _ => format!("sweep: {e}"),
    }
}

/// One trial: `repeats` messages of `size` bytes; returns the seconds they took. Ping-pong
/// messages go out of and come back into the same buffer, as NetPIPE's do.
fn trial(
    sock: &mut TcpStream,
    buf: &mut [u8],
    size: usize,
    repeats: u32,
    stream: bool,
) -> io::Result<f64> {
    let h = SweepHeader {
        size: size as u64,
        repeats,
        stream,
    };
    sock.write_all(&h.emit())?;
    let msg = &mut buf[..size];
    let t0 = Instant::now();
    if stream {
        for _ in 0..repeats {
            sock.write_all(msg)?;
        }
        sock.read_exact(&mut msg[..1])?;
    } else {
        for _ in 0..repeats {
            sock.write_all(msg)?;
            sock.read_exact(msg)?;
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Messages for a trial of about `target` seconds at `per` seconds a message, at least 3.
fn repeats_for(target: f64, per: f64) -> u32 {
    let want = (target / per.max(1e-9)).round();
    (want as u32).clamp(3, limits::MAX_REPEATS)
}

/// The client: every size of the schedule, `trials` times. A size's first trial guesses its
/// time per message from the previous size's best, scaled by the sizes (NetPIPE's rule: no
/// trial overshoots much as sizes grow); its other trials from its own best so far. The
/// side hears the figures after every size, for progress.
pub fn run_client(mut sock: TcpStream, plan: Plan, tx: Sender<SideMsg>) -> StreamReport {
    let t0 = ThreadTimes::now();
    let sw = sweep_of(&plan);
    let _ = sock.set_nodelay(true);
    let _ = sock.set_read_timeout(Some(plan.idle));
    let _ = sock.set_write_timeout(Some(plan.idle));
    let max = sw.max_bytes as usize;
    let mut page = PageBuf::new(max.max(1));
    let buf = page.get_mut();
    let mut tally = Tally::new(&plan);
    let mut side = SweepSide::default();
    let stop_after = sw.stop_after_s();
    let result = (|| -> io::Result<()> {
        // warm-up, untimed: also the first estimate of the time per message
        let sizes = schedule(sw.min_bytes, sw.max_bytes, sw.perturbation_bytes);
        let warm = sizes.first().map_or(1, |&s| s as usize);
        let mut prev = (warm, trial(&mut sock, buf, warm, 10, sw.stream)? / 10.0);
        for size in sizes {
            let size = size as usize;
            let mut times = Vec::with_capacity(sw.trials as usize);
            let mut messages = 0u64;
            let mut slow = false;
            let mut best = prev.1 * size as f64 / prev.0.max(1) as f64;
            for _ in 0..sw.trials {
                let repeats = repeats_for(sw.point_time_s, best);
                let t = trial(&mut sock, buf, size, repeats, sw.stream)?;
                let moved = size as u64 * u64::from(repeats) * if sw.stream { 1 } else { 2 };
                tally.add(
                    usize::try_from(moved).unwrap_or(usize::MAX),
                    Instant::now(),
                    &plan.counters,
                );
                let per = t / f64::from(repeats);
                best = if times.is_empty() { per } else { best.min(per) };
                messages += u64::from(repeats);
                // one-way: half a round trip, or the time per streamed message
                times.push(if sw.stream { per } else { per / 2.0 });
                slow |= t > stop_after;
                if plan.stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
            }
            prev = (size, best);
            if let Some(p) = SweepPoint::from_trials(size as u64, messages, &times) {
                side.points.push(p);
                let _ = tx.send(SideMsg::Sweep(side.clone()));
            }
            if slow {
                side.stopped_early = size < max;
                break;
            }
        }
        Ok(())
    })();
    let error = result.err().map(|e| describe(&e));
    if error.is_none() {
        let _ = sock.write_all(&SweepHeader::END.emit());
        let _ = sock.shutdown(Shutdown::Write);
        let _ = sock.read(&mut buf[..1]);
    }
    let seconds = plan.start.elapsed().as_secs_f64();
    let _ = tx.send(SideMsg::Sweep(side));
    let mut r = tally.report(&plan, t0, error);
    r.seconds = seconds;
    r
}

/// The server: mirrors each trial the client announces, within the agreed maximum size,
/// until the end header, the client's close, or the idle timeout.
pub fn run_server(mut sock: TcpStream, plan: Plan) -> StreamReport {
    let t0 = ThreadTimes::now();
    let sw = sweep_of(&plan);
    let _ = sock.set_nodelay(true);
    let _ = sock.set_read_timeout(Some(plan.idle));
    let _ = sock.set_write_timeout(Some(plan.idle));
    let mut page = PageBuf::new((sw.max_bytes as usize).max(1));
    let buf = page.get_mut();
    let mut tally = Tally::new(&plan);
    let result = (|| -> Result<(), String> {
        loop {
            let mut hb = [0u8; SWEEP_HEADER_LEN];
            match sock.read_exact(&mut hb) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(describe(&e)),
            }
            let h = SweepHeader::parse(&hb, sw.max_bytes, limits::MAX_REPEATS)
                .map_err(|e| format!("sweep: {e}"))?;
            if h.size == 0 {
                return Ok(());
            }
            let size = h.size as usize;
            let io = (|| -> io::Result<()> {
                if h.stream {
                    let mut left = h.size * u64::from(h.repeats);
                    while left > 0 {
                        let want = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                        match sock.read(&mut buf[..want]) {
                            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                            Ok(n) => left -= n as u64,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    }
                    sock.write_all(&buf[..1])
                } else {
                    for _ in 0..h.repeats {
                        sock.read_exact(&mut buf[..size])?;
                        sock.write_all(&buf[..size])?;
                    }
                    Ok(())
                }
            })();
            io.map_err(|e| describe(&e))?;
            let moved = h.size * u64::from(h.repeats);
            tally.add(
                usize::try_from(moved).unwrap_or(usize::MAX),
                Instant::now(),
                &plan.counters,
            );
            if plan.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
        }
    })();
    let _ = sock.shutdown(Shutdown::Both);
    let mut r = tally.report(&plan, t0, result.err());
    r.seconds = plan.start.elapsed().as_secs_f64();
    r
}
