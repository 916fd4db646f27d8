//! `--db postgres://…` through the real binary against a throwaway PostgreSQL server: the
//! same answers as SQLite (`history`, `show`, `compare`, `report`), writers from many
//! processes at once, some killed with SIGKILL, losing nothing they acknowledged, and
//! one-line errors that never print a password.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::fleet::fresh_db;
use common::wait_bounded;
use wirerate_core::{synth, RunResult};
use wirerate_testpg::Cluster;

const LIMIT: Duration = Duration::from_secs(60);
const GBIT: f64 = 1e9;

/// The binary with `args`, its output piped, away from the test database.
fn spawn(args: &[&str]) -> Child {
    spawn_with(args, Stdio::piped())
}

/// [`spawn`] with its standard error going to `stderr`.
fn spawn_with(args: &[&str], stderr: Stdio) -> Child {
    common::bare()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

fn wirerate(args: &[&str]) -> Output {
    wait_bounded(spawn(args), LIMIT)
}

fn ok(args: &[&str]) -> String {
    common::ok(&wirerate(args), &format!("{args:?}"))
}

fn write_jsonl(path: &Path, runs: &[RunResult]) {
    let text: String = runs
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect();
    std::fs::write(path, text).unwrap();
}

/// JSON without the members that say when a run was stored (the one thing two databases
/// filled one after the other cannot share).
fn without_store_times(mut v: serde_json::Value) -> serde_json::Value {
    match &mut v {
        serde_json::Value::Object(m) => {
            m.remove("stored_unix_s");
            for x in m.values_mut() {
                *x = without_store_times(x.take());
            }
        }
        serde_json::Value::Array(a) => {
            for x in a.iter_mut() {
                *x = without_store_times(x.take());
            }
        }
        _ => {}
    }
    v
}

/// Fails on the first line where two texts differ (whole documents are too long to print).
fn same_text(a: &str, b: &str, what: &[&str]) {
    for (n, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        assert_eq!(x, y, "{what:?}: line {} differs", n + 1);
    }
    assert_eq!(
        a.lines().count(),
        b.lines().count(),
        "{what:?}: lengths differ"
    );
}

fn same(a: &serde_json::Value, b: &serde_json::Value, what: &str) {
    let pretty = |v| serde_json::to_string_pretty(v).unwrap();
    same_text(&pretty(a), &pretty(b), &[what]);
}

/// Two labelled sets and some runs between other hosts, as files to import.
fn sample_files(dir: &Path) -> Vec<(String, std::path::PathBuf)> {
    let old = synth::sample(0, 8, 100.0 * GBIT, 5.0 * GBIT, 1);
    let mut new = synth::sample(100, 8, 80.0 * GBIT, 5.0 * GBIT, 2);
    for r in &mut new {
        r.env.client.kernel = Some("6.9.0-test".into());
    }
    let mut other = synth::sample(200, 6, 40.0 * GBIT, 2.0 * GBIT, 3);
    for (i, r) in other.iter_mut().enumerate() {
        r.env.client.hostname = Some(if i % 2 == 0 { "gamma" } else { "delta" }.into());
    }
    let mut files = Vec::new();
    for (label, runs) in [("old", old), ("new", new), ("plan:other", other)] {
        let p = dir.join(format!("{}.jsonl", label.replace(':', "_")));
        write_jsonl(&p, &runs);
        files.push((label.to_string(), p));
    }
    files
}

#[test]
fn sqlite_and_postgres_give_the_same_answers() {
    let Some(url) = fresh_db("parity") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("r.db");
    let sqlite = sqlite.to_str().unwrap();
    for (label, file) in sample_files(dir.path()) {
        ok(&[
            "import",
            "--label",
            &label,
            "--db",
            sqlite,
            file.to_str().unwrap(),
        ]);
    }
    // the SQLite history moves to PostgreSQL whole: labels, groups and order
    let export = dir.path().join("all.json");
    std::fs::write(&export, ok(&["history", "--json", "--db", sqlite])).unwrap();
    let export = export.to_str().unwrap();
    ok(&["import", "--db", &url, export]);
    // a second import adds nothing on either
    let (_, again) = &sample_files(dir.path())[0];
    for db in [sqlite, &url] {
        ok(&["import", "--db", db, again.to_str().unwrap()]);
    }
    ok(&["import", "--db", &url, export]);
    let json = |args: &[&str], db: &str| -> serde_json::Value {
        let mut a = args.to_vec();
        a.extend(["--db", db]);
        let out = ok(&a);
        without_store_times(
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{a:?}: {e}: {out}")),
        )
    };
    let history = json(&["history", "--json"], sqlite);
    assert_eq!(history.as_array().unwrap().len(), 22);
    same(
        &history,
        &json(&["history", "--json"], &url),
        "history --json",
    );
    for args in [
        &["history", "--json", "--label", "new"][..],
        &["history", "--json", "--limit", "3"],
        &["show", "5", "--json"],
        &["show", "17", "--json"],
        &["compare", "old", "new", "--json"],
        &["compare", "id:3", "plan:other", "--json"],
        &["compare", "--matrix", "--json"],
        &["compare", "--matrix", "--period", "20m", "--json"],
        &[
            "compare", "--matrix", "--since", "15m", "--period", "5m", "--json",
        ],
        &["compare", "--matrix", "--label", "plan:other", "--json"],
    ] {
        same(&json(args, sqlite), &json(args, &url), &format!("{args:?}"));
    }
    // the text forms too (history's and show's times are the runs' own start times)
    for args in [
        &["history"][..],
        &["history", "--csv"],
        &["show", "9"],
        &["compare", "old", "new"],
        &["compare", "--matrix", "--period", "20m"],
        &["report", "old", "new", "id:20", "-o", "-"],
        &["report", "--matrix", "--period", "20m", "-o", "-"],
    ] {
        let mut a = args.to_vec();
        a.extend(["--db", sqlite]);
        let from_sqlite = ok(&a);
        let n = a.len();
        a[n - 1] = &url;
        let from_pg = ok(&a);
        if args[0] == "history" && args.len() == 2 {
            // CSV carries stored_unix_s: compare all but that column
            let strip = |s: &str| -> Vec<String> {
                let header: Vec<&str> = s.lines().next().unwrap().split(',').collect();
                let col = header.iter().position(|h| *h == "stored_unix_s");
                s.lines()
                    .map(|l| {
                        let mut f: Vec<&str> = l.split(',').collect();
                        if let Some(c) = col {
                            f.remove(c);
                        }
                        f.join(",")
                    })
                    .collect()
            };
            same_text(
                &strip(&from_sqlite).join("\n"),
                &strip(&from_pg).join("\n"),
                args,
            );
        } else {
            same_text(&from_sqlite, &from_pg, args);
        }
        assert!(!from_sqlite.is_empty());
    }
}

/// The id in an `import --ids` line (`ID new` or `ID stored`).
fn ack(line: &str) -> Option<i64> {
    match line.split_once(' ') {
        Some((id, "new" | "stored")) => id.parse().ok(),
        _ => None,
    }
}

#[test]
fn the_matrix_shows_each_host_pair_and_its_change() {
    let Some(url) = fresh_db("matrix") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (label, file) in sample_files(dir.path()) {
        ok(&[
            "import",
            "--label",
            &label,
            "--db",
            &url,
            file.to_str().unwrap(),
        ]);
    }
    // old (alpha→beta, ~100 Gbit/s) ran 0-77 s, new (alpha→beta, ~80) 1100-1177 s, the plan
    // (gamma→beta and delta→beta, ~40) 2200-2255 s: 20-minute periods ending at 2255 s put
    // new against old, and the plan's pairs in the latest period only
    let doc: serde_json::Value = serde_json::from_str(&ok(&[
        "compare", "--matrix", "--period", "20m", "--json", "--db", &url,
    ]))
    .unwrap();
    let m = &doc["matrix"];
    assert_eq!(doc["runs"], 22);
    assert_eq!(m["clients"], serde_json::json!(["alpha", "delta", "gamma"]));
    assert_eq!(m["servers"], serde_json::json!(["beta"]));
    let cell = |c: &str| -> &serde_json::Value {
        m["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["client_host"] == c)
            .unwrap()
    };
    let ab = cell("alpha");
    assert_eq!(ab["current"]["n"], 8);
    assert_eq!(ab["previous"]["n"], 8);
    let pct = ab["change_percent"].as_f64().unwrap();
    assert!((-25.0..-15.0).contains(&pct), "{pct}");
    assert_eq!(ab["change"], "lower");
    assert_eq!(ab["latest_unix_s"], 1_700_000_000.0 + 107.0 * 11.0);
    for c in ["gamma", "delta"] {
        assert_eq!(cell(c)["current"]["n"], 3);
        assert!(cell(c)["previous"].is_null());
    }
    // a label keeps the plan's runs only
    let plan: serde_json::Value = serde_json::from_str(&ok(&[
        "compare",
        "--matrix",
        "--label",
        "plan:other",
        "--json",
        "--db",
        &url,
    ]))
    .unwrap();
    assert_eq!(plan["runs"], 6);
    assert_eq!(
        plan["matrix"]["clients"],
        serde_json::json!(["delta", "gamma"])
    );
    let text = ok(&["compare", "--matrix", "--period", "20m", "--db", &url]);
    let alpha = text.lines().find(|l| l.starts_with("alpha")).unwrap();
    assert!(alpha.contains("Gbit/s") && alpha.contains(" %*"), "{text}");
    let html = ok(&[
        "report", "--matrix", "--period", "20m", "-o", "-", "--db", &url,
    ]);
    assert!(html.contains("<h2>Host pairs</h2>"), "no matrix section");
    assert!(html.contains("alpha → beta"));
    // bad spans are usage errors
    let o = wirerate(&["compare", "--matrix", "--period", "0", "--db", &url]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn writers_killed_mid_import_lose_nothing_they_acknowledged() {
    let Some(cluster) = Cluster::shared("concurrent") else {
        return;
    };
    let url = cluster.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    // six writers of 60 runs each; neighbours share 20 runs, so the same run is stored by
    // two processes at once. The odd writers, killed early, start with runs only they have.
    let writers = 6u64;
    let per = 60u64;
    let mut files = Vec::new();
    for w in 0..writers {
        let first = w * 40;
        let mut runs: Vec<RunResult> = (first..first + per)
            .map(|n| synth::run(n, 1e9 + n as f64, 20))
            .collect();
        if w % 2 == 1 {
            runs.rotate_left(20);
        }
        let p = dir.path().join(format!("w{w}.jsonl"));
        write_jsonl(&p, &runs);
        files.push(p);
    }
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            spawn_with(
                &["import", "--ids", "--db", &url, f.to_str().unwrap()],
                Stdio::null(),
            )
        })
        .collect();
    // odd writers are killed after a few acknowledgements; even ones run to the end
    let mut acked: Vec<i64> = Vec::new();
    let mut killed = 0;
    let handles: Vec<_> = children
        .into_iter()
        .enumerate()
        .map(|(w, mut child)| {
            std::thread::spawn(move || {
                let out = child.stdout.take().unwrap();
                let mut ids = Vec::new();
                let mut lines = BufReader::new(out).lines();
                let deadline = Instant::now() + LIMIT;
                let kill_at = if w % 2 == 1 { 5 + w * 3 } else { usize::MAX };
                for line in lines.by_ref() {
                    let Some(id) = ack(&line.unwrap()) else {
                        continue;
                    };
                    ids.push(id);
                    if ids.len() >= kill_at || Instant::now() > deadline {
                        break;
                    }
                }
                let was_killed = kill_at != usize::MAX;
                if was_killed {
                    child.kill().unwrap();
                }
                // what was in the pipe when it died was acknowledged too
                ids.extend(lines.map_while(Result::ok).filter_map(|l| ack(&l)));
                let status = child.wait().unwrap();
                if !was_killed {
                    assert!(status.success(), "writer {w}: {status}");
                }
                (ids, was_killed)
            })
        })
        .collect();
    for h in handles {
        let (ids, was_killed) = h.join().unwrap();
        acked.extend(ids);
        killed += usize::from(was_killed);
    }
    assert_eq!(killed, 3);
    acked.sort();
    acked.dedup();
    let dbname = url.split('?').next().unwrap().rsplit('/').next().unwrap();
    let mut c = cluster.client(dbname).unwrap();
    let rows = c
        .query("SELECT id, run_key, result_json FROM runs ORDER BY id", &[])
        .unwrap();
    let stored: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    for id in &acked {
        assert!(stored.contains(id), "acknowledged run {id} is missing");
    }
    // no run twice: every key once, and every stored document whole
    let mut keys: Vec<String> = rows.iter().map(|r| r.get(1)).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), rows.len());
    for r in &rows {
        let doc: RunResult = serde_json::from_str(r.get(2)).unwrap();
        assert_eq!(doc.intervals.len(), 20);
    }
    // the writers that finished stored all of their runs
    let starts: Vec<f64> = rows
        .iter()
        .map(|r| {
            serde_json::from_str::<RunResult>(r.get(2))
                .unwrap()
                .started_unix_s
        })
        .collect();
    for w in (0..writers).step_by(2) {
        for n in w * 40..w * 40 + per {
            let t = synth::run(n, 1e9, 1).started_unix_s;
            assert!(starts.contains(&t), "run {n} of writer {w} is missing");
        }
    }
    // and the killed ones' own runs are there as far as they acknowledged them
    assert!(rows.len() > 180, "{}", rows.len());
    eprintln!(
        "{} acknowledged ids, {} rows, {killed} writers killed",
        acked.len(),
        rows.len()
    );
}

#[test]
fn runs_from_several_clients_at_once_are_all_stored() {
    let Some(url) = fresh_db("run_concurrent") else {
        return;
    };
    let server = common::ServerProc::start(&[]);
    let port = server.port.to_string();
    let children: Vec<_> = (0..4)
        .map(|_| {
            spawn(&[
                "run",
                "127.0.0.1",
                "-p",
                &port,
                "-n",
                "1M",
                "--label",
                "many",
                "--json",
                "--db",
                &url,
            ])
        })
        .collect();
    let mut done = 0;
    for c in children {
        let out = wait_bounded(c, LIMIT);
        if out.status.success() {
            done += 1;
        } else {
            // a busy server may refuse a client: that run is simply not stored
            eprintln!("a client failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    assert!(done >= 1);
    let rows: serde_json::Value =
        serde_json::from_str(&ok(&["history", "--json", "--label", "many", "--db", &url])).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), done);
    drop(server);
}

#[test]
fn bad_urls_and_unreachable_servers_are_one_line_errors_without_the_password() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("r.jsonl");
    write_jsonl(&f, &[synth::run(1, 1e9, 1)]);
    let f = f.to_str().unwrap();
    let unreachable = format!("postgres://me:s3cretpw@127.0.0.1:{port}/results");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["history", "--db", &unreachable], "cannot connect"),
        (vec!["import", "--db", &unreachable, f], "cannot connect"),
        (
            vec!["run", "-n", "1M", "--db", &unreachable],
            "cannot connect",
        ),
        (
            vec!["history", "--db", "postgres://me:s3cretpw@h:port/x"],
            "bad PostgreSQL URL",
        ),
    ];
    for (args, want) in &cases {
        let o = wirerate(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(err.contains("me:***@"), "{args:?}: {err}");
        assert!(!err.contains("s3cretpw"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    let Some(cluster) = Cluster::shared("auth") else {
        return;
    };
    let wrong = cluster.tcp_url("postgres", "s3cretpw");
    let o = wirerate(&["history", "--db", &wrong]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(!err.contains("s3cretpw"), "{err}");
    // WIRERATE_DB with a URL works like --db
    let url = cluster.fresh_database();
    let o = Command::new(common::bin())
        .args(["import", f])
        .env("WIRERATE_DB", &url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed = ok(&["history", "--json", "--db", &url]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&listed)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_reader_role_reads_and_a_newer_layout_is_refused() {
    let Some(cluster) = Cluster::shared("roles") else {
        return;
    };
    let url = cluster.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("r.jsonl");
    write_jsonl(&f, &[synth::run(1, 1e9, 1), synth::run(2, 2e9, 1)]);
    let f = f.to_str().unwrap();
    // a reading command on a database nobody wrote yet creates nothing
    let o = wirerate(&["history", "--db", &url]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("holds no runs yet"), "{err}");
    ok(&["import", "--label", "x", "--db", &url, f]);
    // a role that may only read: history and compare work, storing is refused in one line
    let db = Cluster::database_of(&url);
    let mut admin = cluster.client(db).unwrap();
    admin
        .batch_execute("CREATE ROLE reader LOGIN; GRANT SELECT ON runs, wirerate_schema TO reader")
        .unwrap();
    let as_reader = url.replace("user=postgres", "user=reader");
    assert!(ok(&["history", "--db", &as_reader]).contains("alpha"));
    ok(&["compare", "id:1", "id:2", "--db", &as_reader]);
    let g = dir.path().join("g.jsonl");
    write_jsonl(&g, &[synth::run(3, 1e9, 1)]);
    let o = wirerate(&["import", "--db", &as_reader, g.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("permission denied"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // a layout from a newer wirerate is refused by readers and writers alike
    admin
        .batch_execute(
            "INSERT INTO wirerate_schema (version, applied_unix_s, tool_version) \
             VALUES (7, 0, 'future')",
        )
        .unwrap();
    for args in [
        vec!["history", "--db", &url],
        vec!["import", "--db", &url, f],
        vec!["run", "-n", "1M", "--db", &url],
    ] {
        let o = wirerate(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("has layout version 7"), "{args:?}: {err}");
    }
    let runs: i64 = admin
        .query_one("SELECT count(*) FROM runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(runs, 2);
}

#[test]
fn a_repeat_set_is_stored_under_one_group() {
    let Some(url) = fresh_db("repeat") else {
        return;
    };
    let o = wirerate(&[
        "run", "-n", "1M", "--repeat", "3", "--label", "rep", "--json", "--db", &url,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: serde_json::Value =
        serde_json::from_str(&ok(&["history", "--json", "--label", "rep", "--db", &url])).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let group = rows[0]["group"].as_str().unwrap();
    assert!(rows.iter().all(|r| r["group"] == group));
    let by_group: serde_json::Value =
        serde_json::from_str(&ok(&["history", "--json", "--group", group, "--db", &url])).unwrap();
    assert_eq!(by_group.as_array().unwrap().len(), 3);
    // what run printed is what was stored, document for document
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for (p, r) in printed.as_array().unwrap().iter().zip(rows) {
        assert_eq!(p, &r["result"]);
    }
}

#[test]
fn tls_to_postgres_checks_the_servers_certificate() {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca = |name: &str| {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        (cert, key)
    };
    let (ca_cert, ca_key) = ca("wirerate test PostgreSQL CA");
    let (other_ca, _) = ca("some other CA");
    // the server's certificate names the address the clients use
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca_cert, &ca_key)
        .unwrap();
    let test = "tls_to_postgres_checks_the_servers_certificate";
    let Some(cluster) =
        Cluster::start_with_tls_or_skip(test, &server.pem(), &server_key.serialize_pem())
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (ca_file, other_file) = (dir.path().join("ca.pem"), dir.path().join("other.pem"));
    std::fs::write(&ca_file, ca_cert.pem()).unwrap();
    std::fs::write(&other_file, other_ca.pem()).unwrap();
    let f = dir.path().join("r.jsonl");
    write_jsonl(&f, &[synth::run(1, 1e9, 1)]);
    let f = f.to_str().unwrap();
    let db = Cluster::database_of(&cluster.fresh_database()).to_string();
    let plain = cluster.tcp_url(&db, cluster.password());
    let with = |extra: &str| format!("{plain}?{extra}");
    let fails = |url: &str, want: &str| {
        let o = wirerate(&["history", "--db", url]);
        let err = String::from_utf8_lossy(&o.stderr);
        println!("{err}");
        assert_eq!(o.status.code(), Some(1), "{url}: {err}");
        assert!(err.contains(want), "{url}: {err}");
        assert!(!err.contains(cluster.password()), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    };
    // the server takes TCP clients over TLS only
    fails(&plain, "cannot connect");
    fails(&with("sslmode=require"), "sslrootcert=FILE");
    fails(
        &with(&format!(
            "sslmode=require&sslrootcert={}",
            other_file.display()
        )),
        "certificate",
    );
    fails(
        &with("sslmode=require&sslrootcert=/nonexistent/ca.pem"),
        "/nonexistent/ca.pem",
    );
    let url = with(&format!(
        "sslmode=require&sslrootcert={}",
        ca_file.display()
    ));
    ok(&["import", "--db", &url, f]);
    let listed: serde_json::Value =
        serde_json::from_str(&ok(&["history", "--json", "--db", &url])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    // as libpq does, PGSSLROOTCERT names the CA when the URL does not
    let o = Command::new(common::bin())
        .args(["history", "--json", "--db", &with("sslmode=require")])
        .env("PGSSLROOTCERT", &ca_file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_password_file_supplies_the_password_a_url_leaves_out() {
    use std::os::unix::fs::PermissionsExt;
    let Some(cluster) = Cluster::shared("a_password_file_supplies_the_password_a_url_leaves_out")
    else {
        return;
    };
    let db = Cluster::database_of(&cluster.fresh_database()).to_string();
    let url = cluster
        .tcp_url(&db, cluster.password())
        .replace(&format!(":{}@", cluster.password()), "@");
    assert!(!url.contains(cluster.password()));
    let dir = tempfile::tempdir().unwrap();
    let pgpass = dir.path().join("pgpass");
    std::fs::write(
        &pgpass,
        format!(
            "# host:port:database:user:password\n127.0.0.1:{}:{db}:*:{}\n",
            cluster.port(),
            cluster.password()
        ),
    )
    .unwrap();
    let f = dir.path().join("r.jsonl");
    write_jsonl(&f, &[synth::run(1, 1e9, 1)]);
    let history = |mode: u32| {
        std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(mode)).unwrap();
        Command::new(common::bin())
            .args(["import", "--db", &url, f.to_str().unwrap()])
            .env("PGPASSFILE", &pgpass)
            .output()
            .unwrap()
    };
    let o = history(0o600);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // as libpq does, a file others may read is not read, and says so
    let o = history(0o644);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("group or world access"), "{err}");
    assert!(!err.contains(cluster.password()), "{err}");
}

/// The binary with `args` and its data directory (so its spool) in `data`.
fn with_data(args: &[&str], data: &Path) -> Child {
    Command::new(common::bin())
        .args(args)
        .env_remove("WIRERATE_DB")
        .env("XDG_DATA_HOME", data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn spooled(data: &Path) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(data.join("wirerate").join("spool")) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// A run against an embedded server, storing to `url`, whose database goes down while it
/// runs: the run fails, saying where its result waits.
fn run_through_an_outage(cluster: &mut Cluster, url: &str, data: &Path) -> String {
    let mut child = with_data(&["run", "-t", "2", "--label", "outage", "--db", url], data);
    // the header is printed once the database is open
    let mut first = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut first).unwrap();
    assert!(!first.is_empty(), "the run printed nothing");
    // the rest of its report is read, so it never meets a closed pipe
    let rest = std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    cluster.pause();
    let o = wait_bounded(child, LIMIT);
    let _ = rest.join();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    cluster.resume().unwrap();
    err
}

#[test]
fn a_run_that_ends_while_postgres_is_down_waits_in_the_spool_until_stored() {
    let test = "a_run_that_ends_while_postgres_is_down_waits_in_the_spool_until_stored";
    let Some(mut cluster) = Cluster::start_or_skip(test) else {
        return;
    };
    let url = cluster.fresh_database();
    let data = tempfile::tempdir().unwrap();
    let spool = data.path().join("wirerate").join("spool");

    // stored by the next run that stores there
    let err = run_through_an_outage(&mut cluster, &url, data.path());
    assert!(err.contains("result not stored yet"), "{err}");
    assert!(
        err.contains(&format!("waits in {}", spool.display())),
        "{err}"
    );
    assert!(err.contains("wirerate history flush"), "{err}");
    let waiting = spooled(data.path());
    assert_eq!(waiting.len(), 1, "{err}");
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&waiting[0]).unwrap()).unwrap();
    let o = wait_bounded(
        with_data(&["run", "-n", "1M", "--db", &url], data.path()),
        LIMIT,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("stored 1 run that waited in"), "{err}");
    assert!(spooled(data.path()).is_empty());
    let listed: serde_json::Value = serde_json::from_str(&ok(&[
        "history", "--json", "--label", "outage", "--db", &url,
    ]))
    .unwrap();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["result"], kept["result"]);

    // stored by `history flush`, once only however often it is flushed
    run_through_an_outage(&mut cluster, &url, data.path());
    let waiting = spooled(data.path());
    assert_eq!(waiting.len(), 1);
    let copy = std::fs::read(&waiting[0]).unwrap();
    let flush = |want: &str| {
        let o = wait_bounded(
            with_data(&["history", "flush", "--db", &url], data.path()),
            LIMIT,
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(out.starts_with(want), "{out}");
    };
    flush("stored 1 run that waited in");
    assert!(spooled(data.path()).is_empty());
    std::fs::write(&waiting[0], &copy).unwrap();
    flush("stored 1 run that waited in");
    flush("stored 0 runs that waited in");
    let listed: serde_json::Value = serde_json::from_str(&ok(&[
        "history", "--json", "--label", "outage", "--db", &url,
    ]))
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    // a database that stays down: the flush fails in one line
    cluster.pause();
    let o = wait_bounded(
        with_data(&["history", "flush", "--db", &url], data.path()),
        LIMIT,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot connect"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn a_sqlite_history_migrates_to_postgres_in_batches_and_exports_the_same() {
    let Some(url) = fresh_db("a_sqlite_history_migrates_to_postgres_in_batches") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("r.db");
    // more runs than one batch (500) and than two pages (256)
    let runs = synth::sample(0, 600, 10.0 * GBIT, GBIT, 5);
    let labels: Vec<String> = (0..runs.len()).map(|i| format!("set{}", i / 7)).collect();
    let batch: Vec<wirerate_store::ToStore<'_>> = runs
        .iter()
        .zip(&labels)
        .map(|(r, l)| wirerate_store::ToStore {
            result: r,
            label: Some(l),
            group: Some(l),
        })
        .collect();
    wirerate_store::Store::open(&sqlite)
        .unwrap()
        .store_runs(&batch)
        .unwrap();
    let sqlite = sqlite.to_str().unwrap();
    let out = ok(&["history", "migrate", "--db", sqlite, "--to", &url]);
    assert!(out.starts_with("copied 600 runs from "), "{out}");
    let out = ok(&["history", "migrate", "--db", sqlite, "--to", &url]);
    assert!(out.contains("(600 already there)"), "{out}");
    let export = |db: &str| -> Vec<serde_json::Value> {
        ok(&["history", "--ndjson", "--db", db])
            .lines()
            .map(|l| without_store_times(serde_json::from_str(l).unwrap()))
            .collect()
    };
    let (a, b) = (export(sqlite), export(&url));
    assert_eq!(a.len(), 600);
    for (x, y) in a.iter().zip(&b) {
        same(x, y, "a migrated run");
    }
    assert_eq!(a.len(), b.len());
    let newest = ok(&[
        "history", "--ndjson", "--limit", "3", "--label", "set85", "--db", &url,
    ]);
    let ids: Vec<i64> = newest
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, vec![598, 599, 600]);
}
