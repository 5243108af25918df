//! Optical duplicates within one duplicate set of pairs, as Picard's `OpticalDuplicateFinder`
//! (2.27.5): sets of 2-3 use the pairwise pass, larger sets the graph clustering (connected
//! components of "same read group and tile, |dx| and |dy| <= distance"), each cluster keeping one
//! representative (the keeper's, else the lowest x then y).

/// One set member's optical data.
#[derive(Clone, Copy, Debug)]
pub struct Spot {
    /// Read group index.
    pub read_group: i16,
    /// Tile (-1: no location).
    pub tile: i16,
    /// X.
    pub x: i16,
    /// Y.
    pub y: i16,
}

impl Spot {
    fn located(&self) -> bool {
        self.tile != -1
    }
    fn near(&self, o: &Spot, d: i32) -> bool {
        (i32::from(self.x) - i32::from(o.x)).abs() <= d
            && (i32::from(self.y) - i32::from(o.y)).abs() <= d
    }
    fn close(&self, o: &Spot, d: i32) -> bool {
        self.located()
            && o.located()
            && self.read_group == o.read_group
            && self.tile == o.tile
            && self.near(o, d)
    }
}

/// Flags the optical duplicates among `spots` (`keeper`: the index of the representative if it is in
/// this list); `flags` is cleared and filled. `max_set`: Picard MAX_OPTICAL_DUPLICATE_SET_SIZE.
pub fn find(spots: &[Spot], keeper: Option<usize>, d: i32, max_set: u64, flags: &mut Vec<bool>) {
    let n = spots.len();
    flags.clear();
    flags.resize(n, false);
    if n < 2 || n as u64 > max_set {
        return;
    }
    // Picard passes the pair list's best end as the keeper, so the graph is used from 4 on.
    let keeper = keeper.filter(|&k| spots[k].located());
    if n >= 4 {
        graph(spots, keeper, d, flags);
    } else {
        pairwise(spots, keeper, d, flags);
    }
}

fn pairwise(s: &[Spot], keeper: Option<usize>, d: i32, flags: &mut [bool]) {
    let n = s.len();
    if let Some(k) = keeper {
        for i in 0..n {
            flags[i] = i != k && s[k].close(&s[i], d);
        }
    }
    for i in 0..n {
        if Some(i) == keeper {
            continue;
        }
        for j in i + 1..n {
            if Some(j) == keeper || (flags[i] && flags[j]) {
                continue;
            }
            if s[i].close(&s[j], d) {
                let index = if flags[j] { i } else { j };
                flags[index] = true;
            }
        }
    }
}

fn find_root(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

fn graph(s: &[Spot], keeper: Option<usize>, d: i32, flags: &mut [bool]) {
    let n = s.len();
    // Members with a location, grouped by (read group, tile), in list order within a group.
    let mut order: Vec<usize> = (0..n).filter(|&i| s[i].located()).collect();
    order.sort_by_key(|&i| (s[i].read_group, s[i].tile, i));
    let mut parent: Vec<usize> = (0..n).collect();
    let mut g = 0;
    while g < order.len() {
        let key = |i: usize| (s[i].read_group, s[i].tile);
        let e = g + order[g..]
            .iter()
            .take_while(|&&i| key(i) == key(order[g]))
            .count();
        for a in g..e {
            for b in a + 1..e {
                let (i, j) = (order[a], order[b]);
                if s[i].near(&s[j], d) {
                    let (ri, rj) = (find_root(&mut parent, i), find_root(&mut parent, j));
                    if ri != rj {
                        parent[ri.max(rj)] = ri.min(rj);
                    }
                }
            }
        }
        g = e;
    }
    let cluster: Vec<usize> = (0..n).map(|i| find_root(&mut parent, i)).collect();
    // Representative per cluster; the keeper's cluster is pre-seeded with the keeper.
    let mut rep: Vec<Option<usize>> = vec![None; n];
    let keeper_cluster = keeper.map(|k| cluster[k]);
    if let Some(k) = keeper {
        rep[cluster[k]] = Some(k);
    }
    for i in 0..n {
        let c = cluster[i];
        match rep[c] {
            Some(r) if Some(i) != keeper => {
                let better = (s[i].x, s[i].y) < (s[r].x, s[r].y);
                if Some(c) != keeper_cluster && better {
                    flags[r] = true;
                    rep[c] = Some(i);
                } else {
                    flags[i] = true;
                }
            }
            _ => rep[c] = Some(i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spot(tile: i16, x: i16, y: i16) -> Spot {
        Spot {
            read_group: 0,
            tile,
            x,
            y,
        }
    }

    #[test]
    fn pairwise_and_graph() {
        let mut f = Vec::new();
        find(
            &[spot(1, 10, 10), spot(1, 50, 50)],
            Some(0),
            100,
            300000,
            &mut f,
        );
        assert_eq!(f, [false, true]);
        find(
            &[spot(1, 10, 10), spot(2, 50, 50)],
            Some(0),
            100,
            300000,
            &mut f,
        );
        assert_eq!(f, [false, false]);
        // Chain 0-1-2 within 100 each, 3 far away; keeper 3: cluster {0,1,2} keeps its lowest x.
        let s = [
            spot(1, 300, 0),
            spot(1, 200, 0),
            spot(1, 100, 0),
            spot(1, 9000, 0),
        ];
        find(&s, Some(3), 100, 300000, &mut f);
        assert_eq!(f, [true, true, false, false]);
    }
}
