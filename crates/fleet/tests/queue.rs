//! The work queue against a real (throwaway) PostgreSQL: claims, host slots, leases and
//! their takeover, two controllers joining one plan run. Skipped, with the reason, where no
//! PostgreSQL server binaries are installed.

use std::time::Duration;

use wirerate_fleet::queue::{self, Finish};
use wirerate_fleet::Plan;
use wirerate_testpg::Cluster;

const PLAN: &str = r#"
name = "q4"
[hosts]
a = "127.0.0.1:1"
b = "127.0.0.2:1"
c = "127.0.0.3:1"
d = "127.0.0.4:1"
[test]
seconds = 1
"#;

fn client(test: &str) -> Option<postgres::Client> {
    let cluster = Cluster::shared(test)?;
    let url = cluster.fresh_database();
    let mut c = wirerate_store::pg::connect(&url).expect("connect");
    queue::ensure_schema(&mut c).expect("schema");
    Some(c)
}

#[test]
fn a_host_is_in_one_test_at_a_time() {
    let Some(mut c) = client("a_host_is_in_one_test_at_a_time") else {
        return;
    };
    let plan = Plan::parse(PLAN).unwrap();
    let (epoch, queued) = queue::enqueue(&mut c, &plan, 0.0).unwrap();
    assert!(queued);
    let first = queue::claim(&mut c, "q4", epoch, "x", 60.0)
        .unwrap()
        .unwrap();
    let second = queue::claim(&mut c, "q4", epoch, "y", 60.0)
        .unwrap()
        .unwrap();
    // the two running tests share no host
    let hosts = [&first.src, &first.dst];
    assert!(!hosts.contains(&&second.src) && !hosts.contains(&&second.dst));
    // with four hosts, a third test has no free pair
    assert!(queue::claim(&mut c, "q4", epoch, "z", 60.0)
        .unwrap()
        .is_none());
    let done = Finish::Done {
        result_id: 7,
        goodput_bps: 1e6,
    };
    assert!(queue::finish(&mut c, "q4", &first, "x", &done).unwrap());
    let third = queue::claim(&mut c, "q4", epoch, "z", 60.0)
        .unwrap()
        .unwrap();
    assert!(![&second.src, &second.dst].contains(&&third.src));
    let p = queue::progress(&mut c, "q4", epoch).unwrap();
    assert_eq!((p.done, p.running, p.queued), (1, 2, 9));
}

#[test]
fn an_expired_lease_is_taken_over_and_the_old_claim_is_lost() {
    let Some(mut c) = client("an_expired_lease_is_taken_over_and_the_old_claim_is_lost") else {
        return;
    };
    let plan = Plan::parse(PLAN).unwrap();
    let (epoch, _) = queue::enqueue(&mut c, &plan, 0.0).unwrap();
    let crashed = queue::claim(&mut c, "q4", epoch, "gone", 0.2)
        .unwrap()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // the expired claim frees its hosts, and its test is the first due again
    let next = queue::claim(&mut c, "q4", epoch, "alive", 60.0)
        .unwrap()
        .unwrap();
    assert_eq!(next.id, crashed.id);
    assert_eq!(next.attempts, 2);
    // the crashed controller, back too late, cannot record anything
    let late = Finish::Failed("late".into());
    assert!(!queue::finish(&mut c, "q4", &crashed, "gone", &late).unwrap());
    let done = Finish::Done {
        result_id: 1,
        goodput_bps: 1.0,
    };
    assert!(queue::finish(&mut c, "q4", &next, "alive", &done).unwrap());
    let st = queue::status(&mut c, "q4", None).unwrap().unwrap();
    let row = st.tests.iter().find(|t| t.id == next.id).unwrap();
    assert_eq!(row.status, "done");
    assert_eq!(row.claimed_by.as_deref(), Some("alive"));
}

#[test]
fn a_test_whose_lease_keeps_expiring_fails_with_the_reason() {
    let Some(mut c) = client("a_test_whose_lease_keeps_expiring_fails_with_the_reason") else {
        return;
    };
    let plan = Plan::parse(&PLAN.replace(
        "[test]",
        "[matrix]\nkind = \"pairs\"\npairs = [[\"a\", \"b\"]]\n[test]",
    ))
    .unwrap();
    let (epoch, _) = queue::enqueue(&mut c, &plan, 0.0).unwrap();
    for _ in 0..queue::MAX_ATTEMPTS {
        assert!(queue::claim(&mut c, "q4", epoch, "x", 0.05)
            .unwrap()
            .is_some());
        std::thread::sleep(Duration::from_millis(120));
    }
    assert!(queue::claim(&mut c, "q4", epoch, "x", 0.05)
        .unwrap()
        .is_none());
    let st = queue::status(&mut c, "q4", None).unwrap().unwrap();
    assert_eq!(st.progress.failed, 1);
    let e = st.tests[0].error.as_deref().unwrap();
    assert!(e.contains("lease expired 3 times"), "{e}");
}

#[test]
fn busy_tests_are_queued_again_and_a_second_controller_joins_the_run() {
    let Some(mut c) = client("busy_tests_are_queued_again_and_a_second_controller_joins_the_run")
    else {
        return;
    };
    let plan = Plan::parse(PLAN).unwrap();
    let (epoch, queued) = queue::enqueue(&mut c, &plan, 0.0).unwrap();
    assert!(queued);
    // a second controller with the same plan joins; no test is queued twice
    assert_eq!(queue::enqueue(&mut c, &plan, 0.0).unwrap(), (epoch, false));
    assert_eq!(queue::progress(&mut c, "q4", epoch).unwrap().queued, 12);
    // a different file under the same name is refused while the run is open
    let other = Plan::parse(&PLAN.replace("seconds = 1", "seconds = 2")).unwrap();
    let e = queue::enqueue(&mut c, &other, 0.0).unwrap_err().to_string();
    assert!(e.contains("different file"), "{e}");
    let t = queue::claim(&mut c, "q4", epoch, "x", 60.0)
        .unwrap()
        .unwrap();
    let busy = Finish::Busy {
        retry_s: 30.0,
        reason: "busy".into(),
    };
    assert!(queue::finish(&mut c, "q4", &t, "x", &busy).unwrap());
    let st = queue::status(&mut c, "q4", None).unwrap().unwrap();
    let row = st.tests.iter().find(|r| r.id == t.id).unwrap();
    assert_eq!((row.status.as_str(), row.attempts), ("queued", 0));
    assert!(row.due_unix_s > st.started_unix_s + 20.0);
    // once every test has ended, the next `plan run` queues run 2
    c.execute("UPDATE plan_tests SET status = 'done'", &[])
        .unwrap();
    assert_eq!(
        queue::enqueue(&mut c, &plan, 0.0).unwrap(),
        (epoch + 1, true)
    );
}
