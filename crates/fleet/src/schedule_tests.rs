use super::*;

#[test]
fn durations_are_iso_8601() {
    for (s, want) in [
        ("PT4H", 14_400.0),
        ("PT10M", 600.0),
        ("PT1S", 1.0),
        ("PT1.5S", 1.5),
        ("PT0,5S", 0.5),
        ("PT0S", 0.0),
        ("P1D", 86_400.0),
        ("P1W", 604_800.0),
        ("P1DT12H", 129_600.0),
        ("PT1H30M", 5400.0),
        ("pt2m", 120.0),
        (" PT90S ", 90.0),
    ] {
        assert_eq!(parse_duration(s).unwrap(), want, "{s}");
    }
    for (s, why) in [
        ("", "starts with P"),
        ("4H", "starts with P"),
        ("P", "no parts"),
        ("PT", "followed by"),
        ("P1M", "years and months"),
        ("P1Y", "years and months"),
        ("PT1M1H", "order"),
        ("PT1H1H", "order"),
        ("P1H", "order"),
        ("PT-1S", "number"),
        ("PT+1S", "number"),
        ("PT1e3S", "order"),
        ("PT.S", "number"),
        ("PTxS", "order"),
        ("PT5", "without its unit"),
        ("P400D", "longer than a year"),
    ] {
        let e = parse_duration(s).unwrap_err().to_string();
        assert!(e.contains(why), "{s}: {e}");
    }
}

#[test]
fn repeating_intervals_may_count() {
    assert_eq!(parse_repeat("R/PT4H").unwrap(), (None, 14_400.0));
    assert_eq!(parse_repeat("R6/PT4H").unwrap(), (Some(6), 14_400.0));
    assert_eq!(parse_repeat("PT1S").unwrap(), (None, 1.0));
    for bad in ["R0/PT1H", "R/PT0S", "Rx/PT1H", "R5", "R/", "R-1/PT1H"] {
        assert!(parse_repeat(bad).is_err(), "{bad}");
    }
}

#[test]
fn instants_are_rfc_3339() {
    // 2026-11-26T00:00:00Z is day 20_783 (date -u -d 2026-11-26 +%s)
    let day = 20_783.0 * 86_400.0;
    assert_eq!(parse_instant("2026-11-26T00:00:00Z").unwrap(), day);
    assert_eq!(parse_instant("2026-11-26T18:30Z").unwrap(), day + 66_600.0);
    assert_eq!(
        parse_instant("2026-11-26T19:30:00+01:00").unwrap(),
        day + 66_600.0
    );
    assert_eq!(
        parse_instant("2026-11-26T17:00:00.5-01:30").unwrap(),
        day + 66_600.5
    );
    assert_eq!(parse_instant("1970-01-01T00:00:00Z").unwrap(), 0.0);
    assert_eq!(
        parse_instant("2024-02-29T00:00:00Z").unwrap(),
        19_782.0 * 86_400.0
    );
    for bad in [
        "2026-11-26",
        "2026-11-26T25:00:00Z",
        "2026-13-01T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "2026-11-26T10:00:00",
        "26-11-2026T10:00Z",
        "2026-11-26T10:00:00+0100",
        "2026-1a-26T10:00:00Z",
    ] {
        assert!(parse_instant(bad).is_err(), "{bad}");
    }
}

#[test]
fn rounds_stay_on_their_grid_and_skip_what_they_missed() {
    let s = Schedule::new(60.0, 10.0, Some(3), None).unwrap();
    assert_eq!(s.start_of(1000.0, 0, 0.0), 1000.0);
    assert_eq!(s.start_of(1000.0, 2, 0.5), 1125.0);
    // on time: the next round
    assert_eq!(s.next_round(1000.0, None, 1000.0), Some(0));
    assert_eq!(s.next_round(1000.0, Some(0), 1030.0), Some(1));
    // round 1 ran until 1190: slot 2 (1120..1180) was missed, slot 3 is open
    assert_eq!(s.next_round(1000.0, Some(1), 1190.0), Some(3));
    assert!(s.more(2) && !s.more(3));
    let until = Schedule::new(60.0, 0.0, None, Some(1100.0)).unwrap();
    assert_eq!(until.next_round(1000.0, Some(0), 1010.0), Some(1));
    assert_eq!(until.next_round(1000.0, Some(1), 1070.0), None);
    assert!(until.more(1_000_000));
    for (every, slip, count) in [
        (0.0, 0.0, None),
        (60.0, 60.0, None),
        (60.0, -1.0, None),
        (f64::NAN, 0.0, None),
        (60.0, 0.0, Some(0)),
    ] {
        assert!(Schedule::new(every, slip, count, None).is_err());
    }
}
