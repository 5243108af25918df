use super::*;

#[test]
fn waiting_ends_survive_encoding() {
    let e = RecordEnd {
        library: 3,
        reference: 1,
        coordinate: -7,
        reverse: true,
        mate_reference: 0,
        score: -1200,
        location: Location {
            tile: 1101,
            x: -5,
            y: 300,
        },
        read_group: 2,
        first_of_pair: true,
    };
    let mut b = Vec::new();
    encode_waiting(b"read:1", &e, 1 << 40, &mut b);
    encode_waiting(b"", &e, 5, &mut b);
    let d = decode_waiting(&b, Path::new("x")).unwrap();
    assert_eq!(d.len(), 2);
    assert_eq!(
        (d[0].0.as_slice(), d[0].2, d[1].2),
        (&b"read:1"[..], 1 << 40, 5)
    );
    let (a, z) = (&d[0].1, &e);
    assert_eq!(
        (
            a.library,
            a.reference,
            a.coordinate,
            a.reverse,
            a.mate_reference
        ),
        (
            z.library,
            z.reference,
            z.coordinate,
            z.reverse,
            z.mate_reference
        )
    );
    assert_eq!(
        (a.score, a.location, a.read_group, a.first_of_pair),
        (z.score, z.location, z.read_group, z.first_of_pair)
    );
    assert!(decode_waiting(&b[..b.len() - 1], Path::new("x")).is_err());
}

fn end(reference: i32, mate_reference: i32) -> RecordEnd {
    RecordEnd {
        library: 0,
        reference,
        coordinate: 1,
        reverse: false,
        mate_reference,
        score: 0,
        location: Location::default(),
        read_group: 0,
        first_of_pair: true,
    }
}

/// [`ambiguous`] on `ends` (range, name, reference, mate reference; in file order) as the map
/// tasks leave them: the name it reports.
fn check(ends: &[(usize, &str, i32, i32)]) -> Option<String> {
    let ranges = ends.iter().map(|e| e.0 + 1).max().unwrap_or(0);
    let (mut waiting, mut starts, mut settled) = (Vec::new(), vec![0], Vec::new());
    for r in 0..ranges {
        let mut p = Pending::tracking();
        for (i, (_, n, a, b)) in ends.iter().enumerate().filter(|e| e.1 .0 == r) {
            p.add(n.as_bytes(), &end(*a, *b), i as u64);
        }
        settled.push(
            p.take_settled()
                .iter()
                .flat_map(|h| h.to_le_bytes())
                .collect(),
        );
        waiting.extend(p.into_waiting());
        starts.push(waiting.len());
    }
    ambiguous(&waiting, &starts, &settled)
        .map(|i| String::from_utf8_lossy(&waiting[i].0).into_owned())
}

#[test]
fn ambiguous_names_are_those_the_ranges_may_pair_otherwise() {
    // Ordinary pairs: within a range, across ranges, mate on another reference.
    let ordinary = [
        (0, "a", 0, 0),
        (0, "a", 0, 0),
        (0, "b", 0, 1),
        (1, "b", 1, 0),
        (1, "c", 0, 0),
        (2, "c", 0, 0),
    ];
    assert_eq!(check(&ordinary), None);
    // Three ends in one range, four paired within two ranges: paired as the one machine does.
    assert_eq!(
        check(&[
            (0, "d", 0, 0),
            (0, "d", 0, 0),
            (0, "d", 0, 0),
            (1, "e", 0, 0)
        ]),
        None
    );
    assert_eq!(
        check(&[
            (0, "f", 0, 0),
            (0, "f", 0, 0),
            (1, "f", 0, 0),
            (1, "f", 0, 0)
        ]),
        None
    );
    // Two ends of one name that never pair (inconsistent mates), in two ranges.
    assert_eq!(check(&[(0, "g", 0, 1), (1, "g", 0, 1)]), None);
    // A waiting end and a pair formed in another range.
    assert_eq!(
        check(&[(0, "x", 0, 0), (1, "x", 0, 0), (1, "x", 0, 0)]).as_deref(),
        Some("x")
    );
    // Three waiting ends in three ranges.
    assert_eq!(
        check(&[(0, "y", 0, 1), (1, "y", 1, 0), (2, "y", 1, 0)]).as_deref(),
        Some("y")
    );
    // An end replaced within its range: two ends wait, but the one machine pairs the first
    // end of the second range, the ranges and the join its second.
    assert_eq!(
        check(&[(0, "z", 0, 1), (1, "z", 1, 0), (1, "z", 1, 0)]).as_deref(),
        Some("z")
    );
    // The first such name in file order.
    assert_eq!(
        check(&[
            (0, "q", 0, 1),
            (0, "p", 0, 0),
            (1, "p", 0, 0),
            (1, "p", 0, 0),
            (1, "q", 1, 0),
            (2, "q", 1, 0),
        ])
        .as_deref(),
        Some("q")
    );
}
