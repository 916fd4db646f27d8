//! Saved results as `wirerate import` reads them, and the checks before storing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirerate_core::saved::parse_entries;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(entries) = parse_entries(text) {
        for e in entries {
            let _ = e.result.check_plausible();
        }
    }
});
