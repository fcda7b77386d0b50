use super::*;
use crate::store::testing;
use chrono::TimeZone;

/// When the API server received each test request: the same for every
/// stage of one, as the API server's own events say.
fn received() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 7, 9, 0, 0).unwrap()
}

fn event(id: &str, stage: &str) -> ApiserverEvent {
    ApiserverEvent {
        audit_id: id.into(),
        stage: stage.into(),
        cluster: "prod".into(),
        user: "system:serviceaccount:portcullis:portcullis".into(),
        source_ips: vec!["10.0.0.1".into()],
        received_at: received(),
        stage_at: Utc::now(),
        ..ApiserverEvent::default()
    }
}

#[test]
fn a_stage_delivered_twice_is_kept_once() {
    for store in testing::both() {
        let b = store.backend;
        let batch = [event("a", "RequestReceived"), event("a", "ResponseComplete")];
        assert_eq!(store.store_apiserver_events(&batch).unwrap(), 2, "{b}");
        assert_eq!(
            store.store_apiserver_events(&batch).unwrap(),
            0,
            "{b}: the same batch again"
        );
        let kept = store.apiserver_events("a").unwrap();
        assert_eq!(kept.len(), 2, "{b}");
        assert_eq!(kept[0].source_ips, ["10.0.0.1"], "{b}");
        assert_eq!(kept[0].user, "system:serviceaccount:portcullis:portcullis", "{b}");
    }
}

#[test]
fn a_forwarded_record_is_what_portcullis_sent() {
    for store in testing::both() {
        let b = store.backend;
        assert_eq!(store.portcullis_sent("b", "prod").unwrap().0, Sent::No, "{b}");
        store.record_forwarded("b", "prod", "system", Utc::now()).unwrap();
        assert_eq!(
            store.portcullis_sent("b", "prod").unwrap().0,
            Sent::As(String::new()),
            "{b}"
        );
        store.record_forwarded("c", "prod", "request", Utc::now()).unwrap();
        assert_eq!(store.portcullis_sent("c", "prod").unwrap().0, Sent::Unknown, "{b}");
        let intent = r#"{"id":"c","cluster":"prod","principal_kind":"bot","login":"deployer"}"#;
        store
            .with(|c| {
                Ok(c.execute(
                    "INSERT INTO audit_intents (id, \"row\") VALUES ('c', ?1)",
                    params![intent],
                )?)
            })
            .unwrap();
        assert_eq!(
            store.portcullis_sent("c", "prod").unwrap().0,
            Sent::As("bot:deployer".into()),
            "{b}"
        );
        assert_eq!(
            store.portcullis_sent("c", "test").unwrap().0,
            Sent::No,
            "{b}: an intent for another cluster"
        );
        store.store_apiserver_events(&[event("b", "ResponseComplete")]).unwrap();
        assert_eq!(store.apiserver_request_checked(&event("b", "")).unwrap(), None, "{b}");
        store.mark_apiserver_request(&event("b", ""), Checked::Matched).unwrap();
        assert_eq!(
            store.apiserver_request_checked(&event("b", "")).unwrap(),
            Some(Checked::Matched),
            "{b}"
        );
        let later = Utc::now() + chrono::TimeDelta::seconds(1);
        assert!(store.unchecked_apiserver_events(later, 10).unwrap().is_empty(), "{b}");
        assert_eq!(store.sweep_apiserver_audit(later).unwrap(), 3, "{b}");
    }
}

#[test]
fn unchecked_events_are_listed_oldest_first_and_an_alert_outranks_a_match() {
    for store in testing::both() {
        let b = store.backend;
        store.store_apiserver_events(&[event("x", "RequestReceived")]).unwrap();
        store.store_apiserver_events(&[event("y", "RequestReceived")]).unwrap();
        let later = Utc::now() + chrono::TimeDelta::seconds(1);
        let ids = |limit| {
            let events = store.unchecked_apiserver_events(later, limit).unwrap();
            events.into_iter().map(|e| e.audit_id).collect::<Vec<_>>()
        };
        assert_eq!(ids(10), ["x", "y"], "{b}");
        assert_eq!(ids(1), ["x"], "{b}");
        store.mark_apiserver_request(&event("x", ""), Checked::Matched).unwrap();
        store.store_apiserver_events(&[event("x", "ResponseComplete")]).unwrap();
        store.mark_apiserver_request(&event("x", ""), Checked::Alert).unwrap();
        assert_eq!(
            store.apiserver_request_checked(&event("x", "")).unwrap(),
            Some(Checked::Alert),
            "{b}"
        );
        assert_eq!(ids(10), ["y"], "{b}");
    }
}

#[test]
fn coverage_counts_each_side_and_what_the_other_lacks() {
    for store in testing::both() {
        let b = store.backend;
        let before = Utc::now() - chrono::TimeDelta::seconds(10);
        for (id, kind) in [("both", "request"), ("lost", "request"), ("own", "system")] {
            store.record_forwarded(id, "prod", kind, before).unwrap();
        }
        store.record_forwarded("elsewhere", "test", "request", before).unwrap();
        let batch = [
            event("both", "RequestReceived"),
            event("both", "ResponseComplete"),
            event("leaked", "ResponseComplete"),
            event("new", "ResponseComplete"),
        ];
        store.store_apiserver_events(&batch).unwrap();
        store
            .mark_apiserver_request(&event("both", ""), Checked::Matched)
            .unwrap();
        store
            .mark_apiserver_request(&event("leaked", ""), Checked::Alert)
            .unwrap();
        let since = before - chrono::TimeDelta::seconds(1);
        let coverage = store.apiserver_coverage("prod", since, Utc::now()).unwrap();
        let expected = Coverage {
            apiserver_requests: 3,
            matched: 1,
            alerts: 1,
            unchecked: 1,
            portcullis_requests: 3,
            missing: 2,
            missing_own: 1,
        };
        assert_eq!(coverage, expected, "{b}");
        let within_grace = store.apiserver_coverage("prod", since, before).unwrap();
        assert_eq!((within_grace.portcullis_requests, within_grace.missing), (0, 0), "{b}");
    }
}
