//! cargo fuzz target `doc`: see `checks::doc`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::doc(data));
