//! cargo fuzz target `index`: see `checks::index`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::index(data));
