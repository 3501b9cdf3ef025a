//! cargo fuzz target `strip`: see `checks::strip`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::strip(data));
