//! Native micro-benchmarks of the receiver's hot path: signature verification (one secret,
//! and a rotation header checked against two secrets) and envelope parsing, for 1 KB and 16 KB
//! bodies. `npm run bench` runs them; `cargo bench -p paymos-core` alone too.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use paymos_core::{parse_envelope, signature_header, verify, Secret, SecretSet};

const NOW: i64 = 1_764_450_000;

fn body_of_size(size: usize) -> Vec<u8> {
    let head = r#"{"event_id":"evt_9Kq2xT4mLp","type":"invoice.paid","created":1764449990,"livemode":false,"data":{"id":"inv_7Hc3pQ","object":"invoice","status":"paid","amount":"49.00","currency":"USDT","order_ref":"order_1042","note":""#;
    let tail = r#""}}"#;
    let pad = size.saturating_sub(head.len() + tail.len());
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(head.as_bytes());
    body.extend(std::iter::repeat_n(b'x', pad));
    body.extend_from_slice(tail.as_bytes());
    body
}

fn benches(c: &mut Criterion) {
    let new = Secret::new("whsec_test_new_6f1d2a9c");
    // `two` holds it first, so a header signed only with `old` needs both MACs
    let old = Secret::new("whsec_test_old_03b7e4aa");
    let one = SecretSet::parse("whsec_test_new_6f1d2a9c").unwrap();
    let two = SecretSet::parse("whsec_test_new_6f1d2a9c,whsec_test_old_03b7e4aa").unwrap();
    let stranger = Secret::new("whsec_not_configured_here");

    let mut group = c.benchmark_group("verify");
    for size in [1024usize, 16 * 1024] {
        let body = body_of_size(size);
        let single = signature_header(&[&new], NOW, &body);
        // worst case during rotation: two MACs (the first configured secret matches nothing) and
        // the match is the last of 2 candidates
        let rotation = signature_header(&[&stranger, &old], NOW, &body);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("one_secret", size), &body, |b, body| {
            b.iter(|| verify(Some(black_box(&single)), black_box(body), &one, NOW, 300).unwrap())
        });
        group.bench_with_input(
            BenchmarkId::new("rotation_two_secrets", size),
            &body,
            |b, body| {
                b.iter(|| {
                    verify(Some(black_box(&rotation)), black_box(body), &two, NOW, 300).unwrap()
                })
            },
        );
    }
    group.finish();

    let mut group = c.benchmark_group("parse_envelope");
    for size in [1024usize, 16 * 1024] {
        let body = body_of_size(size);
        assert!(parse_envelope(&body, Some("evt_9Kq2xT4mLp")).is_ok());
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &body, |b, body| {
            b.iter(|| parse_envelope(black_box(body), Some("evt_9Kq2xT4mLp")).unwrap())
        });
    }
    group.finish();
}

criterion_group! {
    name = core;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = benches
}
criterion_main!(core);
