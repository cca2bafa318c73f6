use crate::mount;

fn bytes(od: &str) -> Vec<u8> {
    od.split_whitespace()
        .map(|b| b.parse().expect("od -t u1 byte"))
        .collect()
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().unwrap())
}

#[test]
fn index_entry_points_at_a_batch_header() {
    let m = mount!("index.interval.bytes=100");
    m.ok("mkdir t-0");
    // Ten writes of five 100-byte lines: ten batches of five records, each
    // larger than the index interval, so batches 1..9 are indexed.
    for w in 0..10 {
        let lines: String = (0..5).map(|r| format!("{:0100}\\n", w * 5 + r)).collect();
        m.ok(&format!("printf '{lines}' >> t-0/log"));
    }
    assert_eq!(
        m.ok("stat -c %s t-0/00000000000000000000.index").trim(),
        "10485760"
    );
    for entry in [0usize, 3, 8] {
        let e = bytes(&m.ok(&format!(
            "dd if=t-0/00000000000000000000.index bs=8 skip={entry} count=1 status=none | od -A n -t u1"
        )));
        let (rel, pos) = (be32(&e[0..4]), be32(&e[4..8]));
        // Kafka indexes a batch by its last offset, at the batch's start.
        let batch = entry + 1;
        assert_eq!(rel as usize, batch * 5 + 4, "entry {entry}");
        let h = bytes(&m.ok(&format!(
            "dd if=t-0/00000000000000000000.log bs=1 skip={pos} count=17 status=none | od -A n -t u1"
        )));
        let base = u64::from_be_bytes(h[0..8].try_into().unwrap());
        assert_eq!(
            base as usize,
            batch * 5,
            "base offset of the batch at {pos}"
        );
        assert_eq!(h[16], 2, "magic");
        let hex = m.ok(&format!(
            "dd if=t-0/00000000000000000000.log bs=1 skip={pos} count=16 status=none | hexdump -C"
        ));
        assert!(hex.starts_with("00000000  00 00 00 00 00 00 00"), "{hex}");
    }
    // The mount serves exactly the bytes on disk.
    let data = m.data.join("t-0");
    for f in [
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ] {
        m.ok(&format!("cmp t-0/{f} {}/{f}", data.display()));
    }
}
