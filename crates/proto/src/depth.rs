//! A guard for JSON from peers: serde_json parses nested arrays and objects by recursion,
//! and a peer that sends thousands of levels can exhaust a small thread stack before the
//! parser's own limit is reached. This scan counts nesting without recursion.

/// Deepest nesting a peer's JSON may have. wirerate's and iperf3's messages use fewer than
/// ten levels.
pub const MAX_DEPTH: usize = 32;

/// True when arrays and objects in `body` nest at most `max` levels (brackets inside
/// strings are not counted).
pub fn nesting_within(body: &[u8], max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in body {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_levels_outside_strings() {
        assert!(nesting_within(br#"{"a":[1,{"b":2}]}"#, 3));
        assert!(!nesting_within(br#"{"a":[1,{"b":2}]}"#, 2));
        assert!(nesting_within(br#"{"s":"[[[[[[\"[[[[["}"#, 1));
        assert!(!nesting_within(&[b'['; 100], 32));
    }
}
