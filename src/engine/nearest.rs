//! What the `nearest` match rule needs to rank recorded calls fast, built
//! once at load: each distinct recorded call's params flattened into
//! leaves (a pointer and the scalar, or empty object or array, found
//! there), and which calls hold a leaf at each pointer and which hold each
//! exact leaf. A request then costs its own flattening, one lookup per
//! leaf, and a pass over a counter per recorded call; the edit distance
//! (the tie-break) is worked out only for the calls that tie on the
//! fewest differing leaves (the first [`MAX_TIE_BREAKS`] of them).
//! [`NearestIndex::nearest`] is that path;
//! the plain one it must agree with compares the request with every call
//! leaf by leaf (its tests).

use serde_json::Value;

use crate::limits::MAX_TIE_BREAKS;
use crate::model::canonical_json;
use crate::normalize;
use crate::util::FastMap;

/// Characters of a differing value the tie-break compares at most: it
/// stays cheap on long values.
const DISTANCE_CHARS: usize = 200;

/// One place in params: a pointer and what is there.
#[derive(Clone, Debug, PartialEq)]
pub struct Leaf {
    pointer: String,
    value: Value,
}

/// How near a recorded call is: differing leaves, then the summed edit
/// distance between the differing values; smaller is nearer.
pub type Rank = (usize, usize);

/// The recorded calls of one tool (one era's), as `nearest` ranks them.
#[derive(Debug, Default)]
pub struct NearestIndex {
    /// Each call's leaves, sorted by pointer.
    calls: Vec<Vec<Leaf>>,
    /// Each call's number of leaves (beside each other, for the ranking pass).
    sizes: Vec<u32>,
    /// The calls holding a leaf at a pointer.
    by_pointer: FastMap<String, Vec<u32>>,
    /// The calls holding a leaf (pointer and value) exactly, by [`leaf_key`].
    by_leaf: FastMap<String, Vec<u32>>,
}

impl NearestIndex {
    /// Adds the next recorded call, with its (prepared) params.
    pub fn add(&mut self, params: &Value) {
        let at = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
        let leaves = leaves(params);
        for leaf in &leaves {
            self.by_pointer.entry(leaf.pointer.clone()).or_default().push(at);
            self.by_leaf.entry(leaf_key(leaf)).or_default().push(at);
        }
        self.sizes.push(u32::try_from(leaves.len()).unwrap_or(u32::MAX));
        self.calls.push(leaves);
    }

    /// The recorded call nearest to a request whose params flatten to
    /// `request` (see [`leaves`]), with its rank; the first recorded of
    /// equally near ones. `None` when nothing is recorded.
    pub fn nearest(&self, request: &[Leaf]) -> Option<(Rank, usize)> {
        // Differing leaves of call c: |request| + |c| - (pointers both hold) - (leaves both hold).
        // What every call holds counts once for all (it cannot change which is nearest).
        let mut shared = vec![0usize; self.calls.len()];
        let mut everyone = 0;
        let lists = request
            .iter()
            .flat_map(|leaf| [self.by_pointer.get(&leaf.pointer), self.by_leaf.get(&leaf_key(leaf))]);
        for holders in lists.flatten() {
            if holders.len() == self.calls.len() {
                everyone += 1;
                continue;
            }
            for at in holders {
                shared[*at as usize] += 1;
            }
        }
        // One tight pass for the fewest, a second for the calls that tie on it.
        // (Shared counts pointers and leaves both: it may exceed a call's size.)
        let own = |at: usize| self.sizes[at] as isize - shared[at] as isize;
        let fewest = (0..self.calls.len()).map(own).min()?;
        let differing = (request.len() as isize + fewest - everyone as isize) as usize;
        (0..self.calls.len())
            .filter(|at| own(*at) == fewest)
            .take(MAX_TIE_BREAKS)
            .map(|at| ((differing, distance(&self.calls[at], request)), at))
            .min_by_key(|(rank, at)| (*rank, *at))
    }
}

/// `params` flattened: every scalar, empty object and empty array with its
/// RFC 6901 pointer, sorted by pointer.
pub fn leaves(params: &Value) -> Vec<Leaf> {
    fn walk(pointer: String, value: &Value, out: &mut Vec<Leaf>) {
        let child = |key: &str| normalize::pointer_child(&pointer, key);
        match value {
            Value::Object(map) if !map.is_empty() => {
                map.iter().for_each(|(key, v)| walk(child(key), v, out));
            }
            Value::Array(items) if !items.is_empty() => {
                items.iter().enumerate().for_each(|(i, v)| walk(child(&i.to_string()), v, out));
            }
            leaf => out.push(Leaf { pointer, value: leaf.clone() }),
        }
    }
    let mut out = Vec::new();
    walk(String::new(), params, &mut out);
    out.sort_by(|a, b| a.pointer.cmp(&b.pointer));
    out
}

/// How many leaves `params` flattens to (see [`leaves`]), counted without
/// building them.
pub fn leaf_count(params: &Value) -> usize {
    match params {
        Value::Object(map) if !map.is_empty() => map.values().map(leaf_count).sum(),
        Value::Array(items) if !items.is_empty() => items.iter().map(leaf_count).sum(),
        _ => 1,
    }
}

/// A leaf as one map key: its pointer, a NUL, its value's canonical JSON
/// (which never holds a raw NUL, so no two leaves share a key).
fn leaf_key(leaf: &Leaf) -> String {
    format!("{}\u{0}{}", leaf.pointer, canonical_json(&leaf.value))
}

/// The summed edit distance between the values of the leaves where two
/// sorted leaf lists differ (a leaf on one side only is against nothing).
fn distance(recorded: &[Leaf], requested: &[Leaf]) -> usize {
    let (mut a, mut b) = (recorded.iter().peekable(), requested.iter().peekable());
    let mut sum = 0;
    loop {
        let (left, right) = match (a.peek(), b.peek()) {
            (None, None) => return sum,
            (Some(x), Some(y)) if x.pointer == y.pointer => (a.next(), b.next()),
            (Some(x), Some(y)) if x.pointer < y.pointer => (a.next(), None),
            (Some(_), None) => (a.next(), None),
            _ => (None, b.next()),
        };
        let (left, right) = (left.map(|l| &l.value), right.map(|l| &l.value));
        if left != right {
            sum += edit_distance(left, right);
        }
    }
}

/// The edit distance between two values' texts (a string's own text,
/// anything else's JSON; each cut to `DISTANCE_CHARS`); absent is empty.
pub fn edit_distance(recorded: Option<&Value>, requested: Option<&Value>) -> usize {
    let text = |value: Option<&Value>| -> Vec<char> {
        let text = match value {
            None => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        text.chars().take(DISTANCE_CHARS).collect()
    };
    let (a, b) = (text(recorded), text(requested));
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// The plain path: every recorded call compared with the request leaf
    /// by leaf.
    fn nearest_plainly(calls: &[Vec<Leaf>], request: &[Leaf]) -> Option<(Rank, usize)> {
        let differing = |call: &[Leaf]| {
            let mut pointers: Vec<&str> = call.iter().chain(request).map(|l| l.pointer.as_str()).collect();
            pointers.sort_unstable();
            pointers.dedup();
            let at =
                |leaves: &[Leaf], p: &str| leaves.iter().find(|l| l.pointer == p).map(|l| l.value.clone());
            pointers.iter().filter(|p| at(call, p) != at(request, p)).count()
        };
        let fewest = calls.iter().map(|call| differing(call)).min()?;
        let tied = calls.iter().enumerate().filter(|(_, call)| differing(call) == fewest);
        tied.take(MAX_TIE_BREAKS).map(|(at, call)| ((fewest, distance(call, request)), at)).min()
    }

    #[test]
    fn the_tie_break_looks_at_the_first_recorded_ties_only() {
        let mut index = NearestIndex::default();
        for n in 0..MAX_TIE_BREAKS {
            index.add(&json!({"subject": format!("far away {n}")}));
        }
        index.add(&json!({"subject": "close"}));
        let request = leaves(&json!({"subject": "closer"}));
        let ((differing, _), at) = index.nearest(&request).unwrap();
        assert_eq!(differing, 1);
        assert!(at < MAX_TIE_BREAKS, "the tie past the bound is not weighed: {at}");
        let mut fewer = NearestIndex::default();
        fewer.add(&json!({"subject": "far away"}));
        fewer.add(&json!({"subject": "close"}));
        assert_eq!(fewer.nearest(&request).map(|(_, at)| at), Some(1), "within the bound the closest wins");
    }

    #[test]
    fn leaves_are_every_scalar_and_empty_container_by_pointer() {
        let params = json!({"b": [1, {"c": null}], "a": {}, "x/y": "s", "e": []});
        let found = leaves(&params);
        assert_eq!(leaf_count(&params), found.len());
        let pointers: Vec<&str> = found.iter().map(|l| l.pointer.as_str()).collect();
        assert_eq!(pointers, ["/a", "/b/0", "/b/1/c", "/e", "/x~1y"]);
        assert_eq!(found[2].value, Value::Null);
    }

    #[test]
    fn fewest_differing_leaves_then_distance_then_first() {
        let mut index = NearestIndex::default();
        for params in [
            json!({"subject": "Team sync", "top": 5}),
            json!({"subject": "Budget review", "top": 5}),
            json!({"subject": "Team sync", "top": 10, "extra": true}),
            json!({"subject": "Team sync", "top": 5}),
        ] {
            index.add(&params);
        }
        let nearest = |request: Value| index.nearest(&leaves(&request)).map(|(_, at)| at);
        assert_eq!(nearest(json!({"subject": "Team sync tomorrow", "top": 5})), Some(0));
        assert_eq!(nearest(json!({"subject": "Budget", "top": 5})), Some(1));
        assert_eq!(nearest(json!({"subject": "Team sync", "top": 10, "extra": true})), Some(2));
        assert_eq!(NearestIndex::default().nearest(&leaves(&json!({}))), None);
    }

    #[test]
    fn edit_distance_is_levenshtein() {
        let d = |a: &str, b: &str| edit_distance(Some(&json!(a)), Some(&json!(b)));
        assert_eq!((d("kitten", "sitting"), d("", "abc"), d("same", "same")), (3, 3, 0));
        assert_eq!(edit_distance(None, Some(&json!(12))), 2);
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!(null)),
            (0..4i64).prop_map(Value::from),
            prop::sample::select(vec!["a", "ab", "b", "Team sync", ""]).prop_map(Value::from),
            Just(json!([])),
            Just(json!({})),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..3).prop_map(Value::from),
                prop::collection::btree_map(prop::sample::select(vec!["k", "n", "x/y"]), inner, 1..3)
                    .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn the_index_ranks_as_the_plain_comparison_does(
            recorded in prop::collection::vec(value(), 0..8),
            request in value(),
        ) {
            let mut index = NearestIndex::default();
            recorded.iter().for_each(|params| index.add(params));
            let calls: Vec<Vec<Leaf>> = recorded.iter().map(leaves).collect();
            let request = leaves(&request);
            prop_assert_eq!(index.nearest(&request), nearest_plainly(&calls, &request));
        }
    }
}
